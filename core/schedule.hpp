#pragma once
// The one pipeline schedule: the order in which a pipeline rank runs its forward and backward
// ops, and how many micro-batches it holds. The cost model (costmodel/pipeline.cpp), the
// simulator (simulator/schedule.hpp) and the executor (executor/schedule.cpp) all read it.

#include "core/plan.hpp"

#include <cstdint>
#include <vector>

namespace cleave {

enum class SimSchedule : uint8_t {
    gpipe,        // all forwards, then all backwards (Huang et al. 2019)
    one_f_one_b,  // PipeDream-flush / Megatron non-interleaved 1F1B
    interleaved,  // Megatron interleaved 1F1B, vpp chunks per rank (Narayanan et al. 2021)
    zb_h1         // zero-bubble ZB-H1: backward split into B (input grad) and W (weight grad)
};

/// The schedule a plan's schedule runs.
[[nodiscard]] SimSchedule sim_schedule(Schedule s);

enum class OpKind : uint8_t { forward, backward, backward_weight };

/// One compute op of one rank: micro-batch `mb` through virtual chunk `chunk`.
struct SimOp {
    int32_t mb = 0;
    int16_t chunk = 0;
    OpKind kind = OpKind::forward;

    bool operator==(const SimOp&) const = default;
};

/// Megatron's micro-batch group of the interleaved schedule (--microbatch-group-size-per-
/// virtual-pipeline-stage, default p): the smallest N in [p, m] whose last group is whole
/// (m % N == 0) or at least p long (m % N >= p), as schedules.py requires; m when none is
/// smaller. p = 8: m = 16 -> 8, m = 12 -> 12, m = 20 -> 10. Precondition m >= p.
[[nodiscard]] int64_t interleave_group(int64_t p, int64_t m);

/// Number of forward ops rank `rank` runs before its first backward (its warm-up): GPipe m;
/// 1F1B and ZB-H1 min(p - rank - 1, m); interleaved min(2 (p - rank - 1) + (v - 1) N, v m)
/// with N = interleave_group(p, m)
/// (Megatron-LM megatron/core/pipeline_parallel/schedules.py get_pp_rank_microbatches at
/// d98e8a64ddf34856e74b24714e3bedb2f5a39553, microbatch_group_size_per_vp_stage = p; since
/// commit 4295be1a6c Megatron no longer runs every forward first when m == p: only ranks whose
/// warm-up reaches v m do). Precondition: 0 <= rank < p, v >= 1, m >= 1.
[[nodiscard]] int64_t warmup_forwards(SimSchedule s, int64_t p, int64_t v, int64_t m, int64_t rank);

/// Appends rank `rank`'s ops in execution order to `out` (v m forwards and v m backwards;
/// ZB-H1 adds v m weight-gradient ops). Interleaved needs m >= p (Megatron raises otherwise) and
/// is 1F1B when v == 1.
void append_rank_ops(
    SimSchedule s, int64_t p, int64_t v, int64_t m, int64_t rank, std::vector<SimOp>& out);

/// Most (micro-batch, chunk) forwards rank `rank` holds at once, whose backward (B) has not run:
/// GPipe v m; otherwise min(v m, warm-up + 1) — the warm-up forwards and the steady state's
/// one more before its first backward. Equals the peak over append_rank_ops' order (tested).
[[nodiscard]] int64_t
peak_inflight_chunks(SimSchedule s, int64_t p, int64_t v, int64_t m, int64_t rank);

}  // namespace cleave
