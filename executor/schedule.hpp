#pragma once
// Pipeline schedules as data: the ordered forward / backward steps one pipeline rank runs in
// one iteration. Pure functions, tested without MPI.

#include "core/plan.hpp"

#include <cstdint>
#include <vector>

namespace cleave::executor {

/// Where a rank sits: TP innermost, then DP, then PP (Megatron's order, as the cost model
/// assumes): world = (pp_rank * dp + dp_rank) * tp + tp_rank.
struct RankCoords {
    int64_t tp_rank = 0;
    int64_t dp_rank = 0;
    int64_t pp_rank = 0;

    bool operator==(const RankCoords&) const = default;
};

/// Coordinates of `world_rank` under `plan`. Precondition: 0 <= world_rank < dp * tp * pp.
[[nodiscard]] RankCoords rank_coords(const Plan& plan, int64_t world_rank);

/// Inverse of rank_coords.
[[nodiscard]] int64_t world_rank_of(const Plan& plan, const RankCoords& c);

struct Step {
    bool forward = true;
    int64_t microbatch = 0;  // 0 .. m-1
    int64_t chunk = 0;       // local model chunk 0 .. vpp-1 (virtual stage chunk * pp + pp_rank)

    bool operator==(const Step&) const = default;
};

/// The pipeline message a step needs before it runs. The chunk of a step is virtual stage
/// chunk * pp + pp_rank; a forward receives the previous virtual stage's activation, a backward
/// the next one's gradient, except at the first stage (forward) and the last (backward).
struct StepRecv {
    bool needed = false;
    bool gradient = false;  // a backward's gradient (else a forward's activation)
    int64_t peer = 0;       // the pipeline rank it comes from
    int64_t stage = 0;      // the receiving virtual stage
};

/// What `step` of pipeline rank `pp_rank` receives (issue 17: cleave run posts it one step
/// early, so the transfer overlaps the step before). Preconditions as pipeline_steps.
[[nodiscard]] StepRecv step_recv(const Step& step, int64_t pp, int64_t vpp, int64_t pp_rank);

/// The steps of pipeline rank `pp_rank` for `m` micro-batches:
/// * gpipe: every forward (micro-batch order), then every backward (Huang et al. 2019, GPipe);
/// * 1f1b: min(pp - rank - 1, m) warm-up forwards, then one forward / one backward, then the
///   remaining backwards (Narayanan et al. 2021, PipeDream-Flush, Sec. 2.2);
/// * interleaved: Megatron's interleaved 1F1B over vpp chunks per rank (Narayanan et al. 2021,
///   Sec. 2.2, Fig. 4): warm-up min((pp - rank - 1) * 2 + (vpp - 1) * pp, vpp * m) forwards,
///   micro-batches taken in groups of pp per chunk.
/// The order is the one schedule's (core/schedule.hpp), shared with the cost model and simulator.
/// Preconditions: m >= 1; interleaved needs m % pp == 0.
[[nodiscard]] std::vector<Step>
pipeline_steps(Schedule schedule, int64_t pp, int64_t vpp, int64_t pp_rank, int64_t m);

}  // namespace cleave::executor
