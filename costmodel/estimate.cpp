// estimate(): assembles memory, compute, communication and pipeline into one Estimate.
// Derivations: docs/costmodel.md.
#include "costmodel/estimate.hpp"

#include "costmodel/collectives.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/float8.hpp"
#include "costmodel/flops.hpp"
#include "costmodel/loss.hpp"
#include "costmodel/memory.hpp"
#include "costmodel/num.hpp"
#include "costmodel/overlap.hpp"
#include "costmodel/peft.hpp"
#include "costmodel/pipeline.hpp"
#include "costmodel/precision.hpp"
#include "costmodel/risks.hpp"
#include "costmodel/stage_memory.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <optional>

namespace cleave {

namespace {

using detail::d;
using namespace estimate_detail;

// Megatron DDP bucket: max(40M, 1M x dp) parameters (NVIDIA/Megatron-LM@d98e8a64
// megatron/core/distributed/distributed_data_parallel.py:134); 40M is the stack's bucket_mparams.
double bucket_params(const Plan& p, const SoftwareStack& s) {
    return std::max(s.bucket_mparams * 1e6, 1e6 * d(p.dp * p.cp));
}

/// The plan as launched (its GPUs, its risks).
const Plan& launched(const Context& x) {
    return x.ranks != nullptr ? *x.ranks : x.p;
}

/// The plan the stages are priced on: DualPipeV's pp ranks run 2 pp stages (rank r holds stage r
/// and stage 2pp-1-r), priced as a 2 pp-stage DualPipe whose ranks are folded the same way
/// (fold_dualpipe); every other plan as it is.
Plan stage_view(const Plan& p) {
    Plan q = p;
    if (p.schedule == Schedule::dualpipev) {
        q.pp = 2 * p.pp;
    }
    return q;
}

/// The share of the SMs the DualPipe pair's hidden all-to-all costs its compute: none where the
/// dispatcher's SMs are priced in the layers' compute (DeepEP, compute_sm_share), else the
/// stack's comm_sm_fraction (NCCL's kernels).
double pair_sm_share(const GpuSpec& gpu, const JobSpec& job, const Plan& p) {
    return compute_sm_share(gpu, job, p) < 1.0 ? 0.0 : job.stack.comm_sm_fraction;
}

/// A plan that recomputes only some layers (block) prices the others as recompute none.
bool mixed_recompute(const Plan& p) {
    return p.recompute == Recompute::full && p.recompute_method == RecomputeMethod::block;
}

Plan without_recompute(const Plan& p) {
    Plan q = p;
    q.recompute = Recompute::none;
    q.recompute_layers = 0;
    q.recompute_method = RecomputeMethod::uniform;
    return q;
}

struct StageWork {
    StageCost cost;
    Seconds compute;  // per micro-batch, no comm
    Seconds tp, cp, ep, zero3, p2p;
    Seconds expert_overhead;             // per micro-batch, of compute
    Bytes tp_b, cp_b, ep_b, dp_b, pp_b;  // per iteration
    Bytes ep_nvlink_b, ep_nic_b;         // of ep_b, per link
    Seconds dp_total;
    Seconds longest;
};

void add_layers(StageWork& w, const LayerCost& l, double n) {
    if (n == 0.0) {
        return;  // most stages hold no bf16-kept or block-recomputed layers
    }
    w.compute += (l.fwd + l.bwd + l.recompute) * n;
    w.cost.fwd += l.fwd * n;
    w.cost.bwd += (l.bwd + l.recompute) * n;
    w.cost.fwd_comm += (l.tp_fwd + l.cp_fwd + l.ep_fwd) * n;
    w.cost.bwd_comm += (l.tp_bwd + l.cp_bwd + l.ep_bwd) * n;
    w.cost.gemm += l.gemm * n;
    w.cost.attention += l.attention * n;
    w.cost.memory_bound += l.memory * n;
    w.cost.recompute += l.recompute * n;
    w.tp += (l.tp_fwd + l.tp_bwd) * n;
    w.cp += (l.cp_fwd + l.cp_bwd) * n;
    w.ep += (l.ep_fwd + l.ep_bwd) * n;
    w.expert_overhead += l.expert_overhead * n;
    w.tp_b += l.tp_bytes * n;
    w.cp_b += l.cp_bytes * n;
    w.ep_b += l.ep_bytes * n;
    w.ep_nvlink_b += l.ep_nvlink_bytes * n;
    w.ep_nic_b += l.ep_nic_bytes * n;
}

/// Muon's Newton-Schulz work of a stage per optimizer step on one GPU (muon_layer_cost per
/// layer; owners: the DP and expert-DP ranks that split the ownership of the matrices).
[[gnu::noinline]] Seconds
muon_stage_time(const Context& x, const StageParams& sp, int64_t layers, double owners, double owners_e) {
    const auto share = [owners, owners_e](const MuonCost& c, double n) {
        return ((c.dense + c.dense_gather) / owners + (c.expert + c.expert_gather) / owners_e) * n;
    };
    Seconds t;
    if (x.parts.hybrid) {
        for (const LayerKind k : all_kinds) {
            t += share(x.parts.hybrid->muon_kind[kind_index(k)], d(sp.kinds[kind_index(k)]));
        }
        return t;
    }
    const double n_moe = d(sp.moe_layers);
    return share(x.parts.muon_dense, d(layers) - n_moe) + share(x.parts.muon_moe, n_moe);
}

/// A hybrid stage's layers by kind (block recomputation: the share kept whole from `whole`).
[[gnu::noinline]] void add_hybrid_layers(StageWork& w,
                                         const LayerParts& parts,
                                         const LayerParts& whole,
                                         const StageParams& sp,
                                         double redo) {
    for (const LayerKind k : all_kinds) {
        const std::size_t i = kind_index(k);
        add_layers(w, parts.hybrid->kind[i], d(sp.kinds[i]) * redo);
        if (redo < 1.0) {
            add_layers(w, whole.hybrid->kind[i], d(sp.kinds[i]) * (1.0 - redo));
        }
    }
}

void add_edge(StageWork& w, const EdgeCost& e) {
    w.compute += e.fwd + e.bwd;
    w.cost.fwd += e.fwd;
    w.cost.bwd += e.bwd;
    w.cost.gemm += e.gemm;
    w.cost.memory_bound += e.fwd + e.bwd - e.gemm;
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
[[gnu::always_inline]] inline void add_zero3(const Context& x, StageWork& w, const StageParams& sp) {
    const Plan& p = x.p;
    const int64_t n = p.dp * p.cp;
    // torchao's float8 all-gather moves the converted Linears at 1 B (costmodel/float8.hpp).
    const Bytes wb = bytes((sp.dense + sp.expert) * bytes_of(x.job.weights) -
                           float8_stage_linear(x, sp) *
                               (bytes_of(x.job.weights) - float8_gather_bytes_per_param(x.job)));
    const double trained = x.job.peft == Peft::none ? sp.dense + sp.expert : sp.adapters;
    const Bytes gb = bytes(trained * bytes_of(x.job.grads));
    const Seconds ag = collective_time(Collective::all_gather, wb, n, x.links.dp);
    const Seconds rs = collective_time(Collective::reduce_scatter, gb, n, x.links.dp);
    const SoftwareStack& st = x.job.stack;
    double bwd_gathers = p.recompute == Recompute::full ? 2.0 : 1.0;
    Seconds fwd_exposed = max(Seconds{}, ag - w.cost.fwd);
    Seconds bwd_exposed = ag * bwd_gathers + max(Seconds{}, rs - w.cost.bwd);
    if (st.fsdp_prefetch) {
        // FSDP2: one gather per unit serves its recomputed forward and its backward; none when
        // the forward keeps the gathered weights (reshard_after_forward false). Both passes
        // prefetch the next unit (costmodel/overlap.hpp fsdp_exposed).
        bwd_gathers = st.reshard_after_forward ? 1.0 : 0.0;
        const double units = d(std::max<int64_t>(1, w.cost.layers));
        fwd_exposed = fsdp_exposed(ag, Seconds{}, w.cost.fwd, units, true);
        bwd_exposed = fsdp_exposed(ag * bwd_gathers, rs, w.cost.bwd, units, true);
        // The hidden traffic's SMs slow the compute it hides behind (overlap_slowdown).
        fwd_exposed += overlap_slowdown(ag, fwd_exposed, st.comm_sm_fraction);
        bwd_exposed += overlap_slowdown(ag * bwd_gathers + rs, bwd_exposed, st.comm_sm_fraction);
    }
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
[[gnu::always_inline]] inline void add_dp_and_optimizer(const Context& x, StageWork& w, const StageParams& sp, int64_t s) {
    const Plan& p = x.p;
    const int64_t n = p.dp * p.cp;
    const int64_t ne = std::max<int64_t>(1, expert_dp(p));  // expert grads reduced over edp
    const double g = bytes_of(x.job.grads);
    const double wbytes = bytes_of(x.job.weights);
    const Collective k = p.zero == 0 ? Collective::all_reduce : Collective::reduce_scatter;
    Seconds total;
    Seconds last;
    // Under LoRA only the adapters have grads, optimizer states and updated weights to gather.
    const bool frozen = x.job.peft != Peft::none;
    const double trained = frozen ? sp.adapters : sp.dense;
    const double trained_e = frozen ? 0.0 : sp.expert;
    if (p.zero < 3) {
        const Bytes gd = bytes(trained * g);
        const Bytes ge = bytes(trained_e * g);
        total =
            collective_time(k, gd, n, x.links.dp) + collective_time(k, ge, ne, x.links.dp_expert);
        const Bytes bucket = min(gd, bytes(bucket_params(p, x.job.stack) * g));
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
    const SoftwareStack& st = x.job.stack;
    // What the backward does not hide, plus the compute the hidden part slows down.
    const Seconds bare = exposed_bucketed(total, last, w.cost.bwd, st.overlap_grad_reduce);
    const Seconds exposed = bare + overlap_slowdown(total, bare, st.comm_sm_fraction);
    if (p.zero == 2) {
        // ZeRO-2 keeps only its shard of the grads, so every micro-batch's backward reduce-
        // scatters (DeepSpeed deepspeed/runtime/zero/stage_1_and_2.py reduces its buckets in the
        // backward hooks of every micro-step): the exposed part lands in each backward.
        w.zero3 += exposed;
        w.cost.bwd += exposed;
        w.cost.bwd_comm += exposed;
        w.dp_b = w.dp_b * d(x.micro);
        w.cost.dp_grad_sync = tied;
    } else {
        w.cost.dp_grad_sync = exposed + tied;
    }
    const double shard = p.zero >= 1 ? d(n) : 1.0;
    const double shard_e = p.zero >= 1 ? d(ne) : 1.0;
    if (x.job.optimizer == Optimizer::muon) {
        // Muon's Newton-Schulz work on the stage's 2-D weights: each matrix orthogonalised by
        // the one DP rank that owns it under Megatron's layer-wise distributed optimizer (zero
        // 1), by every rank without it; expert matrices over the expert-DP group.
        w.cost.optimizer += muon_stage_time(x, sp, w.cost.layers, shard, shard_e);
    }
    // Transformer Engine casts the weights once per step; torchao at each use (stage_work).
    w.cost.optimizer += optimizer_time(x.c.gpu, x.job, trained / shard + trained_e / shard_e) +
                        (float8_run(x.job).active ? Seconds{}
                                                  : weight_quantise_time(x.c.gpu, x.job, sp.dense + sp.expert));
    if (p.zero == 1 || p.zero == 2) {
        const Bytes wd = bytes(trained * wbytes);
        const Bytes we = bytes(trained_e * wbytes);
        // Updated weights gathered per bucket; with --overlap-param-gather behind the next
        // forward except the first bucket (Megatron-Core distributed optimizer).
        const Seconds ag = collective_time(Collective::all_gather, wd, n, x.links.dp) +
                           collective_time(Collective::all_gather, we, ne, x.links.dp_expert);
        Seconds shown = ag;
        if (st.overlap_param_gather) {  // the first bucket's gather priced only when needed
            const Bytes ag_bucket = min(wd, bytes(bucket_params(p, st) * wbytes));
            const Seconds first = collective_time(Collective::all_gather, ag_bucket, n, x.links.dp);
            shown = exposed_bucketed(ag, first, w.cost.fwd, true);
        }
        w.cost.optimizer += shown + overlap_slowdown(ag, shown, st.comm_sm_fraction);
        w.dp_b += collective_bytes_sent(Collective::all_gather, wd, n) +
                  collective_bytes_sent(Collective::all_gather, we, ne);
    }
}

// Megatron's first / last layers in bf16 (fp8_utils.py is_first_last_bf16_layer @d98e8a64): global
// layer indices, so they sit on the first and the last pipeline stage (the first and the last
// chunk under interleaving), as many as the stage holds.
// `per_stage`: the stage's layers (layers_on_stage).
[[gnu::always_inline]] inline int64_t
bf16_layers_in_stage(const JobSpec& job, const Plan& p, int64_t s, int64_t per_stage) {
    if (!is_quantised(job.compute)) {
        return 0;
    }
    const int64_t chunk =
        per_stage / std::max<int64_t>(1, p.schedule == Schedule::interleaved ? p.vpp : 1);
    int64_t n = 0;
    if (s == 0) {
        n += std::min(job.bf16_layers_start, chunk);
    }
    if (s == p.pp - 1) {
        n += std::min(job.bf16_layers_end, chunk);
    }
    return std::min(n, per_stage);
}

/// Fills `w`, a default StageWork, with stage s's work (filled in place: the planner prices
/// hundreds of thousands of plans, three stages each).
template <bool Hybrid>
void stage_work(
    const Context& x, int64_t s, const StageParams& sp, const MemoryBreakdown& mem, StageWork& w) {
    const Plan& p = x.p;
    w.cost.layers = sp.layers;
    const double n_moe = d(sp.moe_layers);
    const double n_dense = d(w.cost.layers) - n_moe;
    const double n_hp = std::min(d(bf16_layers_in_stage(x.job, p, s, sp.layers)), n_dense);
    // Block recomputation: the checkpointed share at full-recompute cost (its recomputed
    // forward and that forward's TP/CP/EP collectives), the rest at recompute-none cost.
    const double redo = recompute_shape(p, w.cost.layers).recomputed;
    const LayerParts& whole = x.whole != nullptr ? *x.whole : x.parts;
    if constexpr (Hybrid) {
        add_hybrid_layers(w, x.parts, whole, sp, redo);
    } else {
        add_layers(w, x.parts.dense, (n_dense - n_hp) * redo);
        add_layers(w, x.parts.dense_hp, n_hp * redo);
        if (sp.moe_layers > 0) {
            add_layers(w, x.parts.moe, n_moe * redo);
        }
        if (redo < 1.0) {
            add_layers(w, whole.dense, (n_dense - n_hp) * (1.0 - redo));
            add_layers(w, whole.dense_hp, n_hp * (1.0 - redo));
            if (sp.moe_layers > 0) {
                add_layers(w, whole.moe, n_moe * (1.0 - redo));
            }
        }
    }
    if (s == 0) {
        add_edge(w, x.parts.emb);
    }
    if (s == p.pp - 1) {
        add_edge(w, x.parts.out);
        // MTP modules run after the main model on the last stage (Megatron-Core puts the MTP
        // block in the last pipeline stage): each a transformer block, its projection, and its
        // own logits + loss.
        for (int64_t i = 0; i < x.parts.mtp_layers; ++i) {
            add_layers(w, x.parts.mtp_moe ? x.parts.moe : x.parts.dense, 1.0);
            add_edge(w, x.parts.mtp_proj);
            add_edge(w, x.parts.out);
        }
    }
    if (const double f8 = float8_stage_linear(x, sp); f8 > 0.0) {
        // torchao casts the weights at each micro-batch's use (costmodel/float8.hpp), half in
        // each pass.
        const Seconds cast = quantize_time(
            x.c.gpu, x.job, float8_weight_cast_bytes(x.c.gpu, x.job, f8, d(p.dp * p.cp)));
        w.compute += cast;
        w.cost.fwd += cast * 0.5;
        w.cost.bwd += cast * 0.5;
        w.cost.memory_bound += cast;
    }
    if (p.zero >= 3) {
        add_zero3(x, w, sp);
    }
    if (const int64_t off = offloaded_layers(p, w.cost.layers); off > 0) {
        // CPU offload: the offloaded layers' activations cross the host link once in forward
        // (device to host) and once in backward (back), on their own stream behind the rest
        // of that pass (TE cpu_offload.py, double-buffered): exposed only beyond the pass.
        double kept_all = n_dense * x.parts.act_dense.value() + n_moe * x.parts.act_moe.value();
        if constexpr (Hybrid) {
            kept_all = 0.0;
            for (const LayerKind k : all_kinds) {
                kept_all += d(sp.kinds[kind_index(k)]) * x.parts.hybrid->act_kind[kind_index(k)].value();
            }
        }
        const double per_layer = kept_all / d(std::max<int64_t>(1, w.cost.layers));
        const Seconds move = bytes(per_layer * d(off)) / x.c.node.pcie_bw;
        const Seconds fwd_left = move - w.cost.fwd;
        const Seconds bwd_left = move - w.cost.bwd;
        w.cost.fwd += fwd_left.value() > 0.0 ? fwd_left : Seconds{};
        w.cost.bwd += bwd_left.value() > 0.0 ? bwd_left : Seconds{};
    }
    w.cost.fwd += w.cost.fwd_comm;
    w.cost.bwd += w.cost.bwd_comm;
    w.cost.memory = mem;
    if (p.pp > 1) {
        // One activation forward and one gradient backward per micro-batch per chunk, T h / t
        // per rank with Megatron's scatter/gather optimisation (Narayanan et al. 2021, Sec. 4.1).
        const double chunks = p.schedule == Schedule::interleaved ? d(p.vpp) : 1.0;
        const Bytes act =
            bytes(tokens_per_gpu(x.job, p) * d(x.m.hidden) * activation_bytes(x.job) / d(p.tp));
        // Plus the stack's per-send/recv overhead (launch + sync), paid per virtual stage.
        const Seconds one = collective_time(Collective::send_recv, act, 2, x.links.pp) +
                            us(x.job.stack.p2p_overhead_us);
        w.p2p = one * (2.0 * chunks);
        w.pp_b = act * (2.0 * chunks * d(x.micro));
    }
    w.tp_b = w.tp_b * d(x.micro);
    w.cp_b = w.cp_b * d(x.micro);
    w.ep_b = w.ep_b * d(x.micro);
    w.ep_nvlink_b = w.ep_nvlink_b * d(x.micro);
    w.ep_nic_b = w.ep_nic_b * d(x.micro);
    add_dp_and_optimizer(x, w, sp, s);
}

Seconds per_microbatch(const StageWork& w) {
    return w.cost.fwd + w.cost.bwd + w.p2p;
}

/// The plan with every field the per-layer costs do not read reset: the cache key of LayerParts,
/// and what layer_parts() passes down, so a cost that starts reading another field cannot be
/// served stale from the cache (it reads the reset value in both paths alike).
Plan layer_shape(const Plan& p) {
    Plan s;
    s.tp = p.tp;
    s.cp = p.cp;
    s.ep = p.ep;
    s.etp = p.etp;
    s.mbs = p.mbs;
    s.sp = p.sp;
    s.recompute = p.recompute;
    s.recompute_modules = p.recompute_modules;
    return s;
}

/// The memory half of layer_parts(): a function of layer_shape(plan) alone (no link).
LayerMemoryParts
layer_memory_parts(const ModelSpec& m, const GpuSpec& gpu, const JobSpec& job, const Plan& plan) {
    const Plan p = layer_shape(plan);
    LayerMemoryParts lp;
    lp.act_dense = activation_per_layer(m, job, p, false, p.recompute) +
                   lora_activation_per_layer(m, job, p, p.recompute);
    lp.act_dense_none = activation_per_layer(m, job, p, false, Recompute::none) +
                        lora_activation_per_layer(m, job, p, Recompute::none);
    if (m.moe.enabled()) {
        // Dispatch / permutation buffers kept for backward (not with full recomputation, which
        // keeps only the layer input).
        const Bytes buf = moe_dispatch_buffer_bytes(m, job, p);
        const bool moe_rerun = p.recompute == Recompute::selective &&
                               (p.recompute_modules & recompute_module::moe) != 0;
        lp.act_moe = activation_per_layer(m, job, p, true, p.recompute) +
                     (p.recompute == Recompute::full || moe_rerun ? Bytes{} : buf);
        lp.act_moe_none = activation_per_layer(m, job, p, true, Recompute::none) + buf;
    }
    if (is_hybrid(m)) {
        // One block each, its pre-norm included (core params_layer). The one allocation of a
        // hybrid model's memory parts (a transformer's make none).
        auto hybrid = std::make_shared<HybridParts>();
        HybridParts& hp = *hybrid;
        const double norm = d(params_norm(m, m.hidden));
        const auto i = [](LayerKind k) { return kind_index(k); };
        hp.act_kind[i(LayerKind::mamba)] = mamba_activation_per_layer(m, job, p, p.recompute);
        hp.act_kind_none[i(LayerKind::mamba)] = mamba_activation_per_layer(m, job, p, Recompute::none);
        hp.params_kind[i(LayerKind::mamba)] = d(params_mamba_layer(m));
        if (m.gdn.enabled()) {
            hp.act_kind[i(LayerKind::gdn)] = gdn_activation_per_layer(m, job, p, p.recompute);
            hp.act_kind_none[i(LayerKind::gdn)] =
                gdn_activation_per_layer(m, job, p, Recompute::none);
            hp.params_kind[i(LayerKind::gdn)] = d(params_gdn_layer(m));
        }
        hp.act_kind[i(LayerKind::attention)] =
            activation_per_layer(m, job, p, false, p.recompute, LayerShape::attention);
        hp.act_kind_none[i(LayerKind::attention)] =
            activation_per_layer(m, job, p, false, Recompute::none, LayerShape::attention);
        hp.params_kind[i(LayerKind::attention)] = d(params_attention(m)) + norm;
        hp.act_kind[i(LayerKind::mlp)] =
            activation_per_layer(m, job, p, false, p.recompute, LayerShape::ffn);
        hp.act_kind_none[i(LayerKind::mlp)] =
            activation_per_layer(m, job, p, false, Recompute::none, LayerShape::ffn);
        hp.params_kind[i(LayerKind::mlp)] = d(params_mlp(m, m.ffn_hidden)) + norm;
        if (m.moe.enabled()) {
            const Bytes buf = moe_dispatch_buffer_bytes(m, job, p);
            const bool moe_rerun = p.recompute == Recompute::selective &&
                                   (p.recompute_modules & recompute_module::moe) != 0;
            hp.act_kind[i(LayerKind::moe)] =
                activation_per_layer(m, job, p, true, p.recompute, LayerShape::ffn) +
                (p.recompute == Recompute::full || moe_rerun ? Bytes{} : buf);
            hp.act_kind_none[i(LayerKind::moe)] =
                activation_per_layer(m, job, p, true, Recompute::none, LayerShape::ffn) + buf;
            hp.params_kind[i(LayerKind::moe)] = d(params_moe_dense(m)) + norm;
        }
        lp.hybrid = std::move(hybrid);
    }
    if (job.mtp && m.mtp_layers > 0) {
        lp.mtp_modules = m.mtp_layers;
        lp.mtp_layers = m.mtp_layers * std::max<int64_t>(1, job.mtp_repeats);
        // A hybrid model's MTP block is '*E' or '*-' (the loader's check): attention + MoE or
        // MLP, a transformer layer's shape; else one layer of the last layer's kind.
        lp.mtp_moe = m.moe.enabled() &&
                     (m.mtp_kinds.empty()
                          ? moe_layers_in(m, m.layers - 1, m.layers) > 0
                          : std::find(m.mtp_kinds.begin(), m.mtp_kinds.end(), LayerKind::moe) !=
                                m.mtp_kinds.end());
        lp.params_mtp = d(params_mtp(m));
    }
    lp.act_embedding = embedding_activation_bytes(m, job, p);
    lp.logits = logits_bytes(m, job, p);
    lp.layer_io_bytes = activation_bytes(job) * tokens_per_gpu(job, p) * d(m.hidden);
    lp.params_shared = d(params_attention(m) + params_layer_norms(m));
    lp.params_dense_mlp = d(params_mlp(m, m.ffn_hidden));
    // Router and shared expert: in every MoE layer, replicated across EP ranks.
    lp.params_router = d(params_moe_dense(m));
    lp.params_experts = d(m.moe.experts) * d(params_expert(m));
    lp.params_embedding = d(params_embedding(m));
    lp.params_head = d(params_head(m));
    lp.params_tied_copy = m.tied_embeddings ? d(m.vocab * m.hidden) : 0.0;
    lp.params_lora = lora_params_per_layer(m, job);
    lp.state_bytes = state_bytes_per_param(job);
    // No quantised weight copies kept under LoRA: Megatron-Bridge's LoRA recipes set
    // disable_parameter_transpose_cache (perf_recipes/llama/b200/llama3.py @067f987d), so a
    // frozen weight's quantised copies live only while its GEMM runs.
    lp.weight_copy_bytes = job.peft == Peft::none ? weight_copy_bytes_per_param(gpu, job) : 0.0;
    return lp;
}

/// The cost half of layer_parts(), added to `lp` (its memory half filled): a function of
/// layer_shape(plan) and the TP / CP / EP links, which depend on tp, cp and ep alone (rank order
/// TP -> CP -> EP -> DP -> PP).
void add_layer_costs(LayerParts& lp,
                     const ModelSpec& m,
                     const ClusterSpec& c,
                     const JobSpec& job,
                     const Plan& plan,
                     const PlanLinks& links) {
    const Plan p = layer_shape(plan);
    lp.dense = layer_cost(m, c, job, p, links, false);
    if (job.bf16_layers_start + job.bf16_layers_end > 0 && is_quantised(job.compute)) {
        JobSpec hp = job;
        hp.compute = unquantised(job.compute);
        hp.weights = unquantised(job.weights);
        lp.dense_hp = layer_cost(m, c, hp, p, links, false);
    }
    if (m.moe.enabled()) {
        lp.moe = layer_cost(m, c, job, p, links, true);
    }
    std::shared_ptr<HybridParts> hybrid;
    if (is_hybrid(m)) {
        // The memory half's blocks with their costs added, in a copy: the Estimator keeps the
        // memory half of every shape apart from the costs of the few it prices.
        hybrid = std::make_shared<HybridParts>(*lp.hybrid);
        HybridParts& hp = *hybrid;
        const auto i = [](LayerKind k) { return kind_index(k); };
        hp.kind[i(LayerKind::mamba)] = mamba_layer_cost(m, c, job, p, links);
        if (m.gdn.enabled()) {
            hp.kind[i(LayerKind::gdn)] = gdn_layer_cost(m, c, job, p, links);
        }
        hp.kind[i(LayerKind::attention)] = layer_cost(m, c, job, p, links, false, LayerShape::attention);
        hp.kind[i(LayerKind::mlp)] = layer_cost(m, c, job, p, links, false, LayerShape::ffn);
        if (m.moe.enabled()) {
            hp.kind[i(LayerKind::moe)] = layer_cost(m, c, job, p, links, true, LayerShape::ffn);
        }
    }
    lp.emb = embedding_cost(m, c, job, p, links);
    lp.out = output_cost(m, c, job, p, links);
    if (job.mtp && m.mtp_layers > 0) {
        lp.mtp_proj = mtp_projection_cost(m, c, job, p);
    }
    // The slowest GPU of the job sets every rank's pace (compute.hpp straggler_factor): its
    // kernels, not its collectives or the host-bound expert overhead, run that much longer.
    const double slow = straggler_factor(c.gpu, job.gpus > 0 ? job.gpus : plan_gpus(plan));
    if (slow > 1.0) {
        lp.straggler = slow;
        const auto scale = [slow](LayerCost& l) {
            const Seconds eo = l.expert_overhead;
            l.fwd = (l.fwd - eo / 3.0) * slow + eo / 3.0;
            l.bwd = (l.bwd - eo * (2.0 / 3.0)) * slow + eo * (2.0 / 3.0);
            l.recompute = l.recompute * slow;
            l.gemm = l.gemm * slow;
            l.attention = l.attention * slow;
            l.memory = l.memory * slow;
        };
        for (LayerCost* l : {&lp.dense, &lp.dense_hp, &lp.moe}) {
            scale(*l);
        }
        if (hybrid) {
            for (LayerCost& l : hybrid->kind) {
                scale(l);
            }
        }
        for (EdgeCost* e : {&lp.emb, &lp.out, &lp.mtp_proj}) {
            e->fwd = e->fwd * slow;
            e->bwd = e->bwd * slow;
            e->gemm = e->gemm * slow;
        }
    }
    lp.hardware_flops = hardware_flops(m, job, p.recompute);
    if (job.optimizer == Optimizer::muon) {
        lp.muon_dense = muon_layer_cost(m, c.gpu, job, p, links, false, LayerShape::full);
        lp.muon_moe = muon_layer_cost(m, c.gpu, job, p, links, true, LayerShape::full);
        if (hybrid) {
            const auto i = [](LayerKind k) { return kind_index(k); };
            hybrid->muon_kind[i(LayerKind::mamba)] =
                muon_layer_cost(m, c.gpu, job, p, links, false, LayerShape::full, true);
            hybrid->muon_kind[i(LayerKind::attention)] =
                muon_layer_cost(m, c.gpu, job, p, links, false, LayerShape::attention);
            hybrid->muon_kind[i(LayerKind::mlp)] =
                muon_layer_cost(m, c.gpu, job, p, links, false, LayerShape::ffn);
            hybrid->muon_kind[i(LayerKind::moe)] =
                muon_layer_cost(m, c.gpu, job, p, links, true, LayerShape::ffn);
            hybrid->muon_kind[i(LayerKind::gdn)] =
                muon_layer_cost(m, c.gpu, job, p, links, false, LayerShape::full, false, true);
        }
    }
    if (hybrid) {
        lp.hybrid = std::move(hybrid);
    }
}

/// Everything per layer and per edge of one micro-batch: both halves.
LayerParts layer_parts(const ModelSpec& m,
                       const ClusterSpec& c,
                       const JobSpec& job,
                       const Plan& plan,
                       const PlanLinks& links) {
    LayerParts lp;
    static_cast<LayerMemoryParts&>(lp) = layer_memory_parts(m, c.gpu, job, plan);
    add_layer_costs(lp, m, c, job, plan, links);
    return lp;
}

/// Fills `e`, a default Estimate (filled in place, as stage_work).
void assemble(const Context& x, const StageMemories& sm, Flops model_fl, Estimate& e) {
    const ModelSpec& model = x.m;
    const ClusterSpec& cluster = x.c;
    const JobSpec& job = x.job;
    const Plan& plan = x.p;
    const int64_t* idx = sm.idx;
    StageWork w[3];
    for (int k = 0; k < 3; ++k) {
        if (k > 0 && idx[k] == idx[k - 1]) {
            w[k] = w[k - 1];
        } else if (is_hybrid(model)) {
            stage_work<true>(x, idx[k], sm.sp[k], sm.mem[k], w[k]);
        } else {
            stage_work<false>(x, idx[k], sm.sp[k], sm.mem[k], w[k]);
        }
    }
    e.microbatches = x.micro;
    int slow = 0;
    const int peak = sm.peak;
    for (int k = 0; k < 3; ++k) {
        e.stage[k] = w[k].cost;
        if (per_microbatch(w[k]) > per_microbatch(w[slow])) {
            slow = k;
        }
    }
    if (bidirectional(plan.schedule)) {
        // Rank r holds stage r and stage p-1-r: both stages' layers (memory is folded already).
        for (int k = 0; k < 3; ++k) {
            e.stage[k].layers += layers_on_stage(model.layers, plan, plan.pp - 1 - idx[k]);
        }
        if (plan.schedule == Schedule::dualpipev) {
            e.stage[2] = e.stage[1];  // the last rank holds two middle stages (fold_dualpipe)
        }
    }
    const double middles = d(std::max<int64_t>(0, plan.pp - 2));
    Seconds sum =
        plan.pp == 1 ? per_microbatch(w[0])
                     : per_microbatch(w[0]) + per_microbatch(w[2]) + per_microbatch(w[1]) * middles;
    Seconds tmax = per_microbatch(w[slow]);
    if (plan.pp > 3 && is_hybrid(model)) {
        // Every middle stage of a hybrid model in the fill and drain, the slowest in the steady
        // state (a transformer's middle stages are alike).
        sum = per_microbatch(w[0]) + per_microbatch(w[2]);
        for (int64_t s = 1; s < plan.pp - 1; ++s) {
            const StageParams sp = stage_params<true>(x, s);
            StageWork mid;
            stage_work<true>(x, s, sp, hybrid_stage_memory(x, s, sp), mid);
            const Seconds t = per_microbatch(mid);
            sum += t;
            tmax = std::max(tmax, t);
        }
    }
    const double mb = d(x.micro);
    Seconds pipe = pipeline_time(plan, x.micro, sum, tmax);
    const bool dual = bidirectional(plan.schedule);
    const bool vee = plan.schedule == Schedule::dualpipev;  // plan: its 2 pp-stage view
    // DualPipe: stage k's partner on its rank (stage p-1-k; the middle stage's partner is a
    // middle stage, the first's the last).
    const auto partner = [&](int k) { return k == 0 ? 2 : k == 2 ? 0 : plan.pp >= 4 ? 1 : 0; };
    // Under DualPipe, rank k's work per micro-batch: the mean of its two stages' (it runs m / 2
    // micro-batches through each; its F&B pairs a forward of one stage with a backward of the
    // other). Under DualPipeV every micro-batch crosses both of the rank's stages: their sum.
    std::optional<std::array<StageWork, 3>> ranks;  // built only under DualPipe
    if (dual) {
        std::array<StageWork, 3>& rank = ranks.emplace();
        const double share = vee ? 1.0 : 0.5;
        for (int k = 0; k < 3; ++k) {
            const StageWork& a = w[k];
            const StageWork& b = w[partner(k)];
            StageWork& r = rank[k];
            r = a;
            r.cost.fwd = (a.cost.fwd + b.cost.fwd) * share;
            r.cost.bwd = (a.cost.bwd + b.cost.bwd) * share;
            r.compute = (a.compute + b.compute) * share;
            r.tp = (a.tp + b.tp) * share;
            r.cp = (a.cp + b.cp) * share;
            r.ep = (a.ep + b.ep) * share;
            r.zero3 = (a.zero3 + b.zero3) * share;
            r.p2p = (a.p2p + b.p2p) * share;
            r.expert_overhead = (a.expert_overhead + b.expert_overhead) * share;
        }
        if (vee) {
            rank[2] = rank[1];  // the last rank: stages pp-1 and pp, two middle stages
        }
        // A forward and a backward of two micro-batches overlapped (F&B): each one's all-to-all
        // and pipeline send run under the other's compute (DeepSeek-V3 report Sec. 3.2.1,
        // "both all-to-all and PP communication can be fully hidden"), so a pair costs the
        // larger of the two, and the compute the hidden communication runs beside loses the SMs
        // its kernels hold (overlap_slowdown, the stack's comm_sm_fraction; the report gives
        // communication 20 SMs of the H800's 132).
        // DeepEP's SMs are in the layers' compute already (compute_sm_share).
        const double sm_share = pair_sm_share(cluster.gpu, job, plan);
        const auto pair = [sm_share](const StageWork& r) {
            const Seconds work = r.cost.fwd + r.cost.bwd - r.ep;
            const Seconds comm = r.ep + r.p2p;
            const Seconds exposed = max(Seconds{}, comm - work);
            return work + exposed + overlap_slowdown(comm, exposed, sm_share);
        };
        slow = 0;
        for (int k = 1; k < 3; ++k) {
            if (pair(rank[k]) > pair(rank[slow])) {
                slow = k;
            }
        }
        tmax = pair(rank[slow]);
        // The bubble (p/2 - 1)(F&B + B - 3W): B the slow rank's backward, W its weight
        // gradients, half of its backward compute (a linear's dgrad and wgrad GEMMs have the
        // same FLOPs; the exposed all-to-all, split evenly between the passes, left out).
        const StageWork& r = rank[slow];
        const Seconds wgrad = (r.cost.bwd - r.ep * 0.5) * 0.5;
        // DualPipeV's bubble is the README's for its 2 pp stages, F&B, B and W of one stage:
        // half the rank's.
        const double chunk = vee ? 0.5 : 1.0;
        pipe = tmax * mb +
               dualpipe_bubble(plan.pp, tmax * chunk, r.cost.bwd * chunk, wgrad * chunk);
    }
    Seconds tail;
    int tail_stage = 0;
    for (int k = 0; k < 3; ++k) {
        // Under DualPipe a rank reduces and steps both of its stages' parameters.
        const Seconds t = w[k].cost.dp_grad_sync + w[k].cost.optimizer +
                          (dual ? w[partner(k)].cost.dp_grad_sync + w[partner(k)].cost.optimizer
                                : Seconds{});
        if (t > tail) {
            tail = t;
            tail_stage = k;
        }
    }
    const StageWork& ws = dual ? (*ranks)[static_cast<std::size_t>(slow)] : w[slow];
    e.time.compute = ws.compute * mb;
    e.time.tp_comm = ws.tp * mb;
    e.time.cp_comm = ws.cp * mb;
    e.time.ep_comm = ws.ep * mb;
    e.expert_overhead = ws.expert_overhead * mb;
    e.time.pp_comm = ws.p2p * mb;
    if (dual) {  // what the overlapped pair leaves of the communication, and its SM cost
        const Seconds comm = ws.ep + ws.p2p;
        const Seconds exposed = max(Seconds{}, comm - (ws.cost.fwd + ws.cost.bwd - ws.ep));
        e.time.ep_comm =
            (exposed + overlap_slowdown(comm, exposed, pair_sm_share(cluster.gpu, job, plan))) * mb;
        e.time.pp_comm = Seconds{};
    }
    const int tp_partner = dual ? partner(tail_stage) : tail_stage;
    e.time.dp_comm = ws.zero3 * mb + w[tail_stage].cost.dp_grad_sync +
                     (dual ? w[tp_partner].cost.dp_grad_sync : Seconds{});
    e.time.bubble = max(Seconds{}, pipe - tmax * mb);
    e.time.optimizer =
        w[tail_stage].cost.optimizer + (dual ? w[tp_partner].cost.optimizer : Seconds{});
    e.time.straggler = (e.time.compute - e.expert_overhead) * (1.0 - 1.0 / x.parts.straggler);
    e.iteration_time = pipe + tail;
    e.pp_p2p = plan.pp > 1
                   ? ws.p2p / (2.0 * (plan.schedule == Schedule::interleaved ? d(plan.vpp) : 1.0))
                   : Seconds{};
    e.bubble_ratio = plan.pp <= 1 ? 0.0
                     : dual       ? (pipe.value() > 0.0 ? e.time.bubble.value() / pipe.value() : 0.0)
                                  : bubble_fraction(plan, x.micro);

    e.peak_memory_stage = idx[peak];
    e.middle_stage = idx[1];
    e.middle_stages_differ = plan.pp > 3 && is_hybrid(model);
    e.memory = w[peak].cost.memory;
    e.memory_usable = usable_memory(cluster.gpu);
    e.memory_headroom = job.memory_headroom;
    e.fits = e.memory.total + e.memory_headroom <= e.memory_usable;

    e.model_flops = model_fl;
    e.hardware_flops = x.parts.hardware_flops;
    if (plan.recompute == Recompute::full && plan.recompute_method == RecomputeMethod::block) {
        // Only the block's share of the layers runs its forward twice.
        const Flops none = hardware_flops(model, job, Recompute::none);
        const double redo =
            recompute_shape(plan, model.layers / std::max<int64_t>(1, plan.pp)).recomputed;
        e.hardware_flops = none + (e.hardware_flops - none) * redo;
    }
    const double t = e.iteration_time.value();
    const double gpus = d(plan_gpus(launched(x)));
    // MFU against the dense peak of the precision the linear GEMMs run in (fp8 on an A100: bf16).
    const double peak_flops_s =
        peak_flops(cluster.gpu, runnable_dtype(cluster.gpu, job.compute)).value();
    e.tokens_per_s = t > 0 ? d(job.global_batch) * d(job.seq_len) / t : 0.0;
    e.tflops_per_gpu = t > 0 ? e.model_flops.value() / t / gpus / 1e12 : 0.0;
    e.mfu = t > 0 && peak_flops_s > 0 ? e.model_flops.value() / (t * gpus * peak_flops_s) : 0.0;
    e.hfu = t > 0 && peak_flops_s > 0 ? e.hardware_flops.value() / (t * gpus * peak_flops_s) : 0.0;

    for (int k = 0; k < 3; ++k) {
        e.comm_bytes_per_gpu.tp = max(e.comm_bytes_per_gpu.tp, w[k].tp_b);
        e.comm_bytes_per_gpu.cp = max(e.comm_bytes_per_gpu.cp, w[k].cp_b);
        e.comm_bytes_per_gpu.ep = max(e.comm_bytes_per_gpu.ep, w[k].ep_b);
        e.comm_bytes_per_gpu.ep_nvlink = max(e.comm_bytes_per_gpu.ep_nvlink, w[k].ep_nvlink_b);
        e.comm_bytes_per_gpu.ep_nic = max(e.comm_bytes_per_gpu.ep_nic, w[k].ep_nic_b);
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
    e.risk_mask = detect_risks(model, cluster, job, launched(x), x.links, e);
}

}  // namespace

Estimate
estimate(const ModelSpec& model, const ClusterSpec& cluster, const JobSpec& job, const Plan& plan) {
    const PlanLinks links = plan_links(cluster, plan);
    const LayerParts parts = layer_parts(model, cluster, job, plan, links);
    const LayerParts whole = mixed_recompute(plan)
                                 ? layer_parts(model, cluster, job, without_recompute(plan), links)
                                 : LayerParts{};
    const Plan view = stage_view(plan);
    const Context x{model,
                    cluster,
                    job,
                    view,
                    links,
                    parts,
                    parts,
                    num_microbatches(plan, job),
                    mixed_recompute(plan) ? &whole : nullptr,
                    view.pp != plan.pp ? &plan : nullptr};
    Estimate e;
    assemble(x, stage_memories(x), model_flops(model, job), e);
    return e;
}

Estimator::Estimator(const ModelSpec& model, const ClusterSpec& cluster, const JobSpec& job)
    : model_(model)
    , cluster_(cluster)
    , job_(job)
    , model_flops_(model_flops(model, job)) {}

std::size_t Estimator::KeyHash::operator()(const Key& k) const noexcept {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (const int64_t v : {k.tp, k.cp, k.ep, k.etp, k.mbs}) {
        h ^= static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    }
    return static_cast<std::size_t>(h);
}

Estimator::Entry& Estimator::entry(const Plan& plan) {
    // The planner varies recompute and sp innermost, under one (tp, cp, ep, etp, mbs): one map
    // lookup when those change, an array index for the rest.
    const Key key{plan.tp, plan.cp, plan.ep, plan.etp, plan.mbs};
    if (shapes_ == nullptr || !(key == group_)) {
        if (key.tp != group_.tp) {
            // The planner enumerates tp outermost, so no shape of another tp is asked for again:
            // the cache keeps one tp's shapes, and their memory is reused rather than grown (a
            // shape asked for again is worked out again, to the same values).
            cache_.clear();
            entries_.reset();
            timed_.reset();
            cached_ = 0;
        }
        group_ = key;
        shapes_ = &cache_[key];
    }
    const int64_t base = (plan.sp ? 1 : 0) | (static_cast<int64_t>(plan.recompute) << 1);
    Entry** slot = &shapes_->plain[static_cast<std::size_t>(base)];
    if (plan.recompute_modules != 0) {
        const int64_t flags = base | (static_cast<int64_t>(plan.recompute_modules) << 3);
        auto& listed = shapes_->listed;
        const auto it = std::find_if(listed.begin(), listed.end(),
                                     [flags](const auto& l) { return l.first == flags; });
        slot = it != listed.end() ? &it->second : &listed.emplace_back(flags, nullptr).second;
    }
    if (*slot == nullptr) {
        Entry* e = entries_.take();
        e->memory = layer_memory_parts(model_, cluster_.gpu, job_, plan);
        e->timed = nullptr;
        *slot = e;
        ++cached_;
    }
    return **slot;
}

const LayerParts& Estimator::timed(Entry& e, const Plan& plan) {
    if (e.timed == nullptr) {
        e.timed = timed_.take();
        *e.timed = LayerParts{};
        static_cast<LayerMemoryParts&>(*e.timed) = e.memory;
        add_layer_costs(*e.timed, model_, cluster_, job_, plan, plan_links(cluster_, plan));
    }
    return *e.timed;
}

const LayerParts* Estimator::whole_layers(const Plan& plan) {
    if (!mixed_recompute(plan)) {
        return nullptr;
    }
    const Plan whole = without_recompute(plan);
    return &timed(entry(whole), whole);
}

const PlanLinks& Estimator::links(const Plan& plan) {
    // Every Plan field plan_links() reads (collectives.cpp): the group sizes, etp through
    // expert_tp(), and whether ZeRO-3 moves DP traffic onto one NIC per GPU.
    const std::array<int64_t, 7> key{
        plan.tp, plan.cp, plan.ep, expert_tp(plan), plan.dp, plan.pp, plan.zero >= 3 ? 1 : 0};
    if (key != links_key_) {
        links_ = plan_links(cluster_, plan);
        links_key_ = key;
    }
    return links_;
}

Estimate Estimator::operator()(const Plan& plan) {
    const PlanLinks& links = this->links(plan);
    const LayerParts& lp = timed(entry(plan), plan);
    const LayerParts* whole = whole_layers(plan);
    std::optional<Plan> v;  // DualPipeV's stage view; every other plan as it is
    const Plan& view = plan.schedule == Schedule::dualpipev ? v.emplace(stage_view(plan)) : plan;
    const Context x{model_, cluster_, job_, view, links, lp, lp, num_microbatches(plan, job_), whole,
                    v ? &plan : nullptr, &stage_memo_};
    Estimate e;
    assemble(x, stage_memories(x), model_flops_, e);
    return e;
}

std::optional<Estimate> Estimator::if_fits(const Plan& plan, MemoryCheck& check, Bytes stop_above) {
    std::optional<Estimate> e(std::in_place);
    if (!if_fits(plan, check, stop_above, *e)) {
        e.reset();
    }
    return e;
}

bool Estimator::if_fits(const Plan& plan, MemoryCheck& check, Bytes stop_above, Estimate& out) {
    if (plan.schedule == Schedule::dualpipev) {
        const Plan view = stage_view(plan);
        return fits_as(plan, view, &plan, check, stop_above, out);
    }
    return fits_as(plan, plan, nullptr, check, stop_above, out);
}

bool Estimator::fits_as(const Plan& plan,
                        const Plan& view,
                        const Plan* ranks,
                        MemoryCheck& check,
                        Bytes stop_above,
                        Estimate& out) {
    // Memory reads no link and no cost: the links and the layers' costs are worked out only for
    // a plan that fits.
    static const PlanLinks no_links{};
    static const LayerParts no_costs{};
    Entry& shape = entry(plan);
    const int64_t micro = num_microbatches(plan, job_);
    const Bytes usable = usable_memory(cluster_.gpu);
    StageMemories sm;
    check.complete = stage_memories(
        Context{model_, cluster_, job_, view, no_links, shape.memory, no_costs, micro, nullptr, ranks,
                &stage_memo_},
        sm,
        max(usable, stop_above));
    check.peak = sm.mem[sm.peak].total;
    check.stage = sm.idx[sm.peak];
    check.usable = usable;
    // The rule that sets Estimate::fits.
    check.fits = check.complete && check.peak + job_.memory_headroom <= usable;
    check.fits_without_headroom = check.complete && check.peak <= usable;
    if (!check.fits) {
        return false;
    }
    const PlanLinks& links = this->links(plan);
    const LayerParts& lp = timed(shape, plan);
    const LayerParts* whole = whole_layers(plan);
    // A default Estimate for assemble(), made in place (`out = Estimate{}` zeroes a temporary
    // and copies it: two passes over ~1 KB per plan that fits).
    std::destroy_at(&out);
    std::construct_at(&out);
    assemble(Context{model_, cluster_, job_, view, links, lp, lp, micro, whole, ranks, &stage_memo_},
             sm,
             model_flops_,
             out);
    return true;
}

}  // namespace cleave
