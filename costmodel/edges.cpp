// What a stage holds beside its transformer layers (costmodel/compute.hpp): the embedding, the
// output layer and loss, DeepSeek's MTP projection, the optimizer step, Muon's Newton-Schulz, and
// the per-step weight casts of quantised training.
#include "costmodel/compute.hpp"
#include "costmodel/compute_internal.hpp"
#include "costmodel/loss.hpp"
#include "costmodel/memory.hpp"
#include "costmodel/num.hpp"
#include "costmodel/precision.hpp"

#include <algorithm>
#include <cmath>

namespace cleave {

namespace {

using detail::collective;
using detail::core_dtype;
using detail::d;
using detail::linear_passes;

}  // namespace

EdgeCost embedding_cost(const ModelSpec& m,
                        const ClusterSpec& c,
                        const JobSpec& job,
                        const Plan& p,
                        const PlanLinks& links) {
    const double ab = activation_bytes(job);
    const double th = tokens_per_gpu(job, p) * d(m.hidden);
    const double pos = m.positions == PositionKind::learned ? 2.0 : 0.0;
    EdgeCost e;
    // Row gather (read + write), learned positions (read + add), embedding dropout.
    const KernelClass rows = KernelClass::elementwise;
    e.fwd = memory_time(c.gpu, rows, bytes((2.0 + pos) * ab * th + (3.0 * ab + 1.0) * th));
    // Scatter-add of dy into the fp32 weight gradient.
    e.bwd = memory_time(c.gpu, rows, bytes((ab + 8.0) * th));
    if (p.tp > 1) {
        // Vocab-parallel embedding: all-reduce (SP: reduce-scatter) of T x h (Megatron).
        const Bytes s = bytes(th * ab);
        const Collective k = p.sp ? Collective::reduce_scatter : Collective::all_reduce;
        e.comm_fwd = collective_time(k, s, p.tp, links.tp);
        e.tp_bytes = collective_bytes_sent(k, s, p.tp);
        if (p.sp) {
            e.comm_bwd = collective_time(Collective::all_gather, s, p.tp, links.tp);
            e.tp_bytes += collective_bytes_sent(Collective::all_gather, s, p.tp);
        }
    }
    return e;
}

EdgeCost
mtp_projection_cost(const ModelSpec& m, const ClusterSpec& c, const JobSpec& job, const Plan& p) {
    const double ab = activation_bytes(job);
    const double tok = tokens_per_gpu(job, p);
    const double h = d(m.hidden);
    const GemmShape proj{tok, h / d(p.tp), 2.0 * h, 1.0};
    const PassTimes gemm = linear_passes(c.gpu, job.compute, proj);
    // Three norms over T x h: read + write forward, read x and dy + write dx backward.
    const double norm = (p.sp ? 1.0 / d(p.tp) : 1.0) * tok * h;
    KernelBytes fwd;
    fwd.norm = bytes(3.0 * 2.0 * ab * norm);
    KernelBytes bwd;
    bwd.norm = bytes(3.0 * 3.0 * ab * norm);
    EdgeCost e;
    e.fwd = gemm.fwd +
            memory_time(c.gpu, norm_timed(fwd, norm_kernel_factor(job.stack, m.norm, h, false)));
    e.bwd = gemm.bwd +
            memory_time(c.gpu, norm_timed(bwd, norm_kernel_factor(job.stack, m.norm, h, true)));
    e.gemm = gemm.fwd + gemm.bwd;
    return e;
}

EdgeCost output_cost(const ModelSpec& m,
                     const ClusterSpec& c,
                     const JobSpec& job,
                     const Plan& p,
                     const PlanLinks& links) {
    const double ab = activation_bytes(job);
    const double tok = tokens_per_gpu(job, p);
    const double th = tok * d(m.hidden);
    const double logits = tok * d(m.vocab) / d(p.tp);
    const GemmShape head{tok, d(m.vocab) / d(p.tp), d(m.hidden), 1.0};
    const Seconds gemm = gemm_time(c.gpu, core_dtype(job.compute), head);  // 16-bit head
    EdgeCost e;
    // Final norm; logits GEMM; the cross-entropy's traffic as the stack computes it
    // (costmodel/loss.hpp; Megatron's: fp32 cast, max, exp-sum and the stored softmax).
    const double norm = (p.sp ? 1.0 / d(p.tp) : 1.0) * th;
    const LossTraffic xent = loss_bytes_per_logit(job.stack.loss, ab);
    KernelBytes fwd;
    fwd.norm = bytes(2.0 * ab * norm);
    fwd.cross_entropy = bytes(xent.fwd * logits);
    KernelBytes bwd;
    bwd.norm = bytes(3.0 * ab * norm);
    bwd.cross_entropy = bytes(xent.bwd * logits);
    const double h = d(m.hidden);  // the final norm at its kernel's rate for h
    e.fwd =
        gemm + memory_time(c.gpu, norm_timed(fwd, norm_kernel_factor(job.stack, m.norm, h, false)));
    // A frozen output layer (job.peft) computes the data gradient only.
    const double bwd_gemms = job.peft != Peft::none ? 1.0 : 2.0;
    e.bwd = bwd_gemms * gemm +
            memory_time(c.gpu, norm_timed(bwd, norm_kernel_factor(job.stack, m.norm, h, true)));
    e.gemm = (1.0 + bwd_gemms) * gemm;
    if (p.tp > 1) {
        const Bytes s = bytes(th * ab);
        const Bytes small = bytes(tok * 4.0);
        // Three fp32 all-reduces of T values (max, sum-exp, target logit).
        e.comm_fwd = 3.0 * collective_time(Collective::all_reduce, small, p.tp, links.tp);
        e.tp_bytes = 3.0 * collective_bytes_sent(Collective::all_reduce, small, p.tp);
        const Collective in_fwd = p.sp ? Collective::all_gather : Collective::all_reduce;
        const Collective in_bwd = p.sp ? Collective::reduce_scatter : Collective::all_reduce;
        if (p.sp) {
            e.comm_fwd += collective_time(in_fwd, s, p.tp, links.tp);
            e.tp_bytes += collective_bytes_sent(in_fwd, s, p.tp);
        }
        e.comm_bwd = collective_time(in_bwd, s, p.tp, links.tp);
        e.tp_bytes += collective_bytes_sent(in_bwd, s, p.tp);
    }
    return e;
}

Seconds optimizer_time(const GpuSpec& gpu, const JobSpec& job, double params) {
    const double w = bytes_of(job.weights);
    const double g = bytes_of(job.grads);
    const double mb = bytes_of(job.master_dtype);
    const bool master = job.master_weights && w < mb;
    // master read + write and the model copy written, or the weights read + written in place
    const double weights = master ? 2.0 * mb + w : 2.0 * w;
    // each moment read and written
    const double moments = 2.0 * (optimizer_state_bytes(job) - (master ? mb : 0.0));
    return memory_time(gpu, KernelClass::optimizer, bytes(params * (weights + 2.0 * g + moments)));
}

double newton_schulz_step_flops(double rows, double cols) {
    const double m = std::min(rows, cols);
    const double n = std::max(rows, cols);
    return 4.0 * m * m * n + 2.0 * m * m * m;
}

namespace {

// One Newton-Schulz run (`steps` quintic steps) on an r x c matrix, at the bf16 GEMM curve.
Seconds newton_schulz_time(const GpuSpec& gpu, double rows, double cols, int64_t steps) {
    const double m = std::min(rows, cols);
    const double n = std::max(rows, cols);
    const Seconds one = gemm_time(gpu, Dtype::bf16, GemmShape{m, m, n, 1.0}) +
                        gemm_time(gpu, Dtype::bf16, GemmShape{m, m, m, 1.0}) +
                        gemm_time(gpu, Dtype::bf16, GemmShape{m, n, m, 1.0});
    return one * d(steps);
}

}  // namespace

MuonCost muon_layer_cost(const ModelSpec& m,
                         const GpuSpec& gpu,
                         const JobSpec& job,
                         const Plan& p,
                         const PlanLinks& links,
                         bool moe,
                         LayerShape shape,
                         bool mamba,
                         bool gdn) {
    MuonCost mc;
    if (job.optimizer != Optimizer::muon) {
        return mc;
    }
    const double t = d(p.tp);
    const double gb = bytes_of(job.grads);
    const bool blockwise = job.muon_tp_mode == MuonTpMode::blockwise;
    const double split = job.muon_tp_mode == MuonTpMode::distributed ? t : 1.0;
    // A matrix of rows x cols, TP-sharded over `ranks` along one side (1: replicated).
    const auto add = [&](Seconds& ns, Seconds& gather, double rows, double cols, double count,
                         double ranks, const GroupLink& link) {
        if (ranks <= 1.0) {
            ns += newton_schulz_time(gpu, rows, cols, job.muon_ns_steps) * count;
            return;
        }
        if (blockwise) {  // each shard alone: the sharded side / ranks
            ns += newton_schulz_time(gpu, rows / ranks, cols, job.muon_ns_steps) * count;
            return;
        }
        ns += newton_schulz_time(gpu, rows, cols, job.muon_ns_steps) * (count / split);
        gather += collective(Collective::all_gather, bytes(rows * cols * gb / ranks),
                             static_cast<int64_t>(ranks), link) *
                  count;
    };
    const double h = d(m.hidden);
    const double gate = m.mlp == MlpKind::swiglu ? 2.0 : 1.0;
    if (mamba) {
        add(mc.dense, mc.dense_gather, h, d(m.mamba.d_inner()), 1.0, t, links.tp);
        return mc;
    }
    if (gdn) {  // gdn.py leaves both projections to Muon (no use_muon = False, unlike Mamba's)
        add(mc.dense, mc.dense_gather, d(m.gdn.in_proj_dim()), h, 1.0, t, links.tp);
        add(mc.dense, mc.dense_gather, h, d(m.gdn.v_dim()), 1.0, t, links.tp);
        return mc;
    }
    if (shape != LayerShape::ffn) {
        if (m.mla.enabled()) {
            const MlaSpec& a = m.mla;
            const double q_out = d(m.heads) * d(a.qk_nope_dim + a.qk_rope_dim);
            if (a.q_lora_rank > 0) {
                add(mc.dense, mc.dense_gather, d(a.q_lora_rank), h, 1.0, 1.0, links.tp);
                add(mc.dense, mc.dense_gather, q_out, d(a.q_lora_rank), 1.0, t, links.tp);
            } else {
                add(mc.dense, mc.dense_gather, q_out, h, 1.0, t, links.tp);
            }
            add(mc.dense, mc.dense_gather, d(a.kv_lora_rank + a.qk_rope_dim), h, 1.0, 1.0, links.tp);
            add(mc.dense, mc.dense_gather, d(m.heads) * d(a.qk_nope_dim + a.v_dim),
                d(a.kv_lora_rank), 1.0, t, links.tp);
            add(mc.dense, mc.dense_gather, h, d(m.heads) * d(a.v_dim), 1.0, t, links.tp);
        } else {
            const double hd = d(head_dim(m));
            const double q_rows = (m.attn_output_gate ? 2.0 : 1.0) * d(m.heads) * hd;  // + gate
            add(mc.dense, mc.dense_gather, q_rows, h, 1.0, t, links.tp);                 // q
            add(mc.dense, mc.dense_gather, d(m.kv_heads) * hd, h, 2.0, t, links.tp);      // k, v
            add(mc.dense, mc.dense_gather, h, d(m.heads) * d(v_head_dim(m)), 1.0, t, links.tp);  // o
        }
    }
    if (shape == LayerShape::attention) {
        return mc;
    }
    if (moe) {
        add(mc.dense, mc.dense_gather, d(m.moe.experts), h, 1.0, 1.0, links.tp);  // router
        if (m.moe.shared_ffn_hidden > 0) {
            const double fs = d(m.moe.shared_ffn_hidden);
            add(mc.dense, mc.dense_gather, gate * fs, h, 1.0, t, links.tp);
            add(mc.dense, mc.dense_gather, h, fs, 1.0, t, links.tp);
        }
        if (m.moe.latent > 0) {  // LatentMoE's projections, whole on every TP rank
            const double l = d(m.moe.latent);
            add(mc.dense, mc.dense_gather, l, h, 1.0, 1.0, links.tp);
            add(mc.dense, mc.dense_gather, h, l, 1.0, 1.0, links.tp);
        }
        const double fe = d(m.moe.expert_ffn_hidden);
        const double w = d(moe_token_width(m));
        const double local = d(m.moe.experts) / d(std::max<int64_t>(1, p.ep));
        const double etp = d(expert_tp(p));
        add(mc.expert, mc.expert_gather, gate * fe, w, local, etp, links.etp);
        add(mc.expert, mc.expert_gather, w, fe, local, etp, links.etp);
        return mc;
    }
    const double f = d(m.ffn_hidden);
    add(mc.dense, mc.dense_gather, gate * f, h, 1.0, t, links.tp);
    add(mc.dense, mc.dense_gather, h, f, 1.0, t, links.tp);
    return mc;
}

Seconds weight_quantise_time(const GpuSpec& gpu, const JobSpec& job, double params) {
    return quantize_time(gpu, job, weight_quantise_bytes(gpu, job, params));
}

}  // namespace cleave
