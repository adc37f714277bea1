// estimate(): assembles memory, compute, communication and pipeline into one Estimate.
// Derivations: docs/costmodel.md.
#include "costmodel/estimate.hpp"

#include "costmodel/collectives.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/flops.hpp"
#include "costmodel/memory.hpp"
#include "costmodel/pipeline.hpp"
#include "costmodel/risks.hpp"

#include <algorithm>

namespace cleave {

namespace {

double d(int64_t x) {
    return static_cast<double>(x);
}

// Megatron DDP bucket: max(40M, 1M x dp) parameters (megatron/core/distributed).
double bucket_params(const Plan& p) {
    return std::max(40e6, 1e6 * d(p.dp * p.cp));
}

struct Context {
    const ModelSpec& m;
    const ClusterSpec& c;
    const JobSpec& job;
    const Plan& p;
    PlanLinks links;
    LayerCost dense;
    LayerCost moe;
    EdgeCost emb;
    EdgeCost out;
    int64_t micro = 0;
};

struct StageWork {
    StageCost cost;
    Seconds compute;  // per micro-batch, no comm
    Seconds tp, cp, ep, zero3, p2p;
    Bytes tp_b, cp_b, ep_b, dp_b, pp_b;  // per iteration
    Seconds dp_total;
    Seconds longest;
};

struct StageParams {
    double dense = 0.0;   // per GPU after the TP split
    double expert = 0.0;  // per GPU after the TP and EP split
    int64_t moe_layers = 0;
};

StageParams stage_params(const Context& x, int64_t s) {
    const ModelSpec& m = x.m;
    const int64_t chunks = x.p.schedule == Schedule::interleaved ? x.p.vpp : 1;
    const int64_t per_chunk = m.layers / (x.p.pp * chunks);
    StageParams sp;
    for (int64_t ch = 0; ch < chunks; ++ch) {
        const int64_t first = (ch * x.p.pp + s) * per_chunk;
        sp.moe_layers += moe_layers_in(m, first, first + per_chunk);
    }
    const double expert_total =
        d(sp.moe_layers) * d(m.moe.experts) * d(params_mlp(m, m.moe.expert_ffn_hidden));
    // Closed form of params_stage() (no loop over layers): shared attention + norms per layer,
    // dense MLPs, MoE routers + experts, embedding on the first stage, head (and the tied
    // embedding copy Megatron keeps) on the last.
    const int64_t layers = m.layers / x.p.pp;
    double all = d(layers) * d(params_attention(m) + params_layer_norms(m)) +
                 d(layers - sp.moe_layers) * d(params_mlp(m, m.ffn_hidden)) +
                 d(sp.moe_layers) * d(m.hidden * m.moe.experts) + expert_total;
    if (s == 0) {
        all += d(params_embedding(m));
    }
    if (s == x.p.pp - 1) {
        all += d(params_head(m)) + (m.tied_embeddings && x.p.pp > 1 ? d(m.vocab * m.hidden) : 0.0);
    }
    sp.dense = (all - expert_total) / d(x.p.tp);
    sp.expert = expert_total / (d(x.p.tp) * d(x.p.ep));
    return sp;
}

MemoryBreakdown stage_memory(const Context& x, int64_t s, const StageParams& sp) {
    const Plan& p = x.p;
    const int64_t dp_shard = p.dp * p.cp;
    const StateBytes dn = model_states(x.job, sp.dense, p.zero, dp_shard);
    const StateBytes ex =
        model_states(x.job, sp.expert, p.zero, dp_shard / std::max<int64_t>(1, p.ep));
    MemoryBreakdown mem;
    mem.weights = dn.weights + ex.weights;
    mem.grads = dn.grads + ex.grads;
    mem.optimizer = dn.optimizer + ex.optimizer;
    const int64_t layers = x.m.layers / p.pp;
    const double n_moe = d(sp.moe_layers);
    const double n_dense = d(layers) - n_moe;
    const Bytes per_mb = activation_per_layer(x.m, x.job, p, false, p.recompute) * n_dense +
                         activation_per_layer(x.m, x.job, p, true, p.recompute) * n_moe +
                         (s == 0 ? embedding_activation_bytes(x.m, x.job, p) : Bytes{});
    mem.activations = per_mb * inflight_microbatches(p, x.micro, s);
    if (p.recompute != Recompute::none) {
        // Backward rematerialises one layer's full activations at a time.
        const bool moe_layer = sp.moe_layers > 0;
        mem.activations += activation_per_layer(x.m, x.job, p, moe_layer, Recompute::none) -
                           activation_per_layer(x.m, x.job, p, moe_layer, p.recompute);
    }
    if (s == p.pp - 1) {
        mem.logits = logits_bytes(x.m, x.job, p);
    }
    const double ab = activation_bytes(x.job);
    const double th = tokens_per_gpu(x.job, p) * d(x.m.hidden);
    if (p.pp > 1) {
        mem.comm_buffers += bytes(4.0 * ab * th / d(p.tp));  // send + recv, fwd + bwd
    }
    if (p.sp) {
        mem.comm_buffers += bytes(ab * th);  // all-gathered layer input
    }
    mem.comm_buffers += zero3_gather_bytes(x.m, x.job, p);  // 0 below ZeRO 3
    mem.reserved = x.c.gpu.reserved_memory;
    mem.total = mem.weights + mem.grads + mem.optimizer + mem.activations + mem.logits +
                mem.comm_buffers + mem.reserved;
    return mem;
}

void add_layers(StageWork& w, const LayerCost& l, double n) {
    w.compute += (l.fwd + l.bwd + l.recompute) * n;
    w.cost.fwd += l.fwd * n;
    w.cost.bwd += (l.bwd + l.recompute) * n;
    w.cost.fwd_comm += (l.tp_fwd + l.cp_fwd + l.ep_fwd) * n;
    w.cost.bwd_comm += (l.tp_bwd + l.cp_bwd + l.ep_bwd) * n;
    w.tp += (l.tp_fwd + l.tp_bwd) * n;
    w.cp += (l.cp_fwd + l.cp_bwd) * n;
    w.ep += (l.ep_fwd + l.ep_bwd) * n;
    w.tp_b += l.tp_bytes * n;
    w.cp_b += l.cp_bytes * n;
    w.ep_b += l.ep_bytes * n;
}

void add_edge(StageWork& w, const EdgeCost& e) {
    w.compute += e.fwd + e.bwd;
    w.cost.fwd += e.fwd;
    w.cost.bwd += e.bwd;
    w.cost.fwd_comm += e.comm_fwd;
    w.cost.bwd_comm += e.comm_bwd;
    w.tp += e.comm_fwd + e.comm_bwd;
    w.tp_b += e.tp_bytes;
}

// ZeRO-3 (DeepSpeed stage 3), per micro-batch: the stage's weights are all-gathered before every
// pass that uses them -- forward, the recomputed forward (full recompute) and backward -- and the
// grads reduce-scattered once: 3 gathers + 1 reduce-scatter of 2 Psi bytes with full recompute
// (Rajbhandari et al. SC21, ZeRO-Infinity, Sec. 4), 2 + 1 without (ZeRO, SC20, Sec. 7.2.2;
// selective recompute redoes only the attention core, which has no weights). Overlap as DeepSpeed
// runs it: the forward's gathers are prefetched behind the forward compute; the backward's gathers
// stall it (the module about to run fetches synchronously; DeepSpeed PR #1188); the
// reduce-scatter runs behind the backward compute (overlap_comm). Fits SC21 Table 2 (rows 11-16
// of public_runs.csv) within 13 %; derivation in docs/costmodel.md section 4.
void add_zero3(const Context& x, StageWork& w, const StageParams& sp) {
    const Plan& p = x.p;
    const int64_t n = p.dp * p.cp;
    const Bytes wb = bytes((sp.dense + sp.expert) * bytes_of(x.job.weights));
    const Bytes gb = bytes((sp.dense + sp.expert) * bytes_of(x.job.grads));
    const Seconds ag = collective_time(Collective::all_gather, wb, n, x.links.dp);
    const Seconds rs = collective_time(Collective::reduce_scatter, gb, n, x.links.dp);
    const double bwd_gathers = p.recompute == Recompute::full ? 2.0 : 1.0;
    const Seconds fwd_exposed = max(Seconds{}, ag - w.cost.fwd);
    const Seconds bwd_exposed = ag * bwd_gathers + max(Seconds{}, rs - w.cost.bwd);
    w.zero3 = fwd_exposed + bwd_exposed;
    w.cost.fwd_comm += fwd_exposed;
    w.cost.bwd_comm += bwd_exposed;
    w.dp_b = (collective_bytes_sent(Collective::all_gather, wb, n) * (1.0 + bwd_gathers) +
              collective_bytes_sent(Collective::reduce_scatter, gb, n)) *
             d(x.micro);
    w.longest = max(w.longest, max(ag, rs));
}

// Gradient reduction after the last micro-batch: all-reduce (ZeRO 0) or reduce-scatter (ZeRO
// 1/2), overlapped with that micro-batch's backward except the last bucket (PyTorch DDP, Li et
// al. 2020, VLDB, Sec. 3.2.3; Megatron --overlap-grad-reduce), plus the tied-embedding
// all-reduce between first and last stage. Optimizer step + ZeRO 1/2 weight all-gather after.
void add_dp_and_optimizer(const Context& x, StageWork& w, const StageParams& sp, int64_t s) {
    const Plan& p = x.p;
    const int64_t n = p.dp * p.cp;
    const int64_t ne = std::max<int64_t>(1, n / std::max<int64_t>(1, p.ep));
    const double g = bytes_of(x.job.grads);
    const double wbytes = bytes_of(x.job.weights);
    const Collective k = p.zero == 0 ? Collective::all_reduce : Collective::reduce_scatter;
    Seconds total;
    Seconds last;
    if (p.zero < 3) {
        const Bytes gd = bytes(sp.dense * g);
        const Bytes ge = bytes(sp.expert * g);
        total =
            collective_time(k, gd, n, x.links.dp) + collective_time(k, ge, ne, x.links.dp_expert);
        const Bytes bucket = min(gd, bytes(bucket_params(p) * g));
        last = collective_time(k, bucket, n, x.links.dp);
        w.dp_b = collective_bytes_sent(k, gd, n) + collective_bytes_sent(k, ge, ne);
        w.longest = max(w.longest, last);
    }
    Seconds tied;
    if (p.pp > 1 && x.m.tied_embeddings && (s == 0 || s == p.pp - 1)) {
        const Bytes eb = bytes(d(x.m.vocab) * d(x.m.hidden) / d(p.tp) * g);
        tied = collective_time(Collective::all_reduce, eb, 2, x.links.pp);
        w.dp_b += collective_bytes_sent(Collective::all_reduce, eb, 2);
    }
    w.dp_total = total + tied;
    w.cost.dp_reduce = w.dp_total;
    const Seconds hidden = max(Seconds{}, total - last - w.cost.bwd);
    w.cost.dp_grad_sync = (total > Seconds{} ? last + hidden : Seconds{}) + tied;
    const double shard = p.zero >= 1 ? d(n) : 1.0;
    const double shard_e = p.zero >= 1 ? d(ne) : 1.0;
    w.cost.optimizer = optimizer_time(x.c.gpu, x.job, sp.dense / shard + sp.expert / shard_e);
    if (p.zero == 1 || p.zero == 2) {
        const Bytes wd = bytes(sp.dense * wbytes);
        const Bytes we = bytes(sp.expert * wbytes);
        w.cost.optimizer += collective_time(Collective::all_gather, wd, n, x.links.dp) +
                            collective_time(Collective::all_gather, we, ne, x.links.dp_expert);
        w.dp_b += collective_bytes_sent(Collective::all_gather, wd, n) +
                  collective_bytes_sent(Collective::all_gather, we, ne);
    }
}

StageWork stage_work(const Context& x, int64_t s) {
    const Plan& p = x.p;
    const StageParams sp = stage_params(x, s);
    StageWork w;
    w.cost.layers = x.m.layers / p.pp;
    const double n_moe = d(sp.moe_layers);
    add_layers(w, x.dense, d(w.cost.layers) - n_moe);
    if (sp.moe_layers > 0) {
        add_layers(w, x.moe, n_moe);
    }
    if (s == 0) {
        add_edge(w, x.emb);
    }
    if (s == p.pp - 1) {
        add_edge(w, x.out);
    }
    if (p.zero >= 3) {
        add_zero3(x, w, sp);
    }
    w.cost.fwd += w.cost.fwd_comm;
    w.cost.bwd += w.cost.bwd_comm;
    w.cost.memory = stage_memory(x, s, sp);
    if (p.pp > 1) {
        // One activation forward and one gradient backward per micro-batch per chunk, T h / t
        // per rank with Megatron's scatter/gather optimisation (Narayanan et al. 2021, Sec. 4.1).
        const double chunks = p.schedule == Schedule::interleaved ? d(p.vpp) : 1.0;
        const Bytes act =
            bytes(tokens_per_gpu(x.job, p) * d(x.m.hidden) * activation_bytes(x.job) / d(p.tp));
        const Seconds one = collective_time(Collective::send_recv, act, 2, x.links.pp);
        w.p2p = one * (2.0 * chunks);
        w.pp_b = act * (2.0 * chunks * d(x.micro));
    }
    w.tp_b = w.tp_b * d(x.micro);
    w.cp_b = w.cp_b * d(x.micro);
    w.ep_b = w.ep_b * d(x.micro);
    add_dp_and_optimizer(x, w, sp, s);
    return w;
}

Seconds per_microbatch(const StageWork& w) {
    return w.cost.fwd + w.cost.bwd + w.p2p;
}

}  // namespace

Estimate
estimate(const ModelSpec& model, const ClusterSpec& cluster, const JobSpec& job, const Plan& plan) {
    Context x{model, cluster, job, plan, plan_links(cluster, plan), {}, {}, {}, {}, 0};
    x.micro = num_microbatches(plan, job);
    x.dense = layer_cost(model, cluster, job, plan, x.links, false);
    if (model.moe.enabled()) {
        x.moe = layer_cost(model, cluster, job, plan, x.links, true);
    }
    x.emb = embedding_cost(model, cluster, job, plan, x.links);
    x.out = output_cost(model, cluster, job, plan, x.links);

    const int64_t idx[3] = {0, std::min<int64_t>(1, plan.pp - 1), plan.pp - 1};
    StageWork w[3];
    for (int k = 0; k < 3; ++k) {
        w[k] = (k > 0 && idx[k] == idx[k - 1]) ? w[k - 1] : stage_work(x, idx[k]);
    }
    Estimate e;
    e.microbatches = x.micro;
    int slow = 0;
    int peak = 0;
    for (int k = 0; k < 3; ++k) {
        e.stage[k] = w[k].cost;
        if (per_microbatch(w[k]) > per_microbatch(w[slow])) {
            slow = k;
        }
        if (w[k].cost.memory.total > w[peak].cost.memory.total) {
            peak = k;
        }
    }
    const double middles = d(std::max<int64_t>(0, plan.pp - 2));
    const Seconds sum =
        plan.pp == 1 ? per_microbatch(w[0])
                     : per_microbatch(w[0]) + per_microbatch(w[2]) + per_microbatch(w[1]) * middles;
    const Seconds tmax = per_microbatch(w[slow]);
    const Seconds pipe = pipeline_time(plan, x.micro, sum, tmax);
    Seconds tail;
    int tail_stage = 0;
    for (int k = 0; k < 3; ++k) {
        const Seconds t = w[k].cost.dp_grad_sync + w[k].cost.optimizer;
        if (t > tail) {
            tail = t;
            tail_stage = k;
        }
    }
    const double mb = d(x.micro);
    const StageWork& ws = w[slow];
    e.time.compute = ws.compute * mb;
    e.time.tp_comm = ws.tp * mb;
    e.time.cp_comm = ws.cp * mb;
    e.time.ep_comm = ws.ep * mb;
    e.time.pp_comm = ws.p2p * mb;
    e.time.dp_comm = ws.zero3 * mb + w[tail_stage].cost.dp_grad_sync;
    e.time.bubble = max(Seconds{}, pipe - tmax * mb);
    e.time.optimizer = w[tail_stage].cost.optimizer;
    e.iteration_time = pipe + tail;
    e.pp_p2p = plan.pp > 1
                   ? ws.p2p / (2.0 * (plan.schedule == Schedule::interleaved ? d(plan.vpp) : 1.0))
                   : Seconds{};
    e.bubble_ratio = plan.pp > 1 ? bubble_fraction(plan, x.micro) : 0.0;

    e.peak_memory_stage = idx[peak];
    e.memory = w[peak].cost.memory;
    e.memory_usable = usable_memory(cluster.gpu);
    e.fits = e.memory.total <= e.memory_usable;

    e.model_flops = model_flops(model, job);
    e.hardware_flops = hardware_flops(model, job, plan.recompute);
    const double t = e.iteration_time.value();
    const double gpus = d(plan_gpus(plan));
    const double peak_flops_s = peak_flops(cluster.gpu, job.compute).value();
    e.tokens_per_s = t > 0 ? d(job.global_batch) * d(job.seq_len) / t : 0.0;
    e.tflops_per_gpu = t > 0 ? e.model_flops.value() / t / gpus / 1e12 : 0.0;
    e.mfu = t > 0 && peak_flops_s > 0 ? e.model_flops.value() / (t * gpus * peak_flops_s) : 0.0;
    e.hfu = t > 0 && peak_flops_s > 0 ? e.hardware_flops.value() / (t * gpus * peak_flops_s) : 0.0;

    for (int k = 0; k < 3; ++k) {
        e.comm_bytes_per_gpu.tp = max(e.comm_bytes_per_gpu.tp, w[k].tp_b);
        e.comm_bytes_per_gpu.cp = max(e.comm_bytes_per_gpu.cp, w[k].cp_b);
        e.comm_bytes_per_gpu.ep = max(e.comm_bytes_per_gpu.ep, w[k].ep_b);
        e.comm_bytes_per_gpu.dp = max(e.comm_bytes_per_gpu.dp, w[k].dp_b);
        e.comm_bytes_per_gpu.pp = max(e.comm_bytes_per_gpu.pp, w[k].pp_b);
        e.dp_sync = max(e.dp_sync, w[k].dp_total);
        e.longest_collective = max(e.longest_collective, w[k].longest);
    }
    if (plan.pp > 1) {
        // The next iteration's first p2p recv on stage 1 waits while stage 0 reduces its grads
        // and steps its optimizer: one blocking NCCL call as long as that tail.
        e.longest_collective =
            max(e.longest_collective, w[0].cost.dp_grad_sync + w[0].cost.optimizer);
    }
    e.risk_mask = detect_risks(model, cluster, job, plan, x.links, e);
    return e;
}

}  // namespace cleave
