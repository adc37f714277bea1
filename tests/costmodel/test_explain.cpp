// cleave explain and cleave published, driven in process through make_app() (STYLE S7.4).
#include "cli/app.hpp"

#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace cleave;

namespace {

struct Run {
    int code = -1;
    std::string out;
    std::string err;
};

Run run(std::vector<std::string> args) {
    args.insert(args.begin(), "cleave");
    std::vector<const char*> argv;
    for (const auto& a : args) {
        argv.push_back(a.c_str());
    }
    std::ostringstream out;
    std::ostringstream err;
    cli::CliContext ctx{out, err};
    Run r;
    r.code = cli::run_cli(static_cast<int>(argv.size()), argv.data(), ctx);
    r.out = out.str();
    r.err = err.str();
    return r;
}

const std::string gpt3 = std::string(CLEAVE_TEST_DATA_DIR) + "/examples/gpt3-175b.toml";

}  // namespace

TEST_SUITE("costmodel") {
    TEST_CASE("explain: JSON carries the DESIGN section 3 fields") {
        const Run r = run({"explain",
                           gpt3,
                           "dgx-a100-80g",
                           "--gpus",
                           "64",
                           "--gbs",
                           "64",
                           "--tp",
                           "8",
                           "--pp",
                           "8",
                           "--vpp",
                           "3",
                           "--sp",
                           "--recompute",
                           "selective",
                           "--format",
                           "json"});
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const auto j = nlohmann::json::parse(r.out);
        for (const char* k : {"iteration_time_s",
                              "tokens_per_s",
                              "tflops_per_gpu",
                              "mfu",
                              "bubble_ratio",
                              "fits",
                              "risks"}) {
            CHECK_MESSAGE(j.contains(k), k);
        }
        for (const char* k : {"weights", "grads", "optimizer", "activations", "total"}) {
            CHECK(j["memory_gib"].contains(k));
        }
        for (const char* k : {"dp", "tp", "pp"}) {
            CHECK(j["comm_bytes_per_gpu"].contains(k));
        }
        CHECK(j["bubble_ratio"].get<double>() == doctest::Approx(7.0 / 199.0));
        CHECK(j["plan"]["schedule"] == "interleaved");
    }

    TEST_CASE("explain: the table fits 100 columns and marks non-data lines") {
        const Run r = run({"explain",
                           gpt3,
                           "dgx-a100-80g",
                           "--gpus",
                           "64",
                           "--gbs",
                           "16",
                           "--tp",
                           "8",
                           "--pp",
                           "4",
                           "--dp",
                           "2",
                           "--recompute",
                           "full"});
        REQUIRE_MESSAGE(r.code == 0, r.err);
        std::istringstream in(r.out);
        std::string line;
        int lines = 0;
        while (std::getline(in, line)) {
            ++lines;
            CHECK_MESSAGE(line.size() <= 100, line);
        }
        CHECK(lines > 15);
        CHECK(r.out.find("# memory per GPU") != std::string::npos);
        CHECK(r.out.find("shared_communicator") != std::string::npos);  // pp 4 x dp 2
        CHECK(r.out.find("few_microbatches") == std::string::npos);     // m = 16/2 = 8 >= p = 4
    }

    TEST_CASE("explain: inexpressible plans exit 2 naming the constraint") {
        // TP not dividing the heads: 96 % 7 != 0
        Run r = run({"explain", gpt3, "dgx-a100-80g", "--gpus", "56", "--gbs", "56", "--tp", "7"});
        CHECK(r.code == 2);
        CHECK(r.err.find("tp=7 does not divide heads=96") != std::string::npos);
        // more stages than layers
        r = run({"explain", gpt3, "dgx-a100-80g", "--gpus", "128", "--gbs", "128", "--pp", "128"});
        CHECK(r.code == 2);
        CHECK(r.err.find("pp=128 is more than layers=96") != std::string::npos);
        // mbs not dividing the per-DP batch: 6 sequences over dp=1 in micro-batches of 4
        r = run({"explain",
                 gpt3,
                 "dgx-a100-80g",
                 "--gpus",
                 "8",
                 "--gbs",
                 "6",
                 "--tp",
                 "8",
                 "--mbs",
                 "4"});
        CHECK(r.code == 2);
        CHECK(r.err.find("mbs*dp=4 does not divide the global batch 6") != std::string::npos);
    }
}
