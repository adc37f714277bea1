#include "executor/schedule.hpp"

#include "core/errors.hpp"
#include "core/schedule.hpp"

#include <algorithm>

namespace cleave::executor {

RankCoords rank_coords(const Plan& plan, int64_t world_rank) {
    CLEAVE_ASSERT(world_rank >= 0 && world_rank < plan.dp * plan.tp * plan.pp,
                  "rank_coords: rank outside the plan");
    RankCoords c;
    c.tp_rank = world_rank % plan.tp;
    c.dp_rank = (world_rank / plan.tp) % plan.dp;
    c.pp_rank = world_rank / (plan.tp * plan.dp);
    return c;
}

int64_t world_rank_of(const Plan& plan, const RankCoords& c) {
    return (c.pp_rank * plan.dp + c.dp_rank) * plan.tp + c.tp_rank;
}

std::vector<Step>
pipeline_steps(Schedule schedule, int64_t pp, int64_t vpp, int64_t pp_rank, int64_t m) {
    CLEAVE_ASSERT(m >= 1 && pp >= 1 && vpp >= 1 && pp_rank >= 0 && pp_rank < pp,
                  "pipeline_steps: bad arguments");
    // The one schedule (core/schedule.hpp); the executor runs GPipe, 1F1B and interleaved.
    std::vector<SimOp> ops;
    append_rank_ops(sim_schedule(schedule), pp, vpp, m, pp_rank, ops);
    std::vector<Step> steps;
    steps.reserve(ops.size());
    for (const SimOp& op : ops) {
        steps.push_back({op.kind == OpKind::forward, op.mb, op.chunk});
    }
    return steps;
}

StepRecv step_recv(const Step& step, int64_t pp, int64_t vpp, int64_t pp_rank) {
    CLEAVE_ASSERT(pp >= 1 && vpp >= 1 && pp_rank >= 0 && pp_rank < pp && step.chunk >= 0 &&
                      step.chunk < vpp,
                  "step_recv: bad arguments");
    const int64_t stages = pp * vpp;
    const int64_t vs = step.chunk * pp + pp_rank;
    StepRecv r;
    r.gradient = !step.forward;
    r.stage = vs;
    r.needed = step.forward ? vs > 0 : vs < stages - 1;
    // Virtual stage v runs on pipeline rank v mod pp.
    r.peer = step.forward ? (vs + stages - 1) % pp : (vs + 1) % pp;
    return r;
}

}  // namespace cleave::executor
