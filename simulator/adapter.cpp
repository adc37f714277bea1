// make_sim_input(): the cost model's per-stage costs as simulator input.
#include "simulator/simulate.hpp"

#include <algorithm>
#include <cmath>

namespace cleave {

namespace {

struct Split {
    Seconds even;   // per chunk
    Seconds extra;  // added to the first chunk of rank 0 / the last chunk of rank pp-1
};

// A rank's per-micro-batch time spread over its v chunks. For pp >= 3 the middle stage gives
// the cost of a layer, so what the first/last stage costs beyond its layers (embedding, output
// layer and loss) is put on the chunk that holds it; with pp <= 2 there is no clean layer cost
// and the time is spread evenly.
Split split_stage(Seconds stage_t,
                  Seconds mid_t,
                  int64_t layers,
                  int64_t mid_layers,
                  int64_t pp,
                  int64_t rank,
                  int64_t v) {
    const bool edge = rank == 0 || rank == pp - 1;
    if (pp >= 3 && edge && mid_layers > 0 && layers > 0) {
        const Seconds layer_part =
            mid_t * (static_cast<double>(layers) / static_cast<double>(mid_layers));
        const Seconds extra = stage_t - layer_part;
        if (extra.value() >= 0.0) {
            return {layer_part / static_cast<double>(v), extra};
        }
    }
    return {stage_t / static_cast<double>(v), seconds(0.0)};
}

int64_t stage_params(const ModelSpec& model, int64_t pp, int64_t rank, int64_t layers) {
    if (pp >= 1 && model.layers > 0 && model.layers % pp == 0) {
        return params_stage(model, pp, rank);
    }
    return model.layers > 0 ? params_total(model) * layers / model.layers : params_total(model);
}

// Megatron-core DDP buckets hold max(40M, 1M * dp) parameters
// (megatron/core/distributed/distributed_data_parallel.py); buckets fill in backward order, so
// bucket 0 holds the chunk's last layers and is ready first.
std::vector<DpBucket>
dp_buckets(const StageCost& sc, double chunk_params, double bucket_params, int64_t v) {
    std::vector<DpBucket> out;
    // dp_reduce is the whole reduction; dp_grad_sync only what the cost model left exposed
    // after its own overlap estimate, used when a hand-built estimate has no dp_reduce.
    const Seconds total = sc.dp_reduce.value() > 0.0 ? sc.dp_reduce : sc.dp_grad_sync;
    if (total.value() <= 0.0) {
        return out;
    }
    const auto n = static_cast<int64_t>(std::max(1.0, std::ceil(chunk_params / bucket_params)));
    const Seconds per_bucket = total / static_cast<double>(v * n);
    for (int64_t c = v - 1; c >= 0; --c) {
        for (int64_t i = 0; i < n; ++i) {
            out.push_back({c, static_cast<double>(i + 1) / static_cast<double>(n), per_bucket});
        }
    }
    return out;
}

}  // namespace

SimInput make_sim_input(const ModelSpec& model,
                        const ClusterSpec& /*cluster: its costs are already in est*/,
                        const JobSpec& job,
                        const Plan& plan,
                        const Estimate& est,
                        const SimOptions& opt) {
    SimInput in;
    in.schedule = sim_schedule(plan.schedule);
    in.microbatches = num_microbatches(plan, job);
    in.dp_overlap = opt.dp_overlap;
    in.optimizer_sync = opt.optimizer_sync;
    const int64_t pp = std::max<int64_t>(1, plan.pp);
    const int64_t v = plan.schedule == Schedule::interleaved ? std::max<int64_t>(1, plan.vpp) : 1;
    const StageCost& mid = est.stage[1];
    const double bucket_params =
        std::max(opt.dp_bucket_params, 1e6 * static_cast<double>(plan.dp * plan.cp));
    for (int64_t r = 0; r < pp; ++r) {
        const StageCost& sc = stage_cost(est, r, pp);
        RankInput rk;
        const auto sf = split_stage(sc.fwd, mid.fwd, sc.layers, mid.layers, pp, r, v);
        const auto sb = split_stage(sc.bwd, mid.bwd, sc.layers, mid.layers, pp, r, v);
        for (int64_t c = 0; c < v; ++c) {
            const bool holds_extra = (r == 0 && c == 0) || (r == pp - 1 && c == v - 1);
            ChunkCost cc;
            cc.fwd = sf.even + (holds_extra ? sf.extra : seconds(0.0));
            cc.bwd = sb.even + (holds_extra ? sb.extra : seconds(0.0));
            cc.fwd_comm = sc.fwd_comm / static_cast<double>(v);
            cc.bwd_comm = sc.bwd_comm / static_cast<double>(v);
            rk.chunks.push_back(cc);
        }
        const double params_per_gpu = static_cast<double>(stage_params(model, pp, r, sc.layers)) /
                                      static_cast<double>(std::max<int64_t>(1, plan.tp));
        rk.dp_buckets = dp_buckets(sc, params_per_gpu / static_cast<double>(v), bucket_params, v);
        rk.optimizer = sc.optimizer;
        rk.p2p_next = est.pp_p2p;
        in.ranks.push_back(std::move(rk));
    }
    return in;
}

SimResult simulate(const ModelSpec& model,
                   const ClusterSpec& cluster,
                   const JobSpec& job,
                   const Plan& plan,
                   const Estimate& est,
                   const SimOptions& opt) {
    return simulate(make_sim_input(model, cluster, job, plan, est, opt), opt);
}

}  // namespace cleave
