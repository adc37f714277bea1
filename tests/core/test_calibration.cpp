// Calibration overlays (hwprofiles/calibration/): parsed, applied by load_cluster, kept apart
// from the datasheet profile.
#include "core/calibration.hpp"
#include "core/errors.hpp"
#include "core/load.hpp"
#include "tests/core/diag_helpers.hpp"

#include <doctest/doctest.h>

using namespace cleave;
using cleave::test::expect_diagnostics;

TEST_SUITE("core") {
    TEST_CASE("calibration: the A100 overlay multiplies the measured curve and replaces hbm") {
        const ClusterSpec raw = load_cluster_uncalibrated("dgx-a100-80g");
        const ClusterSpec cal = load_cluster("dgx-a100-80g");
        CHECK(raw.calibration.empty());
        CHECK(cal.calibration.find("calibration/dgx-a100-80g.toml") != std::string::npos);
        // Datasheet / measured values in the profile: BabelStream 0.79, sweep point 0.822.
        CHECK(raw.gpu.hbm_efficiency == 0.79);
        CHECK(raw.gpu.gemm_efficiency.back().efficiency == 0.822);
        // Fitted: hbm 0.55, curve x 0.88: 0.822 x 0.88 = 0.72336; 0.383 x 0.88 = 0.33704.
        CHECK(cal.gpu.hbm_efficiency == 0.55);
        CHECK(cal.gpu.gemm_efficiency.back().efficiency == doctest::Approx(0.72336));
        CHECK(cal.gpu.gemm_efficiency.front().efficiency == doctest::Approx(0.33704));
        const auto overlay = find_calibration("dgx-a100-80g");
        REQUIRE(overlay);
        CHECK(overlay->stack == "megatron-2021");
        CHECK(overlay->fitted(1));
        CHECK(overlay->fitted(80));
        CHECK_FALSE(overlay->fitted(13));  // ZeRO-3 rows were in no fit
        CHECK_FALSE(find_calibration("dgx-h200").has_value());
    }

    TEST_CASE("calibration: [moe] sets the quantised expert overhead, in microseconds") {
        const Calibration cal = parse_calibration_toml(
            "[calibration]\nprofile = \"dgx-b200\"\nfitted_on = \"x.csv\"\n"
            "fitted_rows = [[7, 9]]\n[moe]\nquantised_expert_overhead_us = 250\n"
            "recipe = \"mxfp8\"\n",
            "m.toml");
        REQUIRE(cal.quantised_expert_overhead_us);
        CHECK(*cal.quantised_expert_overhead_us == 250.0);
        ClusterSpec c = load_cluster_uncalibrated("dgx-b200");
        CHECK(c.node.quantised_expert_overhead.value() == 0.0);
        const double factor_before = c.gpu.gemm_efficiency.back().efficiency;
        apply_calibration(cal, c);
        CHECK(c.node.quantised_expert_overhead.value() == doctest::Approx(250e-6));
        CHECK(c.node.quantised_expert_recipe == "mxfp8");
        CHECK(c.gpu.gemm_efficiency.back().efficiency == factor_before);  // factor 1: unchanged
        CHECK(c.calibration == "m.toml");
        expect_diagnostics(
            [] {
                (void)parse_calibration_toml(
                    "[calibration]\nprofile = \"x\"\nfitted_on = \"a.csv\"\n[moe]\n"
                    "quantised_expert_overhead_us = -1\nexpert_us = 3\nrecipe = \"fp8\"\n",
                    "c.toml");
            },
            {{5,
              32,
              "'moe.quantised_expert_overhead_us' must be zero or positive and finite, got -1"},
             {6, 1, "unknown key 'moe.expert_us'"},
             {7,
              10,
              "'moe.recipe' must be one of mxfp8, nvfp4, fp8-tensorwise, fp8-delayed, "
              "fp8-blockwise, got 'fp8'"}});
    }

    TEST_CASE("calibration: bad overlays name line:col and key") {
        expect_diagnostics(
            [] {
                (void)parse_calibration_toml(
                    "[calibration]\nprofile = \"x\"\nfitted_on = \"a.csv\"\n"
                    "fitted_rows = [[3, 1]]\n[gpu]\nhbm_efficiency = 1.5\n"
                    "gemm_factor = 0.9\n",
                    "c.toml");
            },
            {{4,
              15,
              "'calibration.fitted_rows' must be an array of [first, last] row_id pairs with "
              "first <= last"},
             {6, 18, "'gpu.hbm_efficiency' must be in (0, 1], got 1.5"},
             {7, 1, "unknown key 'gpu.gemm_factor'"}});
    }
}
