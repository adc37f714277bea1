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
        CHECK_FALSE(find_calibration("dgx-h100").has_value());
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
