// Replays every input kept under tests/fuzz/regressions/ (crashes found by scripts/fuzz.sh and
// hand-written nasty inputs): each loader must succeed or throw ConfigError, never crash or throw
// anything else. Runs under ASan + UBSan in CI.
#include "core/errors.hpp"
#include "core/load.hpp"
#include "core/load_detail.hpp"

#include <filesystem>
#include <string>

#include <doctest/doctest.h>

using namespace cleave;

namespace {

template <class F>
void succeeds_or_config_error(F&& load) {
    try {
        load();
    } catch (const ConfigError& e) {
        CHECK_FALSE(e.diagnostics().empty());
        CHECK_FALSE(std::string(e.what()).empty());
    } catch (const std::exception& e) {
        FAIL_CHECK("a loader threw something other than ConfigError: " << e.what());
    }
}

}  // namespace

TEST_SUITE("core") {
    TEST_CASE("fuzz regressions: every kept input is a ConfigError or a success") {
        namespace fs = std::filesystem;
        const fs::path dir = fs::path(CLEAVE_TEST_DATA_DIR) / "tests" / "fuzz" / "regressions";
        int replayed = 0;
        for (const auto& e : fs::directory_iterator(dir)) {
            if (e.path().filename() == "README.md") {
                continue;
            }
            CAPTURE(e.path().string());
            const std::string text = detail::read_text_file(e.path());
            succeeds_or_config_error([&] { (void)parse_model_toml(text, "r.toml"); });
            succeeds_or_config_error([&] { (void)parse_cluster_toml(text, "r.toml"); });
            succeeds_or_config_error([&] { (void)parse_job_toml(text, "r.toml"); });
            succeeds_or_config_error([&] { (void)parse_model_hf_json(text, "r.json"); });
            ++replayed;
        }
        CHECK(replayed >= 6);
    }

    TEST_CASE("fuzz regressions: absurd sizes are rejected before any count can overflow") {
        try {
            (void)parse_model_hf_json(
                R"({"model_type": "llama", "num_hidden_layers": 1000000, "hidden_size": 1048576,
"num_attention_heads": 1, "intermediate_size": 1048576, "vocab_size": 1,
"max_position_embeddings": 1})",
                "big.json");
            FAIL("expected ConfigError");
        } catch (const ConfigError& e) {
            REQUIRE(e.diagnostics().size() == 1);
            CHECK(e.diagnostics()[0].message ==
                  "the model would have more than 1e15 parameters; cleave's counts would overflow "
                  "(config key 'num_hidden_layers')");
            CHECK(e.diagnostics()[0].where.line == 1);
            CHECK(e.diagnostics()[0].where.column == 25);
        }
    }
}
