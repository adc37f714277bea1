#include "costmodel/compute.hpp"
#include "costmodel/compute_internal.hpp"
#include "costmodel/eager.hpp"
#include "costmodel/launches.hpp"
#include "costmodel/loss.hpp"
#include "costmodel/peft.hpp"
#include "costmodel/num.hpp"

#include "core/errors.hpp"
#include "costmodel/attention.hpp"
#include "costmodel/float8.hpp"
#include "costmodel/memory.hpp"
#include "costmodel/overlap.hpp"
#include "costmodel/precision.hpp"

#include <algorithm>
#include <cmath>

namespace cleave {

namespace {

using detail::collective;
using detail::core_dtype;
using detail::d;
using detail::gemm_lookup_size;
using detail::linear_passes;
using detail::PassTimes;

}  // namespace

LayerTraffic layer_traffic(
    const ModelSpec& m, const JobSpec& job, const Plan& p, bool moe, LayerShape shape) {
    // A transformer layer has two blocks (attention, MLP), each with its norm and residual add;
    // a hybrid model's single-block layer one (the other block's terms are zero).
    const bool attn = shape != LayerShape::ffn;
    const bool ffn = shape != LayerShape::attention;
    const double nblocks = shape == LayerShape::full ? 2.0 : 1.0;
    const double ab = activation_bytes(job);
    const double moe_load = moe ? rank_load_ratio(m, job, p) : 1.0;
    const double t = d(p.tp);
    const double tok = tokens_per_gpu(job, p);
    const double h = d(m.hidden);
    const double e_ln = tok * h / (p.sp ? t : 1.0);  // norm / dropout region (split by SP)
    // The shared expert (a dense TP MLP beside the routed ones) runs its own activation.
    const double inner =
        !ffn  ? 0.0
        : moe ? tok * (d(m.moe.top_k) * d(m.moe.expert_ffn_hidden) + d(m.moe.shared_ffn_hidden)) / t
              : tok * d(m.ffn_hidden) / t;
    // Fused attention never writes the s x s scores (FA2 paper, Dao 2023, Sec. 3.1).
    const bool fused = job.stack.attention == AttentionImpl::fused;
    const double scores = fused || !attn ? 0.0
                                         : d(p.mbs) * d(m.heads) / t * (d(job.seq_len) / d(p.cp)) *
                                               d(job.seq_len);
    // Dropout masks (1 B per element) only where the recipe keeps hidden dropout.
    const double mask = job.stack.hidden_dropout ? 1.0 : 0.0;
    const bool swiglu = m.mlp == MlpKind::swiglu;
    const double hd = d(head_dim(m));
    // RoPE reads and writes the rotated parts of q and k. MLA rotates only the decoupled
    // qk_rope_dim columns, one per query head and one key part k^R shared by all heads
    // (DeepSeek-V2, arXiv:2405.04434, eq. 12-19), but Megatron-Core's fused MLA RoPE
    // (fusions/fused_mla_yarn_rope_apply.py, core 0.13) also assembles the key: the query's rope
    // part in place (read + write a r), and the key and value split out of the kv up-projection
    // with k^R rotated and concatenated to every head's key: read a (n + v) + r, write
    // a (n + r) + a v; its backward the reverse (the same bytes).
    double rope = 0.0;
    if (m.positions == PositionKind::rope && attn) {
        const MlaSpec& a = m.mla;
        const double heads = d(m.heads) / t;
        const double q_rope = 2.0 * heads * d(a.qk_rope_dim);
        const double kv_split = heads * d(2 * a.qk_nope_dim + 2 * a.v_dim + a.qk_rope_dim);
        rope = m.mla.enabled() ? ab * tok * (q_rope + kv_split + d(a.qk_rope_dim))
                               : 2.0 * ab * tok * (d(m.heads) + d(m.kv_heads)) * hd / t;
    }
    // MLA's latent norms (q_a_layernorm, kv_a_layernorm: DeepSeek-V2 arXiv:2405.04434 App. B;
    // Megatron-Core MLASelfAttention q_layernorm / kv_layernorm) on the down projections'
    // outputs, whole on every TP rank.
    const double latent_norm =
        m.mla.enabled() && attn ? tok * d(m.mla.q_lora_rank + m.mla.kv_lora_rank) : 0.0;
    // MoE permutation (Megatron-Core moe_utils.py permute / sort_chunks_by_idxs / unpermute,
    // @d98e8a64): permute reads T x h, writes k T x h; the chunk sort after the all-to-all and
    // the one before the combine each read + write k T x h; unpermute reads k T x h, writes
    // T x h: (6k + 2) T h elements for T = this GPU's SP shard of tokens, the busiest rank's
    // received copies at its load. Router: fp32 logits written, read by softmax + top-k, the
    // probabilities written: 3 x 4 B x T x experts.
    const double k = moe && ffn ? d(m.moe.top_k) : 0.0;
    const double shard = tok / (p.sp ? t : 1.0);
    // LatentMoE permutes latent-wide rows (the projection runs before dispatch_preprocess).
    const double w = d(moe_token_width(m));
    // DeepEP (the flex dispatcher, token_dispatcher.py MoEFlexTokenDispatcher) reads the tokens
    // in place and delivers each once per rank it reaches: the rank permutes its r received rows
    // to k expert rows (read r, write k) and unpermutes them back before the combine (read k,
    // write r), r = deepep_rank_copies: 2 (r + k) T h.
    const bool deepep = job.stack.moe_dispatcher == MoeDispatcher::deepep && p.ep > 1;
    const double routed = deepep ? 2.0 * (deepep_rank_copies(m, job, p) + k) * moe_load
                                 : 2.0 + 2.0 * k + 4.0 * k * moe_load;
    const double permute =
        moe && ffn ? ab * shard * w * routed + 12.0 * shard * d(m.moe.experts) : 0.0;
    LayerTraffic tr;
    tr.attn_core_fwd = bytes((2.0 * ab + 2.0 * ab + 1.0) * scores);
    // fwd: norms 2 x (read + write); bias-dropout-add 2 x (x, residual, out, mask);
    // activation (GeLU: in, out; SwiGLU: gate, up, out); softmax + dropout.
    KernelBytes& f = tr.fwd_by_class;
    // Sandwich norms (Gemma, ModelSpec::sandwich_norms): a second norm on each block's output
    // before the residual add, the same read + write (modeling_gemma3.py Gemma3DecoderLayer).
    const double norms = nblocks * (m.sandwich_norms ? 2.0 : 1.0);
    // GPT-OSS's clamped GLU in the experts (Megatron-LM @d98e8a64 fused_bias_geglu.py
    // weighted_bias_quick_geglu_impl, called from experts.py:974): the two halves of the 2 f
    // wide fc1 output are clamped (read f + write f each) and concatenated (read 2 f, write 2 f)
    // by unfused torch ops before the fused activation: 8 f more forward per routed copy;
    // backward, each clamp's gradient reads the gradient and the saved input and writes f
    // (6 f), and the chunk's gradient is concatenated back (read 2 f, write 2 f): 10 f.
    const double clamp = m.clamped_glu && moe && ffn ? ab * inner : 0.0;
    f.norm = bytes(norms * 2.0 * ab * e_ln + 2.0 * ab * latent_norm);
    // Each norm at its kernel's rate for its width (norm_kernel_factor): the pre-norms (and
    // sandwich norms) over h, MLA's latent norms over q_lora_rank and kv_lora_rank.
    const auto norm_factor = [&](bool bwd) {
        const double q = attn && m.mla.enabled() ? d(m.mla.q_lora_rank) : 0.0;
        const double kv = attn && m.mla.enabled() ? d(m.mla.kv_lora_rank) : 0.0;
        const double rows = norms * e_ln + tok * (q + kv);
        const auto fac = [&](double width) {
            return norm_kernel_factor(job.stack, m.norm, width, bwd);
        };
        const double x = norms * e_ln * fac(h) + tok * (q * fac(q) + kv * fac(kv));
        return rows > 0.0 ? x / rows : 1.0;
    };
    tr.norm_fwd_factor = norm_factor(false);
    tr.norm_bwd_factor = norm_factor(true);
    // Unfused adds of T x h (read two, write one, 3ab each): forward, the shared expert's output
    // added to the combine's (Megatron moe_layer.py postprocess); backward, a gradient sum per
    // extra module reading a block's normed input (autograd): MLA's q and kv down projections
    // (mla_down_proj_fusion off by default, gpt_layer_specs.py), an MoE layer's router, token
    // dispatcher, shared expert and its gate.
    const bool moe_block = moe && ffn;
    const double shared_add = moe_block && m.moe.shared_ffn_hidden > 0 ? 1.0 : 0.0;
    const double grad_sums = (attn && m.mla.enabled() ? 1.0 : 0.0) +
                             (moe_block ? 1.0 + shared_add + (m.moe.shared_gate ? 1.0 : 0.0) : 0.0);
    f.elementwise = bytes(nblocks * (3.0 * ab + mask) * e_ln + 3.0 * ab * e_ln * shared_add + rope +
                          permute + 8.0 * clamp);
    (swiglu ? f.gated_activation : f.activation) = bytes((swiglu ? 3.0 : 2.0) * ab * inner);
    f.softmax = tr.attn_core_fwd;
    // bwd: norms read x, dy, write dx; dropout read dy + mask, write dx; activation read inputs
    // and dy, write d-inputs; softmax read y, dy, write dx; attention dropout like dropout.
    // Each block's input feeds its norm and its residual add, so autograd sums the two gradients
    // (torch/csrc/autograd/input_buffer.cpp accumulate: read two, write one).
    KernelBytes& b = tr.bwd_by_class;
    b.norm = bytes(norms * 3.0 * ab * e_ln + 3.0 * ab * latent_norm);
    const double dropout_bwd = mask > 0.0 ? 2.0 * ab + mask : 0.0;
    b.elementwise = bytes(nblocks * (dropout_bwd + 3.0 * ab) * e_ln + 3.0 * ab * e_ln * grad_sums +
                          rope + permute + 10.0 * clamp);
    (swiglu ? b.gated_activation : b.activation) = bytes((swiglu ? 5.0 : 3.0) * ab * inner);
    b.softmax = bytes(3.0 * ab * scores + (2.0 * ab + 1.0) * scores);
    // torchtitan uncompiled: the eager chains beyond the fused kernels (costmodel/eager.hpp).
    const EagerTraffic eager = eager_traffic(m, job, p, attn, ffn, moe);
    tr.eager_fwd = bytes(eager.fwd_bytes);
    tr.eager_bwd = bytes(eager.bwd_bytes);
    f.elementwise += tr.eager_fwd;
    b.elementwise += tr.eager_bwd;
    tr.fwd = f.total();
    tr.bwd = b.total();
    tr.permute = bytes(2.0 * permute);
    tr.rope = bytes(rope);
    // Launches, each at least the profile's kernel_floor: a norm each (latent norms two more),
    // the residual add of each block, RoPE (q and k), the router's softmax / top-k and the
    // permutation's two (four through the alltoall dispatcher's chunk sorts), the activation.
    KernelLaunches& fl = tr.fwd_launches;
    fl.norm = norms + (latent_norm > 0.0 ? 2.0 : 0.0);
    fl.elementwise =
        nblocks + (rope > 0.0 ? 2.0 : 0.0) + (permute > 0.0 ? (deepep ? 3.0 : 5.0) : 0.0);
    (swiglu ? fl.gated_activation : fl.activation) =
        inner > 0.0 ? (moe && m.moe.shared_ffn_hidden > 0 ? 2.0 : 1.0) : 0.0;
    fl.softmax = scores > 0.0 ? 2.0 : 0.0;
    fl.elementwise += eager.fwd_launches;
    tr.bwd_launches = fl;
    tr.bwd_launches.elementwise +=
        grad_sums + (mask > 0.0 ? nblocks : 0.0) + eager.bwd_launches - eager.fwd_launches;
    fl.elementwise += shared_add;
    return tr;
}

namespace {

// ln of the FLOPs gemm_time looks a GEMM of shape g up at (a loop of count GEMMs at the size of
// one, a batched kernel at the whole); its m split into n chunks looks up at this minus ln(n).
double gemm_lookup_ln(const GpuSpec& gpu, const GemmShape& g) {
    return std::log(std::max(gemm_lookup_size(gpu, g).value(), 1.0));
}

// The efficiency gemm_time prices a GEMM at, from gemm_lookup_ln (1 where the curve is empty,
// as gemm_time).
double efficiency_at_ln(const GpuSpec& gpu, Dtype dt, double ln_size) {
    const double e = gemm_efficiency_ln(gpu, ln_size, runnable_dtype(gpu, dt));
    return e > 0.0 ? e : 1.0;
}

// The GEMM time a Transformer Engine userbuffers overlap adds to a GEMM that takes t alone at
// efficiency `whole` (TE @d0067d0da6cb pytorch/module/base.py:384-387 initialize_ub defaults;
// the split and the SM margin in common/comm_gemm_overlap/comm_gemm_overlap.cpp): it runs as
// `chunks` GEMMs of m / chunks rows each, at the curve's efficiency `part` for that size, on
// 1 - sm_fraction of the SMs (throughput taken as linear in the SMs it is given):
//   extra = t (whole / part) / (1 - sm_fraction) - t.
// t may hold more GEMMs than the shape the efficiencies were read for (MLA's up projections
// beside QKV): they are scaled alike.
Seconds userbuffers_extra(Seconds t, double whole, double part, double sm_fraction) {
    return max(Seconds{}, t * (whole / part) / (1.0 - sm_fraction) - t);
}

// TP collectives of one layer (Megatron f / g operators, Korthikanti et al. 2022 Sec. 4.2.2):
// forward 2 all-reduces of T x h (SP: 2 all-gathers + 2 reduce-scatters), exposed. Backward runs
// the column-parallel layers (QKV, fc1) through LinearWithGradAccumulationAndAsyncCommunication
// (megatron/core/tensor_parallel/layers.py): the input-gradient all-reduce (SP: reduce-scatter)
// overlaps the weight-gradient GEMM, and SP's re-all-gather of the sharded input overlaps the
// data-gradient GEMM; only the row-parallel layers' SP all-gathers (proj, fc2) stay exposed.
// Korthikanti Table 4 agrees: SP removes ~0.8 ms of norm/dropout traffic from a 22B layer's
// backward yet the backward barely moves (11.9 -> 11.8 ms).
void add_tp(LayerCost& lc,
            const ModelSpec& m,
            const GpuSpec& gpu,
            const JobSpec& job,
            const Plan& p,
            const PlanLinks& links,
            const Seconds gemm[4],
            const GemmShape shape[4],
            int blocks) {
    // `blocks` column/row-parallel pairs, their GEMMs in gemm[2k] (column) and gemm[2k + 1]
    // (row): layer_tp_blocks().
    if (p.tp <= 1 || blocks <= 0) {
        return;
    }
    const double nb = static_cast<double>(blocks);
    const Bytes s = bytes(tokens_per_gpu(job, p) * d(m.hidden) * activation_bytes(job));
    const Seconds ar = collective(Collective::all_reduce, s, p.tp, links.tp);
    const Seconds ag = collective(Collective::all_gather, s, p.tp, links.tp);
    const Seconds rs = collective(Collective::reduce_scatter, s, p.tp, links.tp);
    const Bytes ar_b = collective_bytes_sent(Collective::all_reduce, s, p.tp);
    const Bytes ag_b = collective_bytes_sent(Collective::all_gather, s, p.tp);
    const Bytes rs_b = collective_bytes_sent(Collective::reduce_scatter, s, p.tp);
    // SP under quantised training gathers the column-parallel layers' inputs already quantised,
    // after an amax all-reduce where the scale is per tensor (costmodel/precision.hpp).
    const Bytes sq = bytes(tokens_per_gpu(job, p) * d(m.hidden) *
                           gathered_bytes_per_element(job, activation_bytes(job)));
    const Seconds amax = per_tensor_amax(job)
                             ? collective(Collective::all_reduce, bytes(4.0), p.tp, links.tp)
                             : Seconds{};
    const Seconds agq = collective(Collective::all_gather, sq, p.tp, links.tp) + amax;
    const Bytes agq_b = collective_bytes_sent(Collective::all_gather, sq, p.tp);
    const double redo = p.recompute == Recompute::full ? 1.0 : 0.0;
    // A frozen column-parallel weight (job.peft: QKV, fc1) has no weight gradient, so its
    // backward neither re-gathers its input (the wgrad GEMM's operand) nor has a GEMM to hide the
    // input gradient's reduce-scatter (all-reduce without SP) behind: Transformer Engine turns
    // the bulk dgrad / wgrad userbuffers overlaps off for such a weight and runs the
    // reduce-scatter as a plain NCCL collective that the norm's backward waits on (TE v1.10
    // pytorch/module/layernorm_linear.py _LayerNormLinear.backward: lines 405-426 "if
    // tp_world_size == 1 or not weight.requires_grad: ctx.ub_bulk_dgrad / ub_bulk_wgrad = False",
    // 429-436 the input all-gather only if weight.requires_grad, 545-553 the reduce-scatter).
    const bool frozen = job.peft != Peft::none;
    const Bytes frozen_agq_b = frozen ? agq_b * nb : Bytes{};
    // Each collective is a point where every rank waits for the slowest (node.sync_wait):
    // forward 2 (SP: 4) and backward 2 (SP: 6, with the column-parallel layers' re-gathers).
    const Seconds w = links.tp.sync_wait;
    Seconds bwd;
    const Seconds col_gemm[2] = {gemm[0], gemm[2]};  // QKV, MLP in
    if (p.sp && job.stack.tp_comm_overlap) {
        // Transformer Engine userbuffers: each all-gather pipelined with the column-parallel GEMM
        // it feeds, each reduce-scatter with the row-parallel GEMM before it (fwd), and the
        // row-parallel layers' output-gradient all-gathers with their dgrad GEMMs (bwd).
        lc.tp_fwd = 2.0 * nb * w;
        bwd = 3.0 * nb * w;
        // What the overlap costs the GEMMs (TE's methods, base.py:369-376): the column-parallel
        // forward and the row-parallel dgrad as "ring_exchange" (tp chunks, copy engines, no SMs
        // taken); the row-parallel forward as the stack's method for the job's precision:
        // "pipeline" (splits chunks on the SMs its communicator leaves) or "ring_exchange"; the
        // column-parallel dgrad and wgrad as "bulk" (whole GEMMs beside a communicator that holds
        // its SMs while its all-gather / reduce-scatter runs: the hidden collective's time x
        // that share, as overlap_slowdown). Reported as TP communication: it is there only
        // because of it.
        const SoftwareStack& st = job.stack;
        const double t = d(p.tp);
        const double f = st.tp_overlap_sm_fraction;
        const double splits = d(std::max<int64_t>(1, st.tp_overlap_pipeline_splits));
        const Dtype dt = job.compute;
        const bool pipeline = (is_quantised(dt) ? st.tp_overlap_row_fprop_quantised
                                                : st.tp_overlap_row_fprop) == UbMethod::pipeline;
        const double ln_t = std::log(t);
        const double ln_splits = std::log(splits);
        for (int k = 0; k < blocks; ++k) {
            const Seconds col = gemm[2 * k];
            const Seconds row = gemm[2 * k + 1];
            const double ln_col = gemm_lookup_ln(gpu, shape[2 * k]);
            const double ln_row = gemm_lookup_ln(gpu, shape[2 * k + 1]);
            const double e_row = efficiency_at_ln(gpu, dt, ln_row);
            const double e_row_tp = efficiency_at_ln(gpu, dt, ln_row - ln_t);
            const Seconds row_fprop =
                pipeline ? userbuffers_extra(
                               row, e_row,
                               splits == t ? e_row_tp : efficiency_at_ln(gpu, dt, ln_row - ln_splits),
                               f)
                         : userbuffers_extra(row, e_row, e_row_tp, 0.0);
            lc.tp_fwd += exposed_behind_gemm(agq, col, true) + exposed_behind_gemm(rs, row, true) +
                         userbuffers_extra(col, efficiency_at_ln(gpu, dt, ln_col),
                                           efficiency_at_ln(gpu, dt, ln_col - ln_t), 0.0) +
                         row_fprop;
            bwd += exposed_behind_gemm(ag, row, true) + userbuffers_extra(row, e_row, e_row_tp, 0.0);
            if (frozen) {
                bwd += rs;  // frozen (above): no wgrad GEMM, no bulk overlap
                continue;
            }
            const Seconds agq_exposed = max(Seconds{}, agq - col);
            const Seconds rs_exposed = max(Seconds{}, rs - col);
            bwd += agq_exposed + rs_exposed +
                   overlap_slowdown(agq, agq_exposed, st.tp_overlap_bulk_sm_fraction) +
                   overlap_slowdown(rs, rs_exposed, st.tp_overlap_bulk_sm_fraction);
        }
        lc.tp_bytes = (agq_b + rs_b) * (nb * (2.0 + redo)) + ag_b * nb - frozen_agq_b;
    } else if (p.sp) {
        lc.tp_fwd = nb * (agq + rs) + 2.0 * nb * w;
        bwd = nb * ag + 3.0 * nb * w;  // row-parallel layers: all-gather of the output gradient
        for (int k = 0; k < blocks; ++k) {
            bwd += frozen ? rs
                          : max(Seconds{}, agq - col_gemm[k]) + max(Seconds{}, rs - col_gemm[k]);
        }
        lc.tp_bytes = (agq_b + rs_b) * (nb * (2.0 + redo)) + ag_b * nb - frozen_agq_b;
    } else {
        lc.tp_fwd = nb * ar + nb * w;
        bwd = nb * w;
        for (int k = 0; k < blocks; ++k) {
            bwd += frozen ? ar : max(Seconds{}, ar - col_gemm[k]);
        }
        lc.tp_bytes = ar_b * (nb * (2.0 + redo));
    }
    // Stalls shared at the collectives (node.sync_wait_fraction): every rank of the group waits
    // out every other's, a share of the compute the collectives cut into segments (derivation:
    // core/cluster.hpp NodeSpec::sync_wait_fraction). Charged once per layer, here for TP (add_ep
    // charges it when TP does not).
    lc.tp_fwd += lc.fwd * links.tp.sync_wait_fraction;
    bwd += lc.bwd * links.tp.sync_wait_fraction;
    lc.tp_bwd = bwd + lc.tp_fwd * redo;
}

// The TP column/row-parallel pairs of a layer: the attention block's (QKV, projection) and the
// MLP's (fc1, fc2). An MoE layer's routed experts have no dense-TP collectives: the token
// dispatcher moves the SP shards (all-to-all over EP, all-gather over ETP; add_ep; Megatron-Core
// MoELayer takes the sequence-parallel input); a shared expert is a dense TP MLP on the same
// input (SharedExpertMLP) and keeps its pair.
int layer_tp_blocks(const ModelSpec& m, bool moe, LayerShape shape) {
    const int attention = shape == LayerShape::ffn ? 0 : 1;
    const int ffn = shape == LayerShape::attention ? 0 : (moe && m.moe.shared_ffn_hidden <= 0 ? 0 : 1);
    return attention + ffn;
}

void add_cp(LayerCost& lc,
            const ModelSpec& m,
            const JobSpec& job,
            const Plan& p,
            const PlanLinks& links,
            Seconds core_fwd,
            Seconds core_bwd) {
    if (p.cp <= 1) {
        return;
    }
    // Ring attention (Liu et al. 2023; Megatron CP): cp-1 steps, each passing this rank's K and V
    // chunk to the next rank while the attention core of the current chunk runs; backward passes
    // K, V and dK, dV. Exposed only where a step outlasts its compute.
    const Bytes chunk = bytes(tokens_per_gpu(job, p) * kv_bytes_per_token(m, job, p));
    const double steps = d(p.cp - 1);
    const Seconds step = collective(Collective::send_recv, chunk, 2, links.cp);
    const Seconds per_step_compute = core_fwd / d(p.cp);
    const Seconds exposed_step = max(Seconds{}, step - per_step_compute);
    const Seconds exposed_step_bwd = max(Seconds{}, 2.0 * step - core_bwd / d(p.cp));
    const double redo = p.recompute == Recompute::full ? 1.0 : 0.0;
    lc.cp_fwd = exposed_step * steps;
    lc.cp_bwd = exposed_step_bwd * steps + lc.cp_fwd * redo;
    lc.cp_bytes = chunk * (steps * (3.0 + redo));
}

// Bytes one GPU dispatches per all-to-all: its SP shard of tokens (tokens / tp), top_k copies
// of the hidden state each (Megatron MoEAlltoAllTokenDispatcher; Lepikhin et al. 2021, GShard);
// LatentMoE dispatches the latent (token_dispatcher.py @d98e8a64: hidden_dim = moe_latent_size).
double dispatched_bytes(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    return tokens_per_gpu(job, p) / d(p.tp) * d(m.moe.top_k) * d(moe_token_width(m)) *
           activation_bytes(job);
}

}  // namespace

// DeepEP-style node-level dedup (DeepSeek-V3 tech report, arXiv:2412.19437 Sec. 3.2.2: a token
// crosses IB once per target node, then NVLink forwards it): with top_k experts drawn evenly
// over D = n / r domains, a token reaches E[distinct domains] = D (1 - (1 - 1/D)^k) of them;
// of those, (D - 1) / D on average are remote. Copies per token through the NIC:
// D (1 - (1 - 1/D)^k) (D - 1) / D, vs k (n - r) / n without dedup.
// Group-limited routing (G groups, a token's experts from its best M; groups laid over the
// domains, D / G domains each, G <= D): the k experts fall evenly over the R = M D / G domains of
// the chosen groups, so hit = R (1 - (1 - 1/R)^k); the token's own domain is among them with
// probability M / G and then reached with 1 - (1 - 1/R)^k, so the remote ones number
// hit - (M / G)(1 - (1 - 1/R)^k). M = G gives the unlimited case. DeepSeek-V3 on EP 64 of 8-GPU
// nodes (D = 8, G = 8, M = 4, k = 8): R = 4, 1 - 0.75^8 = 0.8999, hit 3.600, remote
// 3.600 - 0.5 x 0.8999 = 3.150 copies per token, vs 8 (1 - 0.875^8) 7/8 = 4.594 unlimited and
// 8 x 56/64 = 7 without dedup.
double nic_copy_ratio(const AllToAllLinks& l, double top_k, int64_t groups, int64_t group_topk) {
    if (l.n <= l.r || top_k <= 0.0) {
        return 1.0;
    }
    const double dom = d(l.n) / d(l.r);
    double g = dom;
    double msel = dom;
    if (groups > 0 && group_topk > 0 && group_topk < groups && d(groups) <= dom) {
        g = d(groups);
        msel = d(group_topk);
    }
    const double reach = msel * dom / g;
    const double any = 1.0 - std::pow(1.0 - 1.0 / reach, top_k);
    const double hit = reach * any;
    const double remote = hit - (msel / g) * any;
    const double plain = top_k * (d(l.n) - d(l.r)) / d(l.n);
    return std::min(1.0, remote / plain);
}

namespace {

struct EpComm {
    Seconds one;  // one dispatch (or one combine)
    Bytes sent;
    Bytes nvlink;
    Bytes nic;
};

// One dispatch (= one combine) of the stack's dispatcher.
EpComm ep_dispatch(const ModelSpec& m, const JobSpec& job, const Plan& p, const PlanLinks& links) {
    EpComm e;
    const int64_t etp = expert_tp(p);
    const double load = rank_load_ratio(m, job, p);  // the busiest rank receives this much more
    const Bytes s = bytes(dispatched_bytes(m, job, p));
    if (job.stack.moe_dispatcher == MoeDispatcher::allgather) {
        // MoEAllGatherTokenDispatcher: every token (not top_k copies) all-gathered over the
        // EP x ETP group, the expert outputs reduce-scattered back (token_dispatcher.py @d98e8a64).
        const int64_t n = p.ep * etp;
        const Bytes whole =
            bytes(tokens_per_gpu(job, p) / d(p.tp) * d(moe_token_width(m)) * activation_bytes(job) *
                  d(n));
        e.one = collective_time(Collective::all_gather, whole, n, links.ep_etp);
        e.sent = collective_bytes_sent(Collective::all_gather, whole, n);
        (links.ep_etp.crosses_nodes() ? e.nic : e.nvlink) = e.sent;
        return e;
    }
    if (p.ep > 1) {
        AllToAllCost a = all_to_all_cost(links.ep_a2a, s * load);
        if (job.stack.moe_dispatcher == MoeDispatcher::deepep && p.ep > links.ep_a2a.r) {
            // Fewer copies through the NIC; each remote copy that lands on the wrong GPU of its
            // domain is forwarded once over NVLink, (r - 1) / r of them.
            const AllToAllLinks& l = links.ep_a2a;
            const double rr = d(l.r);
            const auto [groups, group_topk] = router_groups(m, job);
            a.nic = a.nic * nic_copy_ratio(l, d(m.moe.top_k), groups, group_topk);
            a.nvlink = a.nvlink + s * load * ((d(l.n) - rr) / d(l.n) * (rr - 1.0) / rr);
            const Seconds nvl = l.nvlink_bw.value() > 0.0 ? a.nvlink / l.nvlink_bw : seconds(1e30);
            const Seconds nic = l.nic_bw.value() > 0.0 ? a.nic / l.nic_bw : seconds(1e30);
            a.time = max(nvl, nic) + max(l.nvlink_latency, l.nic_latency);
        }
        e.one = a.time;
        e.nvlink = a.nvlink;
        e.nic = a.nic;
        e.sent = a.nvlink + a.nic;
    }
    if (etp > 1) {
        // ETP ranks all-gather the received tokens for their column-parallel expert GEMM (and
        // reduce-scatter the outputs back on combine).
        const Bytes got = s * load * d(etp);
        e.one += collective_time(Collective::all_gather, got, etp, links.etp);
        const Bytes b = collective_bytes_sent(Collective::all_gather, got, etp);
        e.sent += b;
        (links.etp.crosses_nodes() ? e.nic : e.nvlink) += b;
    }
    return e;
}

// Dispatch + combine in forward, their gradients in backward (4 per layer, 6 with full
// recomputation). With the stack's a2a_overlap (Megatron-Core combined 1F1B,
// --overlap-moe-expert-parallel-comm, megatron/core/models/gpt/fine_grained_callables.py) a
// forward's dispatch/combine run behind the other micro-batch's backward compute and vice
// versa: only what outlasts that compute is exposed. The alltoall dispatcher's host sync (D2H
// of the split sizes before the all-to-all, token_dispatcher.py _maybe_dtoh_and_synchronize)
// stalls each MoE layer's forward by the stack's sync_us.
void add_ep(
    LayerCost& lc, const ModelSpec& m, const JobSpec& job, const Plan& p, const PlanLinks& links) {
    const bool moves = p.ep > 1 || expert_tp(p) > 1;
    // Padded to capacity the split sizes are static: no host wait (token_dispatcher.py
    // drop_and_pad skips the D2H of the counts).
    const Seconds sync =
        job.stack.moe_dispatcher == MoeDispatcher::alltoall && moves && !job.moe_pad
            ? seconds(job.stack.moe_sync_us * 1e-6)
            : Seconds{};
    if (!moves) {
        return;
    }
    const EpComm e = ep_dispatch(m, job, p, links);
    const double redo = p.recompute == Recompute::full ? 1.0 : 0.0;
    Seconds fwd = 2.0 * e.one;
    Seconds bwd = 2.0 * e.one;
    if (job.stack.moe_a2a_overlap) {
        fwd = max(Seconds{}, fwd - lc.bwd);
        bwd = max(Seconds{}, bwd - lc.fwd);
    }
    // Each all-to-all is a point where every rank of the EP group waits for the slowest
    // (node.sync_wait, as add_tp charges per TP collective): forward 3 (the per-expert counts,
    // dispatch, combine: Megatron-Core MoEAlltoAllTokenDispatcher preprocess / dispatch /
    // combine), backward 2 (dispatch and combine reversed).
    const Seconds w = links.ep.sync_wait;
    // The stalls the all-to-alls share (node.sync_wait_fraction, as add_tp), unless TP's
    // collectives already cut this layer's compute (add_tp charged them).
    const double share = p.tp > 1 ? 0.0 : links.ep.sync_wait_fraction;
    lc.ep_fwd = fwd + sync + 3.0 * w + lc.fwd * share;
    lc.ep_bwd = bwd + 2.0 * w + lc.bwd * share + lc.ep_fwd * redo;
    const double n = 4.0 + 2.0 * redo;
    lc.ep_bytes = e.sent * n;
    lc.ep_nvlink_bytes = e.nvlink * n;
    lc.ep_nic_bytes = e.nic * n;
}

// Fixed cost of the local experts of one MoE layer under quantised expert GEMMs (fp8 / mxfp8 /
// nvfp4): Transformer Engine's grouped GEMM (grouped_linear.py at d0067d0) quantises each
// expert's input slice, runs one cuBLAS GEMM per expert (multi-stream) and, in backward,
// quantises each expert's output gradient and runs its dgrad and wgrad GEMMs, each a launch of its
// own that does not grow with the expert's tokens. Published MoE runs (public_runs_2025.csv) show
// it as time per local expert per layer per micro-batch that neither FLOPs nor all-to-all bytes
// explain, the same for two models of 4x different expert size at the same expert count, and
// absent from BF16 runs; docs/costmodel.md section 4.2. The value is the calibration overlay's
// (fitted, node.quantised_expert_overhead). Split 1/3 forward, 2/3 backward (2 of a local expert's
// 6 GEMMs run in forward). Added to the layer's time, not overlapped: the alltoall dispatcher's
// host wait for the split sizes (token_dispatcher.py _maybe_dtoh_and_synchronize) leaves the host
// no lead over the GPU in each MoE layer, and a2a overlap (combined 1F1B) issues both micro-batches
// from the same host thread, so a second stream hides the all-to-all but not this.
void add_expert_overhead(
    LayerCost& lc, const ClusterSpec& c, const JobSpec& job, const Plan& p, double local_experts) {
    // The value fitted under the job's software release, or the nearest earlier one.
    const Seconds per = quantised_expert_overhead(c.node, job.stack.release);
    if (!is_quantised(job.compute) || per <= Seconds{} || local_experts <= 0.0) {
        return;
    }
    const Seconds all = per * local_experts;
    Seconds fwd = all / 3.0;
    Seconds bwd = all - fwd;
    Seconds redo = p.recompute == Recompute::full ? fwd : Seconds{};
    if (job.moe_pad) {
        // Padded to capacity there is no host wait in the layer, so the host issues these while
        // the GPU still runs earlier work: only what outlasts the pass's GPU time is exposed
        // (forward; backward with its recomputed forward).
        fwd = max(Seconds{}, fwd - (lc.fwd + lc.tp_fwd + lc.cp_fwd + lc.ep_fwd));
        bwd = max(Seconds{},
                  bwd + redo - (lc.bwd + lc.recompute + lc.tp_bwd + lc.cp_bwd + lc.ep_bwd));
        redo = Seconds{};
    }
    lc.fwd += fwd;
    lc.bwd += bwd;
    lc.recompute += redo;
    lc.expert_overhead = fwd + bwd + redo;
}

// The routed experts' GEMMs of one pass: `others` experts at the average load, one hot.
Seconds expert_pass(const GpuSpec& gpu,
                    const JobSpec& job,
                    const GemmShape& avg,
                    const GemmShape& hot,
                    Flops group,
                    double others,
                    GemmPass pass) {
    return expert_gemm_time(gpu, job, avg, group, others + 1.0, pass) * others +
           expert_gemm_time(gpu, job, hot, group, others + 1.0, pass);
}

PassTimes expert_passes(const GpuSpec& gpu,
                        const JobSpec& job,
                        const GemmShape& avg,
                        const GemmShape& hot,
                        double others) {
    const Flops group = gemm_flops(avg) * others + gemm_flops(hot);
    return {expert_pass(gpu, job, avg, hot, group, others, GemmPass::fprop),
            expert_pass(gpu, job, avg, hot, group, others, GemmPass::dgrad) +
                expert_pass(gpu, job, avg, hot, group, others, GemmPass::wgrad)};
}

// The linear GEMMs of one layer (forward each, and the sums forward and backward), at `sm` of
// the SMs (compute_sm_share). An MoE layer's g.mlp_in / mlp_out become its local experts'
// average shapes.
struct LinearTimes {
    Seconds qkv;  // MLA's up projections with it (they feed the attention core)
    Seconds proj;
    Seconds in;
    Seconds out;
    Seconds router;
    Seconds shared;
    Seconds latent;
    Seconds fwd;
    Seconds bwd;
    double local_experts = 0.0;  // this GPU's routed experts (MoE layers)
};

LinearTimes linear_times(const ModelSpec& m,
                         const GpuSpec& gpu,
                         const JobSpec& job,
                         const Plan& p,
                         bool moe,
                         LayerGemms& g,
                         double sm) {
    const Dtype dt = job.compute;
    const bool frozen = job.peft != Peft::none;
    const PassTimes qkv = linear_passes(gpu, dt, g.qkv, frozen);
    const PassTimes q_up = linear_passes(gpu, dt, g.q_up, frozen);
    const PassTimes kv_up = linear_passes(gpu, dt, g.kv_up, frozen);
    const PassTimes proj = linear_passes(gpu, dt, g.proj, frozen);
    PassTimes in = linear_passes(gpu, dt, g.mlp_in, frozen);
    PassTimes out = linear_passes(gpu, dt, g.mlp_out, frozen);
    LinearTimes t;
    if (moe) {
        // Routed experts on the expert grid (split by etp, not tp), the busiest one at its load.
        const ExpertGemms e = expert_gemms(m, job, p);
        t.local_experts = e.others + 1.0;
        in = expert_passes(gpu, job, e.avg_in, e.hot_in, e.others);
        out = expert_passes(gpu, job, e.avg_out, e.hot_out, e.others);
        g.mlp_in = {e.avg_in.m, e.avg_in.n, e.avg_in.k, e.others + 1.0};
        g.mlp_out = {e.avg_out.m, e.avg_out.n, e.avg_out.k, e.others + 1.0};
    }
    const PassTimes router = linear_passes(gpu, core_dtype(dt), g.router);
    const PassTimes shared = linear_passes(gpu, dt, g.shared);
    const PassTimes lat_in = linear_passes(gpu, dt, g.latent_in);
    const PassTimes lat_out = linear_passes(gpu, dt, g.latent_out);
    t.qkv = (qkv.fwd + q_up.fwd + kv_up.fwd) / sm;
    t.proj = proj.fwd / sm;
    t.in = in.fwd / sm;
    t.out = out.fwd / sm;
    t.router = router.fwd / sm;
    t.shared = shared.fwd / sm;
    t.latent = (lat_in.fwd + lat_out.fwd) / sm;
    t.fwd = t.qkv + t.proj + t.in + t.out + t.router + t.shared + t.latent;
    t.bwd = ((qkv.bwd + q_up.bwd + kv_up.bwd) + proj.bwd + in.bwd + out.bwd + router.bwd +
             shared.bwd + (lat_in.bwd + lat_out.bwd)) /
            sm;
    return t;
}

}  // namespace

LayerCost layer_cost(const ModelSpec& m,
                     const ClusterSpec& c,
                     const JobSpec& job,
                     const Plan& p,
                     const PlanLinks& links,
                     bool moe,
                     LayerShape shape,
                     LayerClasses* classes) {
    const bool has_attn = shape != LayerShape::ffn;
    const bool has_ffn = shape != LayerShape::attention;
    moe = moe && has_ffn;
    LayerClasses cls;
    LayerGemms g = layer_gemms(m, job, p, moe, shape);
    const GpuSpec& gpu = c.gpu;
    // Compute-bound kernels beside a DeepEP all-to-all run on the SMs it leaves them.
    const double sm = moe ? compute_sm_share(gpu, job, p) : 1.0;
    const LinearTimes lt = linear_times(m, gpu, job, p, moe, g, sm);
    const Seconds t_qkv = lt.qkv;
    const Seconds t_proj = lt.proj;
    const Seconds t_in = lt.in;
    const Seconds t_out = lt.out;
    const Seconds t_latent = lt.latent;
    const Seconds linear = lt.fwd;
    Seconds core = (gemm_time(gpu, core_dtype(job.compute), g.score) +
                    gemm_time(gpu, core_dtype(job.compute), g.attn_v)) /
                   sm;
    // A trace calibration's attention rate (GpuSpec::attention_factor, 1 by default) scales the
    // materialised core's GEMMs as it scales the fused kernel (costmodel/attention.cpp).
    const Seconds core_gemms = core;  // the fused kernel's fallback (it applies the factor)
    if (gpu.attention_factor > 0.0 && gpu.attention_factor != 1.0) {
        core = core / gpu.attention_factor;
    }
    // Backward: data-gradient and weight-gradient GEMM per forward GEMM (2x FLOPs).
    Seconds core_bwd = 2.0 * core;
    if (job.stack.attention == AttentionImpl::fused && has_attn) {
        const FusedAttentionCost fa = fused_attention_cost(m, gpu, job, p, core_gemms);
        core = fa.fwd / sm;
        core_bwd = fa.bwd / sm;
    }
    const LayerTraffic tr = layer_traffic(m, job, p, moe, shape);
    // Quantised training casts each linear GEMM's input (fwd) and output gradient (bwd).
    const QuantiseBytes q = layer_quantise_bytes(gpu, job, g);
    LayerCost lc;
    // Each cast is a launch of its own (one per quantised GEMM operand, each pass).
    const Seconds cast_fwd = max(quantize_time(gpu, job, q.fwd), gpu.kernel_floor * q.tensors);
    const Seconds cast_bwd = max(quantize_time(gpu, job, q.bwd), gpu.kernel_floor * q.tensors);
    const KernelBytes fwd_timed = norm_timed(tr.fwd_by_class, tr.norm_fwd_factor);
    const KernelBytes bwd_timed = norm_timed(tr.bwd_by_class, tr.norm_bwd_factor);
    // LoRA adapters beside the frozen linears (zero without --peft lora; costmodel/peft.hpp).
    const LoraTimes lora = lora_layer_times(m, gpu, job, p, links);
    lc.fwd = linear + core + memory_time(gpu, fwd_timed, tr.fwd_launches) + cast_fwd +
             lora.fwd_gemm + lora.fwd_memory;
    lc.bwd = lt.bwd + core_bwd + memory_time(gpu, bwd_timed, tr.bwd_launches) + cast_bwd +
             lora.bwd_gemm + lora.bwd_memory;
    // The gaps between the layer's launches no CUDA graph captures (costmodel/launches.hpp).
    LaunchInputs li;
    li.memory_fwd = tr.fwd_launches.total();
    li.memory_bwd = tr.bwd_launches.total();
    li.casts = q.tensors;
    li.local_experts = lt.local_experts;
    li.batched_experts = job.stack.moe_grouped_gemm;
    const LayerLaunches launches = layer_launches(m, job, p, moe, has_attn, has_ffn, li);
    const Seconds gap_fwd = launch_gap_time(gpu, job, launches, moe, true);
    const Seconds gap_bwd = launch_gap_time(gpu, job, launches, moe, false);
    lc.fwd += gap_fwd;
    lc.bwd += gap_bwd;
    cls.gaps = gap_fwd + gap_bwd;
    lc.gemm = linear + lt.bwd + lora.fwd_gemm + lora.bwd_gemm;
    lc.attention = core + core_bwd;
    lc.memory = lc.fwd + lc.bwd - lc.gemm - lc.attention;
    if (classes != nullptr) {  // the trace's classes (explain --trace), not the planner's
        cls.quantize = cast_fwd + cast_bwd;
        cls.norm = memory_time(gpu, KernelClass::norm, fwd_timed.norm + bwd_timed.norm);
        cls.activation =
            memory_time(gpu, KernelClass::activation,
                        tr.fwd_by_class.activation + tr.bwd_by_class.activation) +
            memory_time(gpu, KernelClass::gated_activation,
                        tr.fwd_by_class.gated_activation + tr.bwd_by_class.gated_activation);
        cls.softmax = memory_time(gpu, KernelClass::softmax, tr.fwd_by_class.softmax + tr.bwd_by_class.softmax);
        cls.permute = memory_time(gpu, KernelClass::elementwise, tr.permute);
    }
    switch (p.recompute) {
    case Recompute::none:
        break;
    case Recompute::selective: {
        if (op_level_sac(m, job, p, moe, shape == LayerShape::full)) {
            // torchtitan's op-level SAC (costmodel/eager.hpp): the unsaved matmuls' forward
            // GEMMs again, the attention output saved; uncompiled, every other forward op runs
            // again too (the checkpointed block re-runs its forward; only saved ops are read
            // from the cache). Compiled, the partitioner fuses what it recomputes into the
            // backward's kernels: not priced.
            const Seconds mm = linear * op_sac_recomputed_linear_share(m);
            const Seconds ops =
                eager_chains(job) ? memory_time(gpu, fwd_timed, tr.fwd_launches) : Seconds{};
            lc.recompute = mm + ops;
            cls.recompute_gemm += mm;
            break;
        }
        // Korthikanti et al. 2022 Sec. 5: recompute Q K^T, softmax, dropout, attention over V
        // (fused: the attention kernel's forward again, Megatron --recompute-modules core_attn).
        const Seconds attn_again =
            has_attn ? core + memory_time(gpu, KernelClass::softmax, tr.attn_core_fwd) : Seconds{};
        const uint16_t mods = p.recompute_modules;
        if (mods == 0) {
            lc.recompute = attn_again;
            cls.recompute_attention = attn_again;
            break;
        }
        // Each listed module's forward once more in backward (transformer_config.py
        // recompute_modules @d98e8a64): its GEMMs, or its elementwise pass.
        namespace rm = recompute_module;
        const double ab = activation_bytes(job);
        const double tok = tokens_per_gpu(job, p);
        const double sp = p.sp ? static_cast<double>(p.tp) : 1.0;
        const auto has = [mods](uint16_t bit) { return (mods & bit) != 0; };
        if (has(rm::core_attn)) {
            lc.recompute += attn_again;
            cls.recompute_attention += attn_again;
        }
        if (has(rm::mla_up_proj)) {
            const Seconds up =
                (gemm_time(gpu, job.compute, g.q_up) + gemm_time(gpu, job.compute, g.kv_up)) / sm;
            lc.recompute += up;
            cls.recompute_gemm += up;
            // and the RoPE applied to their outputs ("mla_up_proj: the MLA up projection and
            // RoPE", transformer_config.py recompute_modules)
            const Seconds rope = memory_time(gpu, KernelClass::elementwise, tr.rope);
            lc.recompute += rope;
        }
        if (has(rm::layernorm)) {  // two norms (one in a hybrid layer): read and write T h / sp,
            // at the norm kernel's rate for h
            const double norms = shape == LayerShape::full ? 2.0 : 1.0;
            const double h = static_cast<double>(m.hidden);
            const Seconds ln = memory_time(gpu,
                                           KernelClass::norm,
                                           bytes(norms * 2.0 * ab * tok * h / sp *
                                                 norm_kernel_factor(job.stack, m.norm, h, false)));
            lc.recompute += ln;
            cls.recompute_norm += ln;
        }
        if (!moe && has_ffn && has(rm::mlp)) {
            lc.recompute += t_in + t_out;
            cls.recompute_gemm += t_in + t_out;
        }
        if (moe && has(rm::moe)) {
            const Seconds mlp = t_in + t_out + lt.router + lt.shared + t_latent;
            lc.recompute += mlp;
            cls.recompute_gemm += mlp;
        } else if (moe) {
            if (has(rm::moe_act)) {  // SwiGLU over the routed rows: read 2 f_e, write f_e
                // (+ 8 f_e: the clamped GLU's unfused clamp and concatenation, layer_traffic).
                const double passes = m.clamped_glu ? 11.0 : 3.0;
                const Seconds act = memory_time(
                    gpu, KernelClass::elementwise,
                    bytes(passes * ab * g.mlp_in.m * g.mlp_in.count * static_cast<double>(m.moe.expert_ffn_hidden) /
                          static_cast<double>(expert_tp(p))));
                lc.recompute += act;
                cls.recompute_activation += act;
            }
            if (has(rm::shared_experts)) {
                lc.recompute += lt.shared;
                cls.recompute_gemm += lt.shared;
            }
        }
        break;
    }
    case Recompute::full:
        lc.recompute = lc.fwd;
        // The forward once more: its GEMMs (a third of gemm), attention core and the forward's
        // share of the memory-bound classes.
        cls.recompute_gemm = linear;
        cls.recompute_attention = core + memory_time(gpu, KernelClass::softmax, tr.fwd_by_class.softmax);
        cls.recompute_norm = memory_time(gpu, KernelClass::norm, fwd_timed.norm);
        cls.recompute_activation =
            memory_time(gpu, KernelClass::activation, tr.fwd_by_class.activation) +
            memory_time(gpu, KernelClass::gated_activation, tr.fwd_by_class.gated_activation);
        break;
    }
    lc.flops_fwd = forward_flops(g);
    // One GEMM of each layer (a data- or weight-gradient GEMM has the forward's FLOPs).
    const Seconds gemms[4] = {t_qkv, t_proj, t_in, t_out};
    const Seconds ffn_gemms[4] = {t_in, t_out, Seconds{}, Seconds{}};
    const GemmShape shapes[4] = {g.qkv.m > 0.0 ? g.qkv : g.q_up, g.proj, g.mlp_in, g.mlp_out};
    const GemmShape ffn_shapes[4] = {g.mlp_in, g.mlp_out, GemmShape{}, GemmShape{}};
    add_tp(lc, m, gpu, job, p, links, has_attn ? gemms : ffn_gemms, has_attn ? shapes : ffn_shapes,
           layer_tp_blocks(m, moe, shape));
    if (lora.tp_bytes.value() > 0.0) {  // the adapters' own collectives, exposed (peft.hpp)
        const double redo = p.recompute == Recompute::full ? 1.0 : 0.0;
        lc.tp_fwd += lora.tp_fwd;
        lc.tp_bwd += lora.tp_bwd + lora.tp_fwd * redo;
        lc.tp_bytes += lora.tp_bytes;
    }
    if (has_attn) {
        add_cp(lc, m, job, p, links, core, core_bwd);
    }
    if (moe) {
        add_ep(lc, m, job, p, links);
        if (p.recompute == Recompute::selective && (p.recompute_modules & recompute_module::moe) != 0) {
            lc.recompute += lc.ep_fwd;  // the re-run MoE block dispatches and combines again
        }
        add_expert_overhead(lc, c, job, p, lt.local_experts);
    }
    if (classes != nullptr) {
        *classes = cls;
    }
    return lc;
}

namespace {

// Context parallelism of a hybrid model's sequence mixer (Mamba-2, gated DeltaNet): the whole
// sequence of a head shard is needed, so the mixer's input (pre_width elements a token, TP-split)
// goes from sequence- to head-sharded by an all-to-all and its output (post_width) back, in
// forward and again in backward (and in the recomputed forward); not overlapped.
void add_mixer_cp(LayerCost& lc,
                  const JobSpec& job,
                  const Plan& p,
                  const PlanLinks& links,
                  double pre_width,
                  double post_width) {
    if (p.cp <= 1) {
        return;
    }
    const double ab = activation_bytes(job);
    const double tok = tokens_per_gpu(job, p);
    const Bytes pre = bytes(ab * tok * pre_width / d(p.tp));
    const Bytes post = bytes(ab * tok * post_width / d(p.tp));
    const Seconds a2a = collective(Collective::all_to_all, pre, p.cp, links.cp) +
                        collective(Collective::all_to_all, post, p.cp, links.cp);
    const double redo = p.recompute == Recompute::full ? 1.0 : 0.0;
    lc.cp_fwd = a2a;
    lc.cp_bwd = a2a * (1.0 + redo);
    lc.cp_bytes = (collective_bytes_sent(Collective::all_to_all, pre, p.cp) +
                   collective_bytes_sent(Collective::all_to_all, post, p.cp)) *
                  (2.0 + redo);
}

// A sequence-mixer layer's bytes by kernel class: the pre-norm (read and write one T x h
// activation forward, three in backward: x, dy, dx), the mixer's own kernels (ssm, given) and
// the residual add (read two, write one; backward the sum of the input's two gradients, the
// same); th is T x h x bytes per element.
LayerTraffic mixer_traffic(double th, Bytes ssm_fwd, Bytes ssm_bwd) {
    LayerTraffic tr;
    KernelBytes& f = tr.fwd_by_class;
    f.norm = bytes(2.0 * th);
    f.ssm = ssm_fwd;
    f.elementwise = bytes(3.0 * th);
    KernelBytes& b = tr.bwd_by_class;
    b.norm = bytes(3.0 * th);
    b.ssm = ssm_bwd;
    b.elementwise = bytes(3.0 * th);
    tr.fwd = f.total();
    tr.bwd = b.total();
    return tr;
}

// The sequence mixer's core (Mamba-2's SSD scan, gated DeltaNet's chunked delta rule): its
// 16-bit products' time forward and backward and their forward FLOPs.
struct MixerCore {
    Seconds fwd;
    Seconds bwd;
    Flops flops_fwd;
};

// A sequence-mixer layer (Mamba-2, gated DeltaNet) priced as its parts: in_proj and out_proj
// at the GEMM curve (backward twice the forward: dX and dW), the core as given, the non-GEMM
// kernels' bytes by class and the in_proj / out_proj quantisation casts; TP as one row-parallel
// all-reduce (Megatron's mixers, like an MLP); CP as add_mixer_cp's two all-to-alls of
// cp_in / cp_out features per token.
LayerCost mixer_layer_cost(const ModelSpec& m,
                           const ClusterSpec& c,
                           const JobSpec& job,
                           const Plan& p,
                           const PlanLinks& links,
                           const GemmShape& in_proj,
                           const GemmShape& out_proj,
                           const MixerCore& core,
                           const LayerTraffic& tr,
                           double cp_in,
                           double cp_out) {
    const GpuSpec& gpu = c.gpu;
    const PassTimes p_in = linear_passes(gpu, job.compute, in_proj);
    const PassTimes p_out = linear_passes(gpu, job.compute, out_proj);
    const Seconds t_in = p_in.fwd;
    const Seconds t_out = p_out.fwd;
    LayerGemms lg;  // for the quantisation casts of in_proj / out_proj
    lg.mlp_in = in_proj;
    lg.mlp_out = out_proj;
    const QuantiseBytes q = layer_quantise_bytes(gpu, job, lg);
    LayerCost lc;
    const Seconds linear = t_in + t_out;
    const double h = d(m.hidden);  // the pre-norm at its kernel's rate for h
    lc.fwd =
        linear + core.fwd +
        memory_time(gpu,
                    norm_timed(tr.fwd_by_class, norm_kernel_factor(job.stack, m.norm, h, false))) +
        quantize_time(gpu, job, q.fwd);
    lc.bwd = (p_in.bwd + p_out.bwd) + core.bwd +
             memory_time(
                 gpu, norm_timed(tr.bwd_by_class, norm_kernel_factor(job.stack, m.norm, h, true))) +
             quantize_time(gpu, job, q.bwd);
    lc.gemm = linear + (p_in.bwd + p_out.bwd);
    lc.attention = core.fwd + core.bwd;  // the sequence mixer's core, reported beside attention's
    lc.memory = lc.fwd + lc.bwd - lc.gemm - lc.attention;
    if (p.recompute == Recompute::full) {
        lc.recompute = lc.fwd;
    }
    lc.flops_fwd = gemm_flops(in_proj) + gemm_flops(out_proj) + core.flops_fwd;
    const Seconds gemms[4] = {t_in, t_out, Seconds{}, Seconds{}};
    const GemmShape shapes[4] = {in_proj, out_proj, GemmShape{}, GemmShape{}};
    add_tp(lc, m, gpu, job, p, links, gemms, shapes, 1);
    add_mixer_cp(lc, job, p, links, cp_in, cp_out);
    return lc;
}

}  // namespace

// Bytes of the Mamba-2 layer's non-GEMM kernels, per micro-batch on one GPU (T tokens, t TP),
// derived from each kernel's inputs and outputs in Megatron-Core's memory-efficient path
// (mamba_mixer.py _ssm_training -> mamba_ssm mamba_split_conv1d_scan_combined) and the SSD
// kernels of ssd_combined.py; the pass counts are this reading, not a measurement. Forward:
// pre-norm read + write h (fused into in_proj's LayerNormColumnParallelLinear); the causal conv
// reads and writes x B C; the scan reads x B C dt, writes y, and writes, passes (read + write)
// and reads back the fp32 chunk states (H P N per chunk: 4 x 4 B x H P N / Q per token); the
// gated RMSNorm reads y and z and writes its output; the residual add reads two h, writes one.
// Backward: the norm 3 h; the conv reads x B C and its output gradient, writes d(x B C); the scan
// reads x B C dt and dy twice over (states recomputed, then the gradients) and passes the fp32
// states and their gradients (6 x 4 B x H P N / Q); the gated norm reads y, z, dy and writes dy,
// dz; the residual 2 h. The backward recomputes the conv + SiLU from the saved in_proj output
// (Megatron's memory-efficient path, and the executor, read x B C and write its output again:
// 2 (x B C)). The mixer's own kernels (conv, scan, gated norm) are KernelClass::ssm; the
// pre-norm is norm, the residual elementwise.
LayerTraffic mamba_traffic(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    const MambaSpec& a = m.mamba;
    const double ab = activation_bytes(job);
    const double t = d(p.tp);
    const double tok = tokens_per_gpu(job, p);
    const double h = d(m.hidden) / (p.sp ? t : 1.0);
    const double di = d(a.d_inner()) / t;
    const double xbc = di + d(2 * a.groups * a.state) / t;
    const double heads = d(a.heads) / t;
    const double states = 4.0 * heads * d(a.head_dim) * d(a.state) / d(a.chunk);
    return mixer_traffic(
        tok * ab * h,
        bytes(tok * (3.0 * ab * di + 2.0 * ab * xbc + ab * (xbc + heads + di) + 4.0 * states)),
        bytes(tok * (5.0 * ab * di + 2.0 * ab * xbc + 3.0 * ab * xbc +
                     2.0 * ab * (xbc + heads + di) + 6.0 * states)));
}

LayerCost mamba_layer_cost(const ModelSpec& m,
                           const ClusterSpec& c,
                           const JobSpec& job,
                           const Plan& p,
                           const PlanLinks& links) {
    const GpuSpec& gpu = c.gpu;
    const MambaGemms g = mamba_gemms(m, job, p);
    // The scan's products run in 16 bits whatever the recipe (like the attention core); the
    // backward is twice the forward (the gradients of each product's two inputs).
    const Dtype cd = core_dtype(job.compute);
    MixerCore core;
    core.fwd = gemm_time(gpu, cd, g.cb) + gemm_time(gpu, cd, g.scan_x) +
               gemm_time(gpu, cd, g.states) + gemm_time(gpu, cd, g.state_out);
    core.bwd = 2.0 * core.fwd;
    core.flops_fwd = gemm_flops(g.cb) + gemm_flops(g.scan_x) + gemm_flops(g.states) +
                     gemm_flops(g.state_out);
    // MambaContextParallel: all-to-all of the in_proj output before the conv and scan and of the
    // scan output after (forward), the same two in backward; not overlapped.
    const MambaSpec& a = m.mamba;
    return mixer_layer_cost(m, c, job, p, links, g.in_proj, g.out_proj, core,
                            mamba_traffic(m, job, p),
                            d(2 * a.d_inner() + 2 * a.groups * a.state + a.heads),
                            d(a.d_inner()));
}

// Bytes of the gated DeltaNet layer's non-GEMM kernels, per micro-batch on one GPU (T tokens, t
// TP), from each kernel's inputs and outputs in gdn.py @d98e8a64 and flash-linear-attention's
// chunk_gated_delta_rule (kkt + solve_tril + recompute_w_u, chunk_fwd_h, chunk_fwd_o); the pass
// counts are this reading, not a measurement. Per token, with q_e and k_e the query and key
// repeated to the Hv value heads (Hv d_k each), v the value width, S the d_k x d_v chunk state
// (16-bit between the kernels) over C tokens, g the fp32 decay:
//   forward  pre-norm 2h (fused into in_proj's LayerNormColumnParallelLinear); conv 2 (2qk + v);
//            L2 norm of q and k 2 x 2qk, and the repeat to the value heads 2 Hv d_k when
//            Hv > Hk; the gates read beta and alpha and write beta and g; the WY kernel reads
//            k_e, v, beta, g and writes A (C per head) and W, U (Hv d_k + v); the state kernel
//            reads k_e, W, U, g and writes U - W S and the states; the output kernel reads q_e,
//            k_e, U - W S, the states and g and writes o; the gated norm reads o and z, writes
//            its output; the residual add 3h;
//   backward the norms 3h + 5v; the conv 3 (2qk + v); the L2 norm 3 x 2qk; the chunk kernels
//            twice their forward bytes (W, U and the states recomputed, then the gradients of
//            every input) and the state gradients (2 S).
// The mixer's own kernels (all but the pre-norm and the residual) are KernelClass::ssm.
LayerTraffic gdn_traffic(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    const GdnSpec& a = m.gdn;
    const double ab = activation_bytes(job);
    const double t = d(p.tp);
    const double tok = tokens_per_gpu(job, p);
    const double h = d(m.hidden) / (p.sp ? t : 1.0);
    const double qk2 = 2.0 * d(a.qk_dim()) / t;
    const double v = d(a.v_dim()) / t;
    const double heads = d(a.v_heads) / t;
    const double ke = heads * d(a.qk_head_dim);  // one of q_e, k_e
    const double repeat = a.v_heads > a.qk_heads ? 2.0 * ke : 0.0;
    const double states = ab * heads * d(a.qk_head_dim) * d(a.v_head_dim) / d(a.chunk);
    const double g32 = 4.0 * heads;
    const double wy = ab * (ke + v) + g32 + ab * heads + ab * heads * d(a.chunk) + ab * (ke + v);
    const double h_pass = ab * (2.0 * ke + v) + g32 + ab * v + states;
    const double o_pass = ab * (2.0 * ke + 2.0 * v) + states + g32;
    const double chunk = wy + h_pass + o_pass;
    return mixer_traffic(tok * ab * h,
                         bytes(tok * (3.0 * ab * v + 2.0 * ab * (qk2 + v) + 2.0 * ab * qk2 +
                                      ab * repeat + (2.0 * ab * heads + ab * heads + g32) + chunk)),
                         bytes(tok * (5.0 * ab * v + 3.0 * ab * (qk2 + v) + 3.0 * ab * qk2 +
                                      2.0 * chunk + 2.0 * states)));
}

LayerCost gdn_layer_cost(const ModelSpec& m,
                         const ClusterSpec& c,
                         const JobSpec& job,
                         const Plan& p,
                         const PlanLinks& links) {
    const GpuSpec& gpu = c.gpu;
    const GdnGemms g = gdn_gemms(m, job, p);
    // The delta rule's products run in 16 bits whatever the recipe (like the attention core).
    const Dtype cd = core_dtype(job.compute);
    const Seconds t_wu = gemm_time(gpu, cd, g.wu);
    const Seconds t_state = gemm_time(gpu, cd, g.state);
    MixerCore core;
    core.fwd = gemm_time(gpu, cd, g.kk) + t_wu + gemm_time(gpu, cd, g.qk) +
               gemm_time(gpu, cd, g.attn_v) + t_state;
    // Backward: W, U and two of the three state products (W S and the update) recomputed, then
    // the gradients of every product (twice its forward).
    core.bwd = 2.0 * core.fwd + t_wu + t_state * (2.0 / 3.0);
    core.flops_fwd = gemm_flops(g.kk) + gemm_flops(g.wu) + gemm_flops(g.qk) +
                     gemm_flops(g.attn_v) + gemm_flops(g.state);
    // gdn.py: a2a_cp_to_hp of the in_proj output before the conv and the delta rule, a2a_hp_to_cp
    // of the gated norm's output after (forward); the same two in backward.
    return mixer_layer_cost(m, c, job, p, links, g.in_proj, g.out_proj, core,
                            gdn_traffic(m, job, p), d(m.gdn.in_proj_dim()), d(m.gdn.v_dim()));
}

}  // namespace cleave
