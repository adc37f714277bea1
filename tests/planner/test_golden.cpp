// End to end (STYLE S7.6): `cleave plan ... --format json` against tests/golden/<x>.json with a
// numeric tolerance. Goldens are regenerated deliberately (docs/planner.md), never by a test.
#include "cli/app.hpp"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

namespace {

std::string run(const std::vector<std::string>& args, int& code) {
    std::ostringstream out;
    std::ostringstream err;
    cleave::cli::CliContext ctx{out, err};
    std::vector<const char*> argv{"cleave"};
    for (const auto& a : args) {
        argv.push_back(a.c_str());
    }
    code = cleave::cli::run_cli(static_cast<int>(argv.size()), argv.data(), ctx);
    return out.str();
}

/// Every difference between `got` and `want` beyond a relative tolerance of 1e-6 on numbers,
/// as "path: got vs want"; keys named elapsed_s or source (a checkout's path)
/// are skipped, keys only `got` has are allowed.
void diff(const nlohmann::json& got,
          const nlohmann::json& want,
          const std::string& path,
          std::vector<std::string>& out) {
    if (got.is_number() && want.is_number()) {
        const double g = got.get<double>();
        const double w = want.get<double>();
        if (std::abs(g - w) > 1e-6 * std::max(std::abs(w), 1e-12)) {
            out.push_back(path + ": " + got.dump() + " vs " + want.dump());
        }
        return;
    }
    // An object may carry keys the golden file lacks (DESIGN section 3: fields are added freely);
    // every key of the golden file must match.
    if (got.type() != want.type() || (!got.is_object() && got.size() != want.size())) {
        out.push_back(path + ": " + got.dump().substr(0, 80) + " vs " + want.dump().substr(0, 80));
        return;
    }
    if (got.is_object()) {
        for (auto it = want.begin(); it != want.end(); ++it) {
            // elapsed_s varies by run; "source" is an absolute path that varies by checkout.
            if (it.key() == "elapsed_s" || it.key() == "source") {
                continue;
            }
            if (!got.contains(it.key())) {
                out.push_back(path + "." + it.key() + ": missing");
                continue;
            }
            diff(got[it.key()], it.value(), path + "." + it.key(), out);
        }
    } else if (got.is_array()) {
        for (std::size_t i = 0; i < want.size(); ++i) {
            diff(got[i], want[i], path + "[" + std::to_string(i) + "]", out);
        }
    } else if (got != want) {
        out.push_back(path + ": " + got.dump() + " vs " + want.dump());
    }
}

}  // namespace

TEST_SUITE("planner") {
    TEST_CASE("golden: cleave plan seed-13b on dgx-a100-80g matches tests/golden/seed-13b.json") {
        const std::string root = CLEAVE_TEST_DATA_DIR;
        int code = -1;
        const std::string got = run({"plan",
                                     root + "/examples/seed-13b.toml",
                                     root + "/hwprofiles/dgx-a100-80g.toml",
                                     "--job",
                                     root + "/examples/seed-13b-job.toml",
                                     "--gpus",
                                     "32",
                                     "--top",
                                     "5",
                                     // the stack the golden was generated with (docs/stacks.md)
                                     "--stack",
                                     "megatron-2021",
                                     "--format",
                                     "json"},
                                    code);
        REQUIRE(code == 0);
        std::ifstream f(root + "/tests/golden/seed-13b.json");
        REQUIRE(f.good());
        const nlohmann::json want = nlohmann::json::parse(f);
        std::vector<std::string> diffs;
        diff(nlohmann::json::parse(got), want, "", diffs);
        for (const auto& d : diffs) {
            INFO(d);
            CHECK(false);
        }
        CHECK(diffs.empty());
    }

    TEST_CASE("golden: same input gives byte-identical table output but for the elapsed line") {
        const std::string root = CLEAVE_TEST_DATA_DIR;
        const std::vector<std::string> args{"plan",
                                            root + "/examples/seed-13b.toml",
                                            root + "/hwprofiles/a100-pcie-1gbe.toml",
                                            "--job",
                                            root + "/examples/seed-13b-job.toml",
                                            "--gpus",
                                            "32"};
        int c1 = -1;
        int c2 = -1;
        std::string a = run(args, c1);
        std::string b = run(args, c2);
        CHECK(c1 == 0);
        CHECK(c2 == 0);
        const auto strip = [](std::string& s) { s.erase(s.rfind("# elapsed:")); };
        strip(a);
        strip(b);
        CHECK(a == b);
        CHECK(a.find("# why not:") != std::string::npos);
    }

    TEST_CASE("golden: no feasible plan exits 1 and still prints the why-not") {
        const std::string root = CLEAVE_TEST_DATA_DIR;
        int code = -1;
        // GPT-3 175B on one 8-GPU node: 175B x 18 B / 8 GPUs = 393 GB per GPU before activations
        const std::string out = run({"plan",
                                     root + "/examples/gpt3-175b.toml",
                                     root + "/hwprofiles/dgx-a100-80g.toml",
                                     "--gpus",
                                     "8",
                                     "--gbs",
                                     "8"},
                                    code);
        CHECK(code == 1);
        CHECK(out.find("#   memory") != std::string::npos);
        CHECK(out.find("needs") != std::string::npos);
    }
}
