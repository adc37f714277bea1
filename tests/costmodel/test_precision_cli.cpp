// The precision flags through the CLI: Megatron-LM's spelling in exports, clear errors for a
// precision the GPU lacks, and `cleave compare` saying what it assumed on every profile.
#include "cli/app.hpp"
#include "tests/cli_run.hpp"

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

namespace {

using Run = cleave::test::CliRun;

Run run_cli(std::vector<std::string> args) {
    return cleave::test::run_cleave(std::move(args));
}

const std::string tiny = std::string(CLEAVE_TEST_DATA_DIR) + "/examples/tiny.toml";

}  // namespace

TEST_SUITE("costmodel") {
    TEST_CASE("precision cli: Megatron exports spell fp8 and fp4 as megatron/training does") {
        // Megatron-LM transformer_config.py @d98e8a64: --fp8-format e4m3|hybrid, --fp8-recipe
        // tensorwise|delayed|mxfp8|blockwise, --fp4-format e2m1, --fp4-recipe nvfp4.
        const Run h = run_cli({"plan",
                           tiny,
                           "dgx-h100",
                           "--gpus",
                           "8",
                           "--gbs",
                           "32",
                           "--dtype",
                           "fp8",
                           "--fp8-recipe",
                           "tensorwise",
                           "--fp8-param-gather",
                           "--format",
                           "megatron"});
        REQUIRE(h.code == 0);
        CHECK(
            h.out.find("--fp8-format hybrid \\\n--fp8-recipe tensorwise \\\n--fp8-param-gather") !=
            std::string::npos);
        const Run mx = run_cli({"plan",
                            tiny,
                            "gb200-nvl72",
                            "--gpus",
                            "8",
                            "--gbs",
                            "32",
                            "--dtype",
                            "mxfp8",
                            "--format",
                            "megatron"});
        REQUIRE(mx.code == 0);
        CHECK(mx.out.find("--fp8-format e4m3 \\\n--fp8-recipe mxfp8") != std::string::npos);
        const Run fp4 = run_cli({"plan",
                             tiny,
                             "gb300-nvl72",
                             "--gpus",
                             "8",
                             "--gbs",
                             "32",
                             "--dtype",
                             "nvfp4",
                             "--format",
                             "megatron"});
        REQUIRE(fp4.code == 0);
        CHECK(fp4.out.find("--fp4-format e2m1 \\\n--fp4-recipe nvfp4") != std::string::npos);
        CHECK(fp4.out.find("--fp8-format") == std::string::npos);
    }

    TEST_CASE("precision cli: a precision the GPU lacks, or a recipe without fp8, exits 2") {
        const Run mx =
            run_cli({"explain", tiny, "dgx-h100", "--gpus", "8", "--gbs", "32", "--dtype", "mxfp8"});
        CHECK(mx.code == 2);
        CHECK(mx.err.find("dgx-h100") != std::string::npos);
        CHECK(mx.err.find("peak_tflops_mxfp8") != std::string::npos);
        const Run r = run_cli(
            {"explain", tiny, "dgx-b200", "--gpus", "8", "--gbs", "32", "--fp8-recipe", "delayed"});
        CHECK(r.code == 2);
        CHECK(r.err.find("--fp8-recipe delayed needs --dtype fp8") != std::string::npos);
    }

    TEST_CASE("precision cli: compare says what it assumed and which GPU runs what") {
        const Run r = run_cli({"compare",
                           tiny,
                           "--clusters",
                           "dgx-a100-80g",
                           "dgx-h100",
                           "gb200-nvl72",
                           "--gpus",
                           "8",
                           "--gbs",
                           "32",
                           "--dtype",
                           "fp8",
                           "--format",
                           "json"});
        REQUIRE(r.code == 0);
        const auto j = nlohmann::json::parse(r.out);
        const std::string a = j["assumptions"].get<std::string>();
        CHECK(a.find("linear GEMMs in fp8 (delayed scaling)") != std::string::npos);
        CHECK(a.find("dgx-a100-80g has no fp8 path and runs it in bf16") != std::string::npos);
        CHECK(a.find("dgx-h100 has no") == std::string::npos);
        CHECK(a.find("software stack megatron-core on every profile") != std::string::npos);
        CHECK(a.find("fitted calibration overlays: dgx-a100-80g (fitted with stack "
                     "megatron-2021), dgx-h100 (fitted with stack megatron-core), gb200-nvl72 "
                     "(fitted with stack megatron-core)") != std::string::npos);
        CHECK(j["profiles"][0]["gemm_dtype"] == "bf16");
        CHECK(j["profiles"][1]["gemm_dtype"] == "fp8");
        CHECK(j["profiles"][2]["gemm_dtype"] == "fp8");
        // MFU against the peak of the precision each GPU runs: the A100's is bf16's, not 0.
        CHECK(j["profiles"][0]["best"]["mfu"].get<double>() > 0.0);
    }

    TEST_CASE("precision cli: FP8 weight copies in memory, FP8 param all-gather in traffic") {
        auto explain = [](std::vector<std::string> extra) {
            std::vector<std::string> a = {"explain",
                                          tiny,
                                          "dgx-h100",
                                          "--gpus",
                                          "8",
                                          "--gbs",
                                          "32",
                                          "--zero",
                                          "1",
                                          "--grad-dtype",
                                          "bf16",
                                          "--format",
                                          "json"};
            a.insert(a.end(), extra.begin(), extra.end());
            const Run r = run_cli(a);
            REQUIRE(r.code == 0);
            return nlohmann::json::parse(r.out);
        };
        const auto bf16 = explain({});
        const auto fp8 = explain({"--dtype", "fp8"});
        const auto pg = explain({"--dtype", "fp8", "--fp8-param-gather"});
        const double w = bf16["memory_gib"]["weights"].get<double>();
        // Per local parameter, H100 (no native FP8 layouts): bf16 2 B; fp8 2 B + the cached FP8
        // copy and its transpose 2 x 1 B = 4 B; --fp8-param-gather: FP8 weight 1 B + transpose
        // 1 B = 2 B.
        CHECK(fp8["memory_gib"]["weights"].get<double>() == doctest::Approx(2.0 * w).scale(0));
        CHECK(pg["memory_gib"]["weights"].get<double>() == doctest::Approx(w).scale(0));
        CHECK(pg["precision"]["dtype"] == "fp8");
        CHECK(pg["precision"]["fp8_recipe"] == "delayed");
        CHECK(pg["precision"]["weights"] == "fp8");
        CHECK(pg["precision"]["unquantised_dtype"] == "bf16");
        // ZeRO-1 DP traffic per parameter: reduce-scatter of bf16 grads 2 B + all-gather of the
        // weights 2 B (bf16) or 1 B (FP8 param gather), both x (n-1)/n: 4 / 3.
        CHECK(fp8["comm_bytes_per_gpu"]["dp"].get<double>() /
                  pg["comm_bytes_per_gpu"]["dp"].get<double>() ==
              doctest::Approx(4.0 / 3.0).scale(0));
    }

    TEST_CASE("precision cli: first and last layers in bf16 cost bf16 layers, and export") {
        auto compute = [](std::vector<std::string> extra) {
            std::vector<std::string> a = {
                "explain", tiny, "dgx-h100", "--gpus", "1", "--gbs", "4", "--format", "json"};
            a.insert(a.end(), extra.begin(), extra.end());
            const Run r = run_cli(a);
            REQUIRE(r.code == 0);
            return nlohmann::json::parse(r.out)["time_s"]["compute"].get<double>();
        };
        const double bf16 = compute({});
        const double fp8 = compute({"--dtype", "fp8", "--fp8-recipe", "tensorwise"});
        const double fl =
            compute({"--dtype", "fp8", "--fp8-recipe", "tensorwise", "--first-last-layers-bf16"});
        // tiny has 4 layers; one bf16 at each end: pp = 1, so compute = micro-batches x (4 layers
        // + embedding + head), the edges alike in all three: fl - fp8 = 2/4 (bf16 - fp8).
        CHECK(fl - fp8 == doctest::Approx(0.5 * (bf16 - fp8)).scale(0));
        CHECK(fl != doctest::Approx(fp8).scale(0));
        // Megatron refuses delayed scaling with bf16 first / last layers: so does cleave.
        const Run bad = run_cli({"explain",
                             tiny,
                             "dgx-h100",
                             "--gpus",
                             "1",
                             "--gbs",
                             "4",
                             "--dtype",
                             "fp8",
                             "--first-last-layers-bf16"});
        CHECK(bad.code == 2);
        const Run ex = run_cli({"plan",
                            tiny,
                            "gb200-nvl72",
                            "--gpus",
                            "4",
                            "--gbs",
                            "16",
                            "--dtype",
                            "nvfp4",
                            "--first-last-layers-bf16",
                            "--num-layers-at-end-in-bf16",
                            "2",
                            "--format",
                            "megatron"});
        REQUIRE(ex.code == 0);
        CHECK(ex.out.find("--first-last-layers-bf16 \\\n--num-layers-at-start-in-bf16 1 \\\n"
                          "--num-layers-at-end-in-bf16 2") != std::string::npos);
    }
}
