// The doctest main of the CUDA test programs (instead of tests/main.cpp). Without a usable
// device the device cases (test suite "cuda") are excluded, so doctest counts them as skipped,
// and the program exits with 77, which CTest reports as skipped (SKIP_RETURN_CODE): a machine
// without a GPU never reports these cases as passed. Cases that need no device (suite
// "cuda-nodevice") run only there.
#define DOCTEST_CONFIG_IMPLEMENT
#include "tests/cuda/cuda_fixture.hpp"

#include <cstdio>
#include <string>

#include <doctest/doctest.h>

int main(int argc, char** argv) {
    std::string why;
    const bool usable = cleave::executor::test::devices_usable(why);
    doctest::Context ctx;
    ctx.addFilter("test-suite-exclude", usable ? "cuda-nodevice" : "cuda");
    ctx.applyCommandLine(argc, argv);
    if (!usable) {
        std::printf("[cuda tests] device cases SKIPPED: %s\n", why.c_str());
    }
    const int rc = ctx.run();
    if (ctx.shouldExit() || rc != 0 || usable) {
        return rc;
    }
    return 77;
}
