#pragma once
// Runs a shell command (mpirun ... cleave ...) for the tests that launch real MPI jobs, keeping
// its exit status and its stdout and stderr together.
#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

#include <doctest/doctest.h>

namespace cleave::test {

struct ShellResult {
    int status = -1;  // the exit code; 128 when the command did not exit normally
    std::string output;
};

inline ShellResult shell(const std::string& cmd) {
    ShellResult r;
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    REQUIRE(p != nullptr);
    std::array<char, 4096> buf{};
    size_t n = 0;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) {
        r.output.append(buf.data(), n);
    }
    const int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    return r;
}

}  // namespace cleave::test
