// Issue 18 under mpirun: a DP rank that runs late is waited for in dp_wait, not in dp_comm
// (which the cost model prices as moving bytes). Launches `mpirun -np 2 cleave run`.
#include "tests/shell_run.hpp"

#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

namespace {

using Result = cleave::test::ShellResult;
using cleave::test::shell;

}  // namespace

TEST_SUITE("calibrate") {
    TEST_CASE("run: a late DP rank is waited for in dp_wait, the reduction stays in dp_comm") {
        // Rank 1 sleeps 0.3 s before its first step of every iteration (hidden --fault-mode
        // delay); the tiny model's step is milliseconds, so rank 0 reaches the gradient
        // reduction ~0.3 s first. Before issue 18 that wait was timed as DP communication.
        const std::string cmd =
            std::string(CLEAVE_MPIEXEC) + " --allow-run-as-root --oversubscribe -np 2 " +
            CLEAVE_BIN + " run " + CLEAVE_TEST_DATA_DIR +
            "/tests/calibrate/data/tiny-gpt.toml dgx-a100-80g --gbs 4 --seq 16 --dp 2 --warmup 0 "
            "--iters 2 --timeout 60 --format json --fault-rank 1 --fault-mode delay "
            "--fault-at-step 0";
        const Result r = shell(cmd);
        INFO(cmd);
        INFO(r.output);
        REQUIRE(r.status == 0);
        const auto start = r.output.find('{');
        REQUIRE(start != std::string::npos);
        const nlohmann::json j = nlohmann::json::parse(r.output.substr(start));
        REQUIRE(j["ranks"].size() == 2);
        const nlohmann::json& early = j["ranks"][0]["phases_s"];
        const nlohmann::json& late = j["ranks"][1]["phases_s"];
        CHECK(early["dp_wait"].get<double>() > 0.2);  // ~0.3 s, less what rank 0 computes
        CHECK(early["dp_comm"].get<double>() < 0.1);  // a 0.5 MB all-reduce: milliseconds
        CHECK(late["dp_wait"].get<double>() < 0.1);   // the late rank finds rank 0 waiting
        CHECK(j["phases_s"].contains("dp_wait"));
    }
}
