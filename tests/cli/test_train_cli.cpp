// --tokens and friends through the command line (explain, plan, compare, report): the JSON
// fields of DESIGN section 3 against the hand formulas of costmodel/train_cost.hpp.
#include "cli/app.hpp"

#include <fstream>
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

const std::string seed = std::string(CLEAVE_TEST_DATA_DIR) + "/examples/seed-13b.toml";

std::vector<std::string> explain_args(std::vector<std::string> extra) {
    std::vector<std::string> a = {"explain",
                                  seed,
                                  "dgx-a100-80g",
                                  "--gpus",
                                  "32",
                                  "--gbs",
                                  "128",
                                  "--tp",
                                  "2",
                                  "--pp",
                                  "2",
                                  "--format",
                                  "json",
                                  "--tokens",
                                  "1T"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

}  // namespace

TEST_SUITE("report") {
    TEST_CASE("train cost: explain --tokens without interruptions") {
        const Run r = run(explain_args(
            {"--failures-per-gpu-hour", "0", "--price-per-gpu-hour", "2", "--pue", "1.5"}));
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const auto j = nlohmann::json::parse(r.out);
        const double tps = j["tokens_per_s"].get<double>();
        REQUIRE(tps > 0.0);
        // C = 1e12 / tps seconds; days = C / 86400; GPU-hours = 32 * C / 3600
        const double c = 1e12 / tps;
        CHECK(j["train_days"].get<double>() == doctest::Approx(c / 86400.0).epsilon(1e-12));
        CHECK(j["gpu_hours"].get<double>() == doctest::Approx(32.0 * c / 3600.0).epsilon(1e-12));
        // energy: 400 W (A100 SXM4 TDP, the profile's tdp_w) * 1.5 * GPU-hours / 1e6 MWh
        CHECK(j["energy_mwh"].get<double>() ==
              doctest::Approx(400.0 * 1.5 * 32.0 * c / 3600.0 / 1e6).epsilon(1e-12));
        CHECK(j["cost"].get<double>() == doctest::Approx(2.0 * 32.0 * c / 3600.0).epsilon(1e-12));
        CHECK(j["train"]["lost_days"].get<double>() == doctest::Approx(0.0));
    }

    TEST_CASE("train cost: explain --tokens with the default interruption rate") {
        const Run r = run(explain_args({}));
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const auto j = nlohmann::json::parse(r.out);
        const double c = 1e12 / j["tokens_per_s"].get<double>();
        // lambda = 419 / (54 * 24 * 16384) per GPU-hour, 32 GPUs: 6.3145e-4 per hour;
        // L = 1 h / 2 + 0.25 h = 0.75 h; lost fraction 4.7359e-4; W = C / (1 - 4.7359e-4)
        const double frac = 419.0 / (54.0 * 24.0 * 16384.0) * 32.0 * 0.75;
        CHECK(frac == doctest::Approx(4.7359e-4).epsilon(1e-4));
        CHECK(j["train_days"].get<double>() ==
              doctest::Approx(c / (1.0 - frac) / 86400.0).epsilon(1e-12));
        CHECK(j["train"]["lost_days"].get<double>() ==
              doctest::Approx(c * frac / (1.0 - frac) / 86400.0).epsilon(1e-9));
        CHECK(j["cost"].is_null());  // the profile has no price and none was given
    }

    TEST_CASE("train cost: [job] train_tokens, and a bad --tokens") {
        const std::string job = std::string(CLEAVE_BINARY_DIR) + "/train-tokens-job.toml";
        std::ofstream(job) << "[job]\ngpus = 32\nglobal_batch = 128\ntrain_tokens = 2e12\n";
        Run r = run({"explain",
                     seed,
                     "dgx-a100-80g",
                     "--job",
                     job,
                     "--gpus",
                     "32",
                     "--tp",
                     "2",
                     "--pp",
                     "2",
                     "--format",
                     "json",
                     "--failures-per-gpu-hour",
                     "0"});
        REQUIRE_MESSAGE(r.code == 0, r.err);
        auto j = nlohmann::json::parse(r.out);
        CHECK(j["train"]["tokens"].get<double>() == doctest::Approx(2e12));
        CHECK(j["train_days"].get<double>() ==
              doctest::Approx(2e12 / j["tokens_per_s"].get<double>() / 86400.0));
        r = run(explain_args({"--tokens", "15Q"}));
        CHECK(r.code == 2);
        CHECK(r.err.find("--tokens") != std::string::npos);
        r = run(
            {"explain", seed, "dgx-a100-80g", "--gpus", "32", "--gbs", "128", "--format", "json"});
        REQUIRE(r.code == 0);
        CHECK_FALSE(nlohmann::json::parse(r.out).contains("train_days"));
    }

    TEST_CASE("train cost: plan --objective cost picks the fewest GPU-seconds per step") {
        const Run r = run({"plan",
                           seed,
                           "dgx-a100-80g",
                           "--gpus",
                           "32",
                           "--gbs",
                           "128",
                           "--objective",
                           "cost",
                           "--top",
                           "3",
                           "--format",
                           "json",
                           "--tokens",
                           "1T",
                           "--price-per-gpu-hour",
                           "1"});
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const auto j = nlohmann::json::parse(r.out);
        CHECK(j["objective"] == "cost");
        CHECK(j["gpu_counts_searched"].size() > 1);
        const auto& p = j["plans"];
        REQUIRE(p.size() >= 2);
        // ranked by gpus * step time, so by cost at one price
        CHECK(p[0]["cost"].get<double>() <= p[1]["cost"].get<double>());
        const auto gpus = [](const nlohmann::json& x) {
            return x["plan"]["dp"].get<double>() * x["plan"]["tp"].get<double>() *
                   x["plan"]["pp"].get<double>() * x["plan"]["cp"].get<double>();
        };
        CHECK(gpus(p[0]) * p[0]["iteration_time_s"].get<double>() <=
              gpus(p[1]) * p[1]["iteration_time_s"].get<double>());
    }

    TEST_CASE("train cost: compare shows it per profile") {
        const Run r = run({"compare",
                           seed,
                           "--clusters",
                           "dgx-a100-80g",
                           "dgx-h100",
                           "--gpus",
                           "32",
                           "--gbs",
                           "128",
                           "--format",
                           "json",
                           "--tokens",
                           "1T",
                           "--price-per-gpu-hour",
                           "2"});
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const auto j = nlohmann::json::parse(r.out);
        REQUIRE(j["profiles"].size() == 2);
        for (const auto& row : j["profiles"]) {
            CHECK(row["train_days"].get<double>() > 0.0);
            CHECK(row["cost"].get<double>() ==
                  doctest::Approx(2.0 * row["gpu_hours"].get<double>()));
        }
        // H100 is faster: fewer days for the same job
        CHECK(j["profiles"][1]["train_days"].get<double>() <
              j["profiles"][0]["train_days"].get<double>());
    }
}
