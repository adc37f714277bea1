#pragma once
// Pipeline schedules: bubble fraction, micro-batches in flight per stage, and the time of the
// pipelined part of an iteration from per-stage micro-batch times.

#include "core/plan.hpp"
#include "core/units.hpp"

#include <cstdint>

namespace cleave {

/// Idle fraction of an iteration: (p-1)/(m+p-1) for GPipe and 1F1B, (p-1)/(v*m+p-1) for the
/// interleaved schedule (Narayanan et al. 2021, Sec. 2.2). p=8, m=4: 7/11. DualPipe: its bubble
/// (p/2-1)(F&B + B - 3W) (dualpipe_bubble) over m (F + B) of work, with B = 2F, W = B/2 and F&B
/// = F + B: (p/2-1) 2F / (3 m F + (p/2-1) 2F) = (p-2)/(3m + p - 2); p=16, m=120: 14/374.
/// DualPipeV, p ranks of 2p stages of one-stage times F: (p-1) 2F over 2 m 3F of work:
/// (p-1)/(3m + p - 1); p=8, m=32: 7/103. Precondition m >= 1.
[[nodiscard]] double bubble_fraction(const Plan& p, int64_t m);

/// DualPipe's bubble on one rank: (p/2 - 1)(F&B + B - 3W) (deepseek-ai/DualPipe README, "Pipeline
/// Bubbles and Memory Usage Comparison", @3da1bbe), with `fb` the time of a forward and a
/// backward of two micro-batches run overlapped, `b` a whole backward chunk and `w` its weight-
/// gradient part; never negative. p=16, fb=80, b=50, w=25 ms: 7 x (80 + 50 - 75) = 385 ms.
[[nodiscard]] Seconds dualpipe_bubble(int64_t p, Seconds fb, Seconds b, Seconds w);

/// Micro-batches whose activations stage `s` (0-based) holds at its peak, in units of the whole
/// stage's layers: GPipe m; 1F1B min(m, p-s); interleaved Megatron warm-up
/// (min(m v, 2(p-s-1) + (v-1) p + 1)) / v chunks, which is p + (p-1)/v = p (1 + (p-1)/(p v)) on
/// the first stage (Korthikanti et al. 2022, Sec. 4.2.3). DualPipe: 1, one micro-batch of one
/// stage; the rank's two stages and its p + 1 of them are counted where the stages are folded
/// into ranks (costmodel/stage_memory.cpp fold_dualpipe).
[[nodiscard]] double inflight_microbatches(const Plan& p, int64_t m, int64_t s);

/// Time from the first forward to the last backward of `m` micro-batches when one micro-batch
/// costs t_s on stage s: sum_s(t_s) + (m-1) max_s(t_s) for GPipe / 1F1B (fill and drain pass
/// every stage once, the slowest stage paces the steady state); interleaved with v chunks per
/// stage: sum_s(t_s)/v + (m - 1/v) max_s(t_s). With equal stages both give (m + (p-1)/v) t.
[[nodiscard]] Seconds
pipeline_time(const Plan& p, int64_t m, Seconds sum_stages, Seconds max_stage);

}  // namespace cleave
