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
//   release = "25.11"                    # the software release the rows ran (YY.MM)
//   [[moe.from_release]]                 # a value fitted under a later release, in force from
//   release = "26.02"                    # that release on (NodeSpec::quantised_expert_overhead
//   quantised_expert_overhead_us = 0     # picks by the job's stack release)
//   recipe = "fp8-tensorwise"
//   fitted_rows = [[2005, 2005]]         # the rows this entry was fitted on
// fitted_on may be a list of CSVs when the rows come from several files.

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
    std::string fitted_on;                 // the first (or only) CSV
    std::vector<std::string> fitted_on_all;  // every CSV named (fitted_on first)
    std::vector<std::pair<int64_t, int64_t>> fitted_rows;  // inclusive ranges of row_id
    std::string stack;
    std::string method;
    double gemm_efficiency_factor = 1.0;
    std::vector<std::pair<std::string, double>> efficiencies;  // [gpu] key -> value
    std::optional<double> quantised_expert_overhead_us;        // [moe], microseconds
    std::string quantised_expert_recipe;  // [moe] recipe: what the value was fitted under
    std::string quantised_expert_release;  // [moe] release: the software release of those rows
    std::vector<NodeSpec::ExpertOverheadFrom> quantised_expert_from_release;  // [[moe.from_release]]
    /// Each entry's own fitted_rows (also listed in [calibration] fitted_rows): which rows chose
    /// which value, for holding a source out of what it fitted.
    std::vector<std::vector<std::pair<int64_t, int64_t>>> from_release_rows;
    // A trace calibration (cleave calibrate --from-trace): [gpu] gemm_efficiency_factor_<dtype>
    // (bf16, fp8, mxfp8, nvfp4) scales that precision's curve alone, attention_factor the fused
    // attention kernels' efficiency; [trace] names the trace (file, crc32) and what it could not
    // inform.
    std::vector<std::pair<std::string, double>> gemm_factor_by_dtype;
    std::optional<double> attention_factor;
    std::string trace_file;
    std::string trace_crc32;
    std::vector<std::string> not_informed;

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
