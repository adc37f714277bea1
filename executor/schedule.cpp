#include "executor/schedule.hpp"

#include "core/errors.hpp"

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

namespace {

// Megatron's interleaved order: the k-th forward (or backward) of a rank.
Step interleaved_step(int64_t k, int64_t pp, int64_t vpp, bool forward) {
    const int64_t in_group = k % (pp * vpp);
    int64_t chunk = in_group / pp;
    if (!forward) {
        chunk = vpp - 1 - chunk;
    }
    const int64_t mb = (k / (pp * vpp)) * pp + in_group % pp;
    return {forward, mb, chunk};
}

}  // namespace

std::vector<Step>
pipeline_steps(Schedule schedule, int64_t pp, int64_t vpp, int64_t pp_rank, int64_t m) {
    CLEAVE_ASSERT(m >= 1 && pp >= 1 && vpp >= 1 && pp_rank >= 0 && pp_rank < pp,
                  "pipeline_steps: bad arguments");
    std::vector<Step> steps;
    if (schedule == Schedule::gpipe) {
        for (int64_t mb = 0; mb < m; ++mb) {
            for (int64_t c = 0; c < vpp; ++c) {
                steps.push_back({true, mb, c});
            }
        }
        for (int64_t mb = 0; mb < m; ++mb) {
            for (int64_t c = vpp - 1; c >= 0; --c) {
                steps.push_back({false, mb, c});
            }
        }
        return steps;
    }
    if (schedule == Schedule::one_f_one_b && vpp == 1) {
        const int64_t warmup = std::min(pp - pp_rank - 1, m);
        for (int64_t i = 0; i < warmup; ++i) {
            steps.push_back({true, i, 0});
        }
        for (int64_t i = 0; i < m - warmup; ++i) {
            steps.push_back({true, warmup + i, 0});
            steps.push_back({false, i, 0});
        }
        for (int64_t i = m - warmup; i < m; ++i) {
            steps.push_back({false, i, 0});
        }
        return steps;
    }
    CLEAVE_ASSERT(m % pp == 0, "interleaved schedule needs pp to divide the micro-batches");
    const int64_t total = m * vpp;
    int64_t warmup = m == pp ? total : (pp - pp_rank - 1) * 2 + (vpp - 1) * pp;
    warmup = std::min(warmup, total);
    for (int64_t k = 0; k < warmup; ++k) {
        steps.push_back(interleaved_step(k, pp, vpp, true));
    }
    for (int64_t i = 0; i < total - warmup; ++i) {
        steps.push_back(interleaved_step(warmup + i, pp, vpp, true));
        steps.push_back(interleaved_step(i, pp, vpp, false));
    }
    for (int64_t k = total - warmup; k < total; ++k) {
        steps.push_back(interleaved_step(k, pp, vpp, false));
    }
    return steps;
}

}  // namespace cleave::executor
