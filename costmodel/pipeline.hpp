#pragma once
// Pipeline schedules: bubble fraction, micro-batches in flight per stage, and the time of the
// pipelined part of an iteration from per-stage micro-batch times.

#include "core/plan.hpp"
#include "core/units.hpp"

#include <cstdint>

namespace cleave {

/// Idle fraction of an iteration: (p-1)/(m+p-1) for GPipe and 1F1B, (p-1)/(v*m+p-1) for the
/// interleaved schedule (Narayanan et al. 2021, Sec. 2.2). p=8, m=4: 7/11. Precondition m >= 1.
[[nodiscard]] double bubble_fraction(const Plan& p, int64_t m);

/// Micro-batches whose activations stage `s` (0-based) holds at its peak, in units of the whole
/// stage's layers: GPipe m; 1F1B min(m, p-s); interleaved Megatron warm-up
/// (min(m v, 2(p-s-1) + (v-1) p + 1)) / v chunks, which is p + (p-1)/v = p (1 + (p-1)/(p v)) on
/// the first stage (Korthikanti et al. 2022, Sec. 4.2.3).
[[nodiscard]] double inflight_microbatches(const Plan& p, int64_t m, int64_t s);

/// Time from the first forward to the last backward of `m` micro-batches when one micro-batch
/// costs t_s on stage s: sum_s(t_s) + (m-1) max_s(t_s) for GPipe / 1F1B (fill and drain pass
/// every stage once, the slowest stage paces the steady state); interleaved with v chunks per
/// stage: sum_s(t_s)/v + (m - 1/v) max_s(t_s). With equal stages both give (m + (p-1)/v) t.
[[nodiscard]] Seconds
pipeline_time(const Plan& p, int64_t m, Seconds sum_stages, Seconds max_stage);

}  // namespace cleave
