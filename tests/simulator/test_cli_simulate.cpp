#include "cli/app.hpp"
#include "tests/cli_run.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

// The seed's 13B model (examples/seed-13b.toml); written to a temporary file when the example
// is not in the tree.
std::string seed_model() {
    const fs::path shipped = fs::path(CLEAVE_TEST_DATA_DIR) / "examples" / "seed-13b.toml";
    if (fs::exists(shipped)) {
        return shipped.string();
    }
    const fs::path tmp = fs::temp_directory_path() / "cleave-test-seed-13b.toml";
    std::ofstream(tmp) << "[model]\nname = \"seed-13b\"\narch = \"gpt\"\nlayers = 32\n"
                          "hidden = 5760\nheads = 40\nffn_hidden = 23040\nvocab = 51200\n"
                          "seq_len = 2048\n";
    return tmp.string();
}

using Run = cleave::test::CliRun;

Run run(std::vector<std::string> args) {
    return cleave::test::run_cleave(std::move(args));
}

}  // namespace

TEST_SUITE("simulator") {
    TEST_CASE("cli simulate: the seed's 13B plan (8 stages x 4-way DP, 4 micro-batches)") {
        const fs::path trace = fs::temp_directory_path() / "cleave-test-sim-seed13b.json";
        fs::remove(trace);
        // 32 GPUs, gbs 128, pp 8, dp 4, mbs 8: m = 128 / (8 * 4) = 4.
        const Run r = run({"simulate",
                           seed_model(),
                           "dgx-a100-80g",
                           "--gpus",
                           "32",
                           "--gbs",
                           "128",
                           "--seq",
                           "2048",
                           "--pp",
                           "8",
                           "--dp",
                           "4",
                           "--mbs",
                           "8",
                           "--format",
                           "json",
                           "--trace",
                           trace.string()});
        INFO(r.err);
        REQUIRE(r.code == 0);
        const auto j = nlohmann::json::parse(r.out);
        CHECK(j["microbatches"] == 4);
        // Closed form (p-1)/(m+p-1) = 7/11 = 63.6 %; the timeline adds the uneven first/last
        // stages and the p2p transfers, so it is near, not equal.
        CHECK(j["analytic_bubble_ratio"].get<double>() == doctest::Approx(7.0 / 11.0));
        const double bubble = j["bubble_ratio"].get<double>();
        CHECK(bubble > 0.60);
        CHECK(bubble < 0.68);
        CHECK(j["iteration_time_s"].get<double>() > 0.0);
        CHECK(j["analytic_iteration_time_s"].get<double>() > 0.0);
        REQUIRE(j["stages"].size() == 8);
        for (const auto& s : j["stages"]) {
            CHECK(s["busy_s"].get<double>() + s["idle_s"].get<double>() +
                      s["comm_wait_s"].get<double>() ==
                  doctest::Approx(j["iteration_time_s"].get<double>()));
        }
        // m = 4 < p: 1F1B stage s holds min(p - s, m) micro-batches.
        CHECK(j["stages"][0]["peak_inflight_microbatches"] == 4.0);
        CHECK(j["stages"][7]["peak_inflight_microbatches"] == 1.0);

        std::ifstream f(trace);
        REQUIRE(f.good());
        const auto t = nlohmann::json::parse(f);
        REQUIRE(t.contains("traceEvents"));
        int64_t complete = 0;
        for (const auto& e : t["traceEvents"]) {
            complete += e["ph"] == "X" ? 1 : 0;
        }
        // Per stage 4 F + 4 B + optimizer; 7 boundaries x 4 micro-batches each way; DP buckets.
        CHECK(complete == j["trace_events"].get<int64_t>());
        CHECK(complete > 8 * 9 + 2 * 7 * 4);
        fs::remove(trace);
    }

    TEST_CASE("cli simulate: table output and bad input") {
        const Run ok = run({"simulate",
                            seed_model(),
                            "dgx-a100-80g",
                            "--gpus",
                            "32",
                            "--gbs",
                            "128",
                            "--pp",
                            "8",
                            "--dp",
                            "4",
                            "--mbs",
                            "8"});
        CHECK(ok.code == 0);
        CHECK(ok.out.rfind("# cleave simulate:", 0) == 0);
        // ZB-H1 on request: shorter than 1F1B.
        const Run zb = run({"simulate",
                            seed_model(),
                            "dgx-a100-80g",
                            "--gpus",
                            "32",
                            "--gbs",
                            "128",
                            "--pp",
                            "8",
                            "--dp",
                            "4",
                            "--mbs",
                            "8",
                            "--sim-schedule",
                            "zb-h1",
                            "--format",
                            "json"});
        REQUIRE(zb.code == 0);
        const Run base = run({"simulate",
                              seed_model(),
                              "dgx-a100-80g",
                              "--gpus",
                              "32",
                              "--gbs",
                              "128",
                              "--pp",
                              "8",
                              "--dp",
                              "4",
                              "--mbs",
                              "8",
                              "--format",
                              "json"});
        REQUIRE(base.code == 0);
        CHECK(nlohmann::json::parse(zb.out)["iteration_time_s"].get<double>() <
              nlohmann::json::parse(base.out)["iteration_time_s"].get<double>());
        // Interleaved needs m divisible by pp (m = 4, pp = 8): a configuration error.
        const Run bad = run({"simulate",
                             seed_model(),
                             "dgx-a100-80g",
                             "--gpus",
                             "32",
                             "--gbs",
                             "128",
                             "--pp",
                             "8",
                             "--dp",
                             "4",
                             "--mbs",
                             "8",
                             "--vpp",
                             "2"});
        CHECK(bad.code == 2);
        const Run nowrite = run({"simulate",
                                 seed_model(),
                                 "dgx-a100-80g",
                                 "--gpus",
                                 "32",
                                 "--gbs",
                                 "128",
                                 "--pp",
                                 "8",
                                 "--dp",
                                 "4",
                                 "--mbs",
                                 "8",
                                 "--trace",
                                 "/nonexistent-dir/x.json"});
        CHECK(nowrite.code == 2);
    }
}
