#pragma once
// Risk detection (cheap, inside estimate()) and thresholds shared with describe_risks().

#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "costmodel/collectives.hpp"
#include "costmodel/estimate.hpp"

#include <cstdint>

namespace cleave {

/// PyTorch ProcessGroupNCCL's default watchdog timeout: 10 min (kProcessGroupNCCLDefaultTimeout,
/// pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp).
inline constexpr double nccl_watchdog_s = 600.0;

/// A blocking NCCL call longer than this fraction of the watchdog is flagged: stragglers and
/// iteration-to-iteration variance eat the rest of the margin.
inline constexpr double nccl_timeout_fraction = 0.5;

/// A DP step whose exposed gradient communication exceeds this fraction of the iteration is
/// "dominated by the network".
inline constexpr double slow_network_fraction = 0.5;

/// Bubble above this fraction of the iteration is flagged (brief: 30 %).
inline constexpr double large_bubble_fraction = 0.30;

/// --moe-imbalance above which, with no capacity factor, the plan is flagged (issue 16's
/// threshold: a warning level, not a measured limit).
inline constexpr double moe_imbalance_limit = 1.5;
// Share of the iteration spent in the quantised expert GEMMs' fixed per-expert cost
// (Estimate::expert_overhead) from which a plan is flagged: a quarter of the step is time the
// knobs below win back (larger micro-batches, fewer local experts, BF16 experts).
inline constexpr double moe_fixed_cost_fraction = 0.25;

/// Advice that is true of the plan's shape but no risk to a job cleave launches or exports (the
/// PP / DP communicator split): said once next to the plan, not among its risks.
[[nodiscard]] std::vector<std::string> plan_notes(const Plan& plan);

/// The risk bits for a finished estimate `e` (all fields but risk_mask filled).
[[nodiscard]] uint32_t detect_risks(const ModelSpec& model,
                                    const ClusterSpec& cluster,
                                    const JobSpec& job,
                                    const Plan& plan,
                                    const PlanLinks& links,
                                    const Estimate& e);

}  // namespace cleave
