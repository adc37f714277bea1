// --tokens and friends through the command line (explain, plan, compare, report): the JSON
// fields of DESIGN section 3 against the hand formulas of costmodel/train_cost.hpp.
#include "cli/app.hpp"
#include "tests/cli_run.hpp"

#include <array>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace cleave;

namespace {

using Run = cleave::test::CliRun;

Run run(std::vector<std::string> args) {
    return cleave::test::run_cleave(std::move(args));
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

    TEST_CASE("train cost: the explain table shows it within 100 columns") {
        const Run r = run({"explain",
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
                           "--tokens",
                           "1T",
                           "--price-per-gpu-hour",
                           "2"});
        REQUIRE_MESSAGE(r.code == 0, r.err);
        CHECK(r.out.find("# time and cost to train 1e+12 tokens") != std::string::npos);
        std::istringstream lines(r.out);
        for (std::string l; std::getline(lines, l);) {
            CHECK_MESSAGE(l.size() <= 100, l);
        }
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
            // --price-per-gpu-hour also prices one iteration: $2 * 32 GPUs * step / 3600
            CHECK(row["cost_per_iteration_usd"].get<double>() ==
                  doctest::Approx(2.0 * 32.0 * row["best"]["iteration_time_s"].get<double>() /
                                  3600.0));
        }
        // H100 is faster: fewer days for the same job
        CHECK(j["profiles"][1]["train_days"].get<double>() <
              j["profiles"][0]["train_days"].get<double>());
    }
}

TEST_SUITE("report") {
    TEST_CASE("report: --clusters compares profiles on one page") {
        const std::string out = std::string(CLEAVE_BINARY_DIR) + "/report-clusters.html";
        const Run r = run({"report",
                           seed,
                           "--clusters",
                           "dgx-a100-80g",
                           "dgx-h100",
                           "--gpus",
                           "32",
                           "--gbs",
                           "128",
                           "--tokens",
                           "300B",
                           "--price-per-gpu-hour",
                           "2",
                           "--top",
                           "3",
                           "-o",
                           out});
        REQUIRE_MESSAGE(r.code == 0, r.err);
        std::ifstream in(out);
        const std::string html((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
        CHECK(html.find("Across hardware profiles") != std::string::npos);
        CHECK(html.find("<h2>seed-13b on dgx-a100-80g</h2>") != std::string::npos);
        CHECK(html.find("<h2>seed-13b on dgx-h100</h2>") != std::string::npos);
        // one scatter, memory, time and timeline plot per profile
        std::size_t plots = 0;
        for (std::size_t at = html.find("<svg id=\"scatter\""); at != std::string::npos;
             at = html.find("<svg id=\"scatter\"", at + 1)) {
            ++plots;
        }
        CHECK(plots == 2);
        // the same best plan as `cleave plan` picks for each profile
        const Run p = run({"plan",
                           seed,
                           "dgx-h100",
                           "--gpus",
                           "32",
                           "--gbs",
                           "128",
                           "--top",
                           "1",
                           "--format",
                           "json"});
        REQUIRE(p.code == 0);
        const std::string flags = nlohmann::json::parse(p.out)["plans"][0]["plan"]["flags"];
        CHECK(html.find("<td class=\"l\">" + flags + "</td>") != std::string::npos);
    }

    TEST_CASE("report: the scatter's points are the plan list of cleave plan") {
        const std::string out = std::string(CLEAVE_BINARY_DIR) + "/report-points.html";
        const std::vector<std::string> job = {std::string(CLEAVE_TEST_DATA_DIR) +
                                                  "/examples/llama-3-8b.toml",
                                              "dgx-a100-80g",
                                              "--gpus",
                                              "4",
                                              "--gbs",
                                              "32"};
        std::vector<std::string> a = {"report"};
        a.insert(a.end(), job.begin(), job.end());
        a.insert(a.end(), {"-o", out});
        const Run r = run(a);
        REQUIRE_MESSAGE(r.code == 0, r.err);
        std::vector<std::string> b = {"plan"};
        b.insert(b.end(), job.begin(), job.end());
        b.insert(b.end(), {"--top", "2000", "--format", "json"});
        const Run p = run(b);
        REQUIRE(p.code == 0);
        const auto plans = nlohmann::json::parse(p.out);
        std::ifstream in(out);
        const std::string html((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
        // every feasible plan (572 here, under the 2000 drawn at most) is one circle, in rank
        // order, at its step time and peak memory
        // <circle class="pt..." data-i="I" data-time-s="T" data-memory-gib="M"
        const auto field = [&html](std::size_t& at, const std::string& key, std::string& value) {
            if (html.compare(at, key.size(), key) != 0) {
                return false;
            }
            const auto from = at + key.size();
            const auto to = html.find('"', from);
            if (to == std::string::npos) {
                return false;
            }
            value = html.substr(from, to - from);
            at = to + 1;
            return true;
        };
        std::vector<std::array<std::string, 3>> circles;
        const std::string open = "<circle class=\"pt";
        for (auto at = html.find(open); at != std::string::npos; at = html.find(open, at + 1)) {
            std::size_t pos = html.find('"', at + open.size());
            if (pos == std::string::npos) {
                break;
            }
            ++pos;
            std::array<std::string, 3> v;
            if (field(pos, " data-i=\"", v[0]) && field(pos, " data-time-s=\"", v[1]) &&
                field(pos, " data-memory-gib=\"", v[2]) && !v[0].empty() &&
                v[0].find_first_not_of("0123456789") == std::string::npos) {
                circles.push_back(v);
            }
        }
        std::size_t n = 0;
        for (const auto& c : circles) {
            ++n;
            const auto i = static_cast<std::size_t>(std::stoul(c[0]));
            REQUIRE(i < plans["plans"].size());
            const auto& pj = plans["plans"][i];
            CHECK(std::stod(c[1]) ==
                  doctest::Approx(pj["iteration_time_s"].get<double>()).epsilon(1e-8));
            CHECK(std::stod(c[2]) ==
                  doctest::Approx(pj["memory_gib"]["total"].get<double>()).epsilon(1e-8));
        }
        CHECK(n == plans["feasible"].get<std::size_t>());
        CHECK(n == plans["plans"].size());
    }

    TEST_CASE("report: no CLUSTER and no --clusters is bad input") {
        const Run r = run({"report", seed, "--gpus", "32", "--gbs", "128", "-o", "/dev/null"});
        CHECK(r.code == 2);
        CHECK(r.err.find("--clusters") != std::string::npos);
    }
}
