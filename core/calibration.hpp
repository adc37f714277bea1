#pragma once
// Calibration overlays (hwprofiles/calibration/<profile>.toml): constants FITTED to published
// end-to-end runs, kept apart from the datasheet / measured values of the hardware profile they
// modify. load_cluster() applies the overlay whose `profile` names the profile it loads.
//
// Format (every key but [calibration].profile and .fitted_on optional; unknown keys are errors):
//   [calibration]
//   profile = "dgx-a100-80g"            # the hardware profile it modifies
//   fitted_on = "public_runs.csv"        # the CSV the constants were fitted to
//   fitted_rows = [[1, 10], [17, 30]]    # inclusive row_id ranges the fit used
//   stack = "megatron-2021"              # the software stack the fit priced with
//   method = "grid search, cleave published"  # how
//   [gpu]
//   gemm_efficiency_factor = 0.88        # multiplies every point of the profile's GEMM curves
//                                        # (16-bit and the fp8 / mxfp8 / nvfp4 ones)
//   hbm_efficiency = 0.55                # replaces the profile's value; any [gpu] *_efficiency
//                                        # key of the profile may be given the same way
//   [moe]
//   quantised_expert_overhead_us = 400   # NodeSpec::quantised_expert_overhead: fixed cost of one
//                                        # local expert per MoE layer per micro-batch under
//                                        # fp8 / mxfp8 / nvfp4 expert GEMMs
//   recipe = "mxfp8"                     # what it was fitted under: mxfp8, nvfp4,
//                                        # fp8-tensorwise, fp8-delayed, fp8-blockwise

#include "core/cluster.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cleave {

struct Calibration {
    std::string source;  // the overlay file
    std::string profile;
    std::string fitted_on;
    std::vector<std::pair<int64_t, int64_t>> fitted_rows;  // inclusive ranges of row_id
    std::string stack;
    std::string method;
    double gemm_efficiency_factor = 1.0;
    std::vector<std::pair<std::string, double>> efficiencies;  // [gpu] key -> value
    std::optional<double> quantised_expert_overhead_us;        // [moe], microseconds
    std::string quantised_expert_recipe;  // [moe] recipe: what the value was fitted under

    bool operator==(const Calibration&) const = default;

    /// True when `row_id` lies in one of fitted_rows.
    [[nodiscard]] bool fitted(int64_t row_id) const;
};

/// Parses an overlay; throws ConfigError (file:line:col, key) on any problem.
[[nodiscard]] Calibration parse_calibration_toml(std::string_view text,
                                                 const std::string& source_name);

/// The overlay for `profile` in the calibration/ folder of hwprofile_dirs(), if any.
[[nodiscard]] std::optional<Calibration> find_calibration(const std::string& profile);

/// Applies `cal` to `c` (GEMM curve x factor, efficiencies replaced) and records it.
void apply_calibration(const Calibration& cal, ClusterSpec& c);

/// The profile as its file states it, no overlay (for refits and `cleave hw show --raw`).
[[nodiscard]] ClusterSpec load_cluster_uncalibrated(const std::string& name_or_path);

}  // namespace cleave
