// A pipeline stage's memory (stage_memory.hpp): model states as each stack keeps them,
// activations by recompute shape and schedule, DualPipe's ranks. Derivations: docs/costmodel.md.
#include "costmodel/stage_memory.hpp"

#include "costmodel/memory.hpp"
#include "costmodel/peft.hpp"
#include "costmodel/precision.hpp"

#include <limits>

namespace cleave::estimate_detail {

/// A hybrid model's stage: its layers counted by kind into sp.kinds, and their parameters
/// (without the experts, which stage_params adds). Kept out of line: transformers never run it.
[[gnu::noinline]] double hybrid_stage_kinds(const Context& x, int64_t s, StageParams& sp) {
    const ModelSpec& m = x.m;
    const int64_t chunks = x.p.schedule == Schedule::interleaved ? x.p.vpp : 1;
    for (int64_t ch = 0; ch < chunks; ++ch) {
        const int64_t first = chunk_first_layer(m.layers, x.p, s, ch);
        const int64_t last = first + chunk_layers(m.layers, x.p, s, ch);
        for (const LayerKind k : all_kinds) {
            sp.kinds[kind_index(k)] += kind_count(m, k, first, last);
        }
    }
    double all = 0.0;
    for (const LayerKind k : all_kinds) {
        all += d(sp.kinds[kind_index(k)]) * x.mem.hybrid->params_kind[kind_index(k)];
    }
    return all;
}

namespace {

/// FSDP2's states as torchtitan allocates them (torch/distributed/fsdp/_fully_shard, torchtitan
/// distributed/parallelize fsdp @9dec370, MixedPrecisionPolicy(param bf16, reduce fp32)): the
/// sharded parameter is the fp32 master (optimizer term), its sharded grad fp32, so no 16-bit
/// shard is kept; the unsharded 16-bit parameters live only while used. Without PP: the root
/// module (embedding, final norm, output) is not resharded after forward (fully_shard
/// reshard_after_forward=None: False for the root), so its 16-bit weights stay through backward,
/// plus two blocks (the one running and the one prefetched, zero3_gather_bytes). With PP
/// torchtitan sets reshard_after_forward False for every block (fsdp.py: "default" -> not
/// pp_enabled) and the schedule syncs gradients on the last micro-batch only, so the stage's
/// 16-bit parameters stay unsharded and its unsharded grads accumulate in the fp32 reduce dtype
/// (_fsdp_param.py to_accumulated_grad_if_needed). torchao's dynamic float8 recasts each
/// weight per use: no cached fp8 copy.
[[gnu::always_inline]] inline void
fsdp2_states(const Context& x, int64_t s, const StageParams& sp, MemoryBreakdown& mem) {
    const Plan& p = x.p;
    const double n = d(std::max<int64_t>(1, p.dp * p.cp));
    const double local = sp.dense + sp.expert;  // this stage's parameters after TP / EP
    const double w = bytes_of(x.job.weights);
    mem.weights -= bytes(sp.dense * w / n);  // no 16-bit shard: the fp32 master is the shard
    if (sp.expert > 0.0) {
        mem.weights -= bytes(sp.expert * w / d(std::max<int64_t>(1, expert_dp(p))));
    }
    if (p.pp > 1) {
        // The converted Linears stay unsharded as the float8 all-gather's output (float8.hpp).
        const double f8 = float8_stage_linear(x, sp) * (w - float8_gather_bytes_per_param(x.job));
        mem.weights += bytes(local * w - f8);
        mem.grads += bytes(local * 4.0);
        return;
    }
    const LayerMemoryParts& lp = x.mem;
    const double root =
        (s == 0 ? lp.params_embedding : 0.0) + (s == p.pp - 1 ? lp.params_head : 0.0);
    mem.weights += bytes(root / d(p.tp) * w);
}

/// A hybrid stage's activations per micro-batch, each kind's layers kept as the recompute shape
/// says, and (remat) the largest layer backward rematerialises. Out of line, as above.
[[gnu::noinline]] Bytes hybrid_activations(const LayerMemoryParts& parts,
                                           const StageParams& sp,
                                           const RecomputeShape& rs,
                                           Bytes& remat) {
    const HybridParts& lp = *parts.hybrid;
    Bytes per_mb;
    for (const LayerKind k : all_kinds) {
        const std::size_t i = kind_index(k);
        if (sp.kinds[i] > 0) {
            per_mb += (lp.act_kind[i] * (rs.recomputed * rs.kept_inputs) +
                       lp.act_kind_none[i] * (1.0 - rs.recomputed)) *
                      d(sp.kinds[i]);
            remat = std::max(remat, lp.act_kind_none[i] * rs.live - lp.act_kind[i]);
        }
    }
    return per_mb;
}

/// The sums of a stage's memory: allocated, the allocator's reserve, what lies outside it and
/// what must fit.
[[gnu::always_inline]] inline void finish_memory(const Context& x, MemoryBreakdown& mem) {
    mem.allocated =
        mem.weights + mem.grads + mem.optimizer + mem.activations + mem.logits + mem.comm_buffers;
    mem.allocator = mem.allocated * x.job.stack.allocator_overhead;
    mem.reserved = x.c.gpu.reserved_memory;
    // What must fit is not the reserve a run with memory to spare keeps (max_memory_reserved):
    // before it reports OOM the allocator frees its cached segments that hold no tensor
    // (SoftwareStack::oom_residue) or, under expandable segments, unmaps every free page
    // (SoftwareStack::expandable_residue). The allocated peak plus what it cannot give back.
    const SoftwareStack& st = x.job.stack;
    mem.total = mem.allocated +
                std::min(mem.allocator,
                         mem.allocated *
                             (st.expandable_segments ? st.expandable_residue : st.oom_residue)) +
                mem.reserved;
}

/// Fills `mem`, a default MemoryBreakdown, with stage s's memory (in place: the planner's memory
/// check runs it for every candidate).
template <bool Hybrid>
[[gnu::always_inline]] inline void
fill_stage_memory(const Context& x, int64_t s, const StageParams& sp, MemoryBreakdown& mem) {
    const Plan& p = x.p;
    const LayerMemoryParts& lp = x.mem;
    const int64_t dp_shard = p.dp * p.cp;
    const StateBytes dn = x.job.peft == Peft::none
                              ? model_states(lp.state_bytes, sp.dense, p.zero, dp_shard)
                              : lora_model_states(x.job, sp.dense, sp.adapters, p.zero, dp_shard);
    mem.weights = dn.weights;
    mem.grads = dn.grads;
    mem.optimizer = dn.optimizer;
    if (sp.expert > 0.0) {
        const StateBytes ex =
            model_states(lp.state_bytes, sp.expert, p.zero, std::max<int64_t>(1, expert_dp(p)));
        mem.weights += ex.weights;
        mem.grads += ex.grads;
        mem.optimizer += ex.optimizer;
    }
    const int64_t layers = sp.layers;
    const double n_moe = d(sp.moe_layers);
    const double n_dense = d(layers) - n_moe;
    if (x.job.optimizer == Optimizer::muon) {
        // Muon leaves the embedding and output layer to Adam (--muon-scalar-optimizer adam).
        const double scalar =
            ((s == 0 ? lp.params_embedding : 0.0) +
             (s == p.pp - 1 ? lp.params_head + (p.pp > 1 ? lp.params_tied_copy : 0.0) : 0.0)) /
            d(p.tp);
        mem.optimizer +=
            bytes(scalar * (scalar_optimizer_state_bytes(x.job) - optimizer_state_bytes(x.job)) /
                  (p.zero >= 1 ? d(std::max<int64_t>(1, dp_shard)) : 1.0));
    }
    const RecomputeShape rs = recompute_shape(p, layers);
    // Checkpointed layers keep their input (one per uniform group), the others everything.
    const auto kept = [&rs](Bytes ckpt, Bytes whole) {
        return ckpt * (rs.recomputed * rs.kept_inputs) + whole * (1.0 - rs.recomputed);
    };
    // The last stage also keeps each MTP module's block activations (+ its projection input,
    // 2 h per token, within the layer's share here) for every micro-batch in flight.
    const double n_mtp = s == p.pp - 1 ? d(lp.mtp_layers) : 0.0;
    Bytes remat;  // a hybrid stage's largest rematerialised layer (below)
    const Bytes per_mb = Hybrid ? hybrid_activations(lp, sp, rs, remat) +
                                      (s == 0 ? lp.act_embedding : Bytes{}) +
                                      (lp.mtp_moe ? kept(lp.act_moe, lp.act_moe_none)
                                                  : kept(lp.act_dense, lp.act_dense_none)) *
                                          n_mtp
                                : kept(lp.act_dense, lp.act_dense_none) * n_dense +
                                      kept(lp.act_moe, lp.act_moe_none) * n_moe +
                                      (lp.mtp_moe ? kept(lp.act_moe, lp.act_moe_none)
                                                  : kept(lp.act_dense, lp.act_dense_none)) *
                                          n_mtp +
                                      (s == 0 ? lp.act_embedding : Bytes{});
    mem.activations = per_mb * sp.inflight;
    if (const int64_t off = offloaded_layers(p, layers); off > 0) {
        // The offloaded layers' saved activations live on the host; one layer of one
        // micro-batch stays on the GPU as the copy in flight (TE's offload double buffer).
        const Bytes per_layer = (per_mb - (s == 0 ? lp.act_embedding : Bytes{})) / d(layers);
        mem.activations -= per_layer * d(off) * sp.inflight;
        mem.activations += per_layer;
    }
    if (p.recompute != Recompute::none && rs.recomputed > 0.0) {
        // Backward rematerialises `live` layers' full activations at a time (one for selective
        // and uniform 1; a uniform group of N holds N).
        mem.activations += Hybrid              ? remat
                           : sp.moe_layers > 0 ? lp.act_moe_none * rs.live - lp.act_moe
                                               : lp.act_dense_none * rs.live - lp.act_dense;
    }
    if (s == p.pp - 1) {
        mem.logits = lp.logits * (1.0 + n_mtp) +  // each MTP module's logits and loss too
                     pipeline_kept_outputs_bytes(x.m, x.job, p, x.micro);  // torch pipelining
    }
    const double abth = lp.layer_io_bytes;  // activation bytes x tokens x hidden
    if (p.pp > 1) {
        mem.comm_buffers += bytes(4.0 * abth / d(p.tp));  // send + recv, fwd + bwd
    }
    if (p.sp) {
        mem.comm_buffers += bytes(abth);  // all-gathered layer input
    }
    mem.comm_buffers += zero3_gather_bytes(x.m, x.job, p);  // 0 below ZeRO 3
    if (fsdp2(x.job, p)) {
        fsdp2_states(x, s, sp, mem);
    } else {
        // Quantised weight copies kept over a step (costmodel/precision.hpp), sharded like
        // weights; none under LoRA (layer_memory_parts).
        mem.weights += bytes(lp.weight_copy_bytes * (sp.dense + sp.expert) /
                             (p.zero >= 3 ? d(dp_shard) : 1.0));
    }
    finish_memory(x, mem);
}

template <bool Hybrid>
[[gnu::always_inline]] inline MemoryBreakdown
stage_memory(const Context& x, int64_t s, const StageParams& sp) {
    MemoryBreakdown mem;
    fill_stage_memory<Hybrid>(x, s, sp, mem);
    return mem;
}

void fold_dualpipe(const Context& x, StageMemories& sm);

/// The context's memo of stage_params(), emptied unless it holds the context's plan; null when
/// the context has none. Keyed by every Plan field stage_params() reads and the micro-batches;
/// the parameter counts it reads from x.mem are the model's, the same in every LayerMemoryParts.
StageParamsMemo* stage_params_memo(const Context& x) {
    StageParamsMemo* memo = x.memo;
    if (memo == nullptr) {
        return nullptr;
    }
    const Plan& p = x.p;
    const StageParamsMemo::Key key{p.pp,
                                   p.vpp,
                                   static_cast<int64_t>(p.schedule),
                                   p.first_layers,
                                   p.last_layers,
                                   x.micro,
                                   p.tp,
                                   p.ep,
                                   expert_tp(p)};
    if (!(key == memo->key)) {
        memo->key = key;
        memo->have = {};
    }
    return memo;
}

/// Sets `out` to stage_params() of stage s = sm.idx[k], through `memo` (stage_params_memo) when
/// not null.
template <bool Hybrid>
[[gnu::always_inline]] inline void
known_stage_params(const Context& x, StageParamsMemo* memo, int k, int64_t s, StageParams& out) {
    if (memo == nullptr) {
        out = stage_params<Hybrid>(x, s);
        return;
    }
    const auto i = static_cast<std::size_t>(k);
    if (!memo->have[i]) {
        memo->sp[i] = stage_params<Hybrid>(x, s);
        memo->have[i] = true;
    }
    out = memo->sp[i];
}

/// A stage's activations under DualPipe, split into what grows with the micro-batches it holds
/// (per micro-batch) and what it holds once (the layer a recomputing backward rematerialises):
/// read off the stage priced holding one and two micro-batches (GPipe holds m).
struct StageActivations {
    Bytes per_mb;
    Bytes once;
};

StageActivations dualpipe_activations(const Context& x, int64_t s) {
    Plan q = x.p;
    q.schedule = Schedule::gpipe;
    const auto at = [&](int64_t micro) {
        const Context y{x.m, x.c, x.job, q, x.links, x.mem, x.parts, micro, x.whole};
        return is_hybrid(x.m) ? stage_memory<true>(y, s, stage_params<true>(y, s)).activations
                              : stage_memory<false>(y, s, stage_params<false>(y, s)).activations;
    };
    const Bytes one = at(1);
    const Bytes two = at(2);
    return {two - one, one - (two - one)};
}

/// DualPipe's ranks from its stages: rank r holds stage r and stage p-1-r ("Parameter Per
/// Device 2x") and p + 1 micro-batches of one stage's activations ("Activation Per Device PP+1",
/// deepseek-ai/DualPipe README @3da1bbe), here (p + 1) / 2 of each of its two stages' per
/// micro-batch, plus the larger layer one of them rematerialises. Each stage lives on two ranks
/// of every pipeline, so its gradients are reduced over 2 dp ranks and, with ZeRO >= 1, its
/// optimizer states are sharded over them: the rank keeps the mean of its stages' shards, not
/// the sum. Rank 1 of pp 16 (middle stages alike, a per micro-batch, s states): weights and
/// grads 2 s, optimizer s, activations 17 a + the remat layer.
void fold_dualpipe(const Context& x, StageMemories& sm) {
    const int64_t pp = x.p.pp;
    MemoryBreakdown folded[3];
    for (int k = 0; k < 3; ++k) {
        const int64_t partner = pp - 1 - sm.idx[k];
        MemoryBreakdown other;
        bool found = false;
        for (int j = 0; j < 3 && !found; ++j) {
            if (sm.idx[j] == partner) {
                other = sm.mem[j];
                found = true;
            }
        }
        if (!found) {
            other = is_hybrid(x.m)
                        ? stage_memory<true>(x, partner, stage_params<true>(x, partner))
                        : stage_memory<false>(x, partner, stage_params<false>(x, partner));
        }
        const MemoryBreakdown& a = sm.mem[k];
        const StageActivations aa = dualpipe_activations(x, sm.idx[k]);
        const StageActivations ab = dualpipe_activations(x, partner);
        MemoryBreakdown& m = folded[k];
        m.weights = a.weights + other.weights;
        m.grads = a.grads + other.grads;
        // DualPipeV keeps one copy of each stage: its states are the two stages' own.
        const bool copies = x.p.schedule == Schedule::dualpipe;
        m.optimizer = (a.optimizer + other.optimizer) * (copies && x.p.zero >= 1 ? 0.5 : 1.0);
        m.activations = (aa.per_mb + ab.per_mb) * (d(pp + 1) / 2.0) + max(aa.once, ab.once);
        m.logits = a.logits + other.logits;
        m.comm_buffers = a.comm_buffers + other.comm_buffers;
        finish_memory(x, m);
    }
    if (x.p.schedule == Schedule::dualpipev) {
        // The last rank (pp-1) holds stages pp-1 and pp, two middle stages: like rank 1. Stage
        // 2pp-1 (idx 2) stays in idx for the time: it is rank 0's second stage.
        folded[2] = folded[1];
    }
    sm.peak = 0;
    for (int k = 0; k < 3; ++k) {
        sm.mem[k] = folded[k];
        if (sm.mem[k].total > sm.mem[sm.peak].total) {
            sm.peak = k;
        }
    }
}

}  // namespace

/// Fills `sm`, a default StageMemories. Stops early (returning false) once one stage alone needs
/// more than `stop_above`; the stages after it are then left unpriced. Under DualPipe the stages
/// are then folded into ranks (fold_dualpipe); a stage alone is a lower bound of its rank, so
/// stopping early stays right.
bool stage_memories(const Context& x, StageMemories& sm, Bytes stop_above) {
    const int64_t pp = x.p.pp;
    sm.idx[1] = std::min<int64_t>(1, pp - 1);
    sm.idx[2] = pp - 1;
    StageParamsMemo* memo = stage_params_memo(x);
    for (int k = 0; k < 3; ++k) {
        if (k > 0 && sm.idx[k] == sm.idx[k - 1]) {
            sm.sp[k] = sm.sp[k - 1];
            sm.mem[k] = sm.mem[k - 1];
        } else {
            if (is_hybrid(x.m)) {
                known_stage_params<true>(x, memo, k, sm.idx[k], sm.sp[k]);
                fill_stage_memory<true>(x, sm.idx[k], sm.sp[k], sm.mem[k]);
            } else {
                known_stage_params<false>(x, memo, k, sm.idx[k], sm.sp[k]);
                fill_stage_memory<false>(x, sm.idx[k], sm.sp[k], sm.mem[k]);
            }
        }
        if (k == 1 && pp > 3 && is_hybrid(x.m)) {
            // A hybrid model's middle stages hold different layer kinds: the middle stage shown
            // is the one with the most memory (every one is priced).
            for (int64_t s = 2; s < pp - 1; ++s) {
                const StageParams sp = stage_params<true>(x, s);
                const MemoryBreakdown mem = stage_memory<true>(x, s, sp);
                if (mem.total > sm.mem[1].total) {
                    sm.idx[1] = s;
                    sm.sp[1] = sp;
                    sm.mem[1] = mem;
                }
            }
        }
        if (sm.mem[k].total > sm.mem[sm.peak].total) {
            sm.peak = k;
        }
        if (sm.mem[k].total > stop_above) {
            return false;
        }
    }
    if (bidirectional(x.p.schedule)) {
        fold_dualpipe(x, sm);
    }
    return true;
}

StageMemories stage_memories(const Context& x) {
    StageMemories sm;
    stage_memories(x, sm, bytes(std::numeric_limits<double>::infinity()));
    return sm;
}

MemoryBreakdown hybrid_stage_memory(const Context& x, int64_t s, const StageParams& sp) {
    return stage_memory<true>(x, s, sp);
}

}  // namespace cleave::estimate_detail
