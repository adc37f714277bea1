#include "costmodel/memory.hpp"
#include "costmodel/num.hpp"

#include "costmodel/attention.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/flops.hpp"
#include "costmodel/float8.hpp"
#include "costmodel/loss.hpp"
#include "costmodel/precision.hpp"

#include <algorithm>

namespace cleave {

namespace {

using detail::d;

// GPT-OSS's clamped GLU: each clamp keeps its input, the 2 f_e wide fc1 output of every routed
// copy, beside the activation's own saved (clamped) input (Megatron-LM @d98e8a64
// fused_bias_geglu.py weighted_bias_quick_geglu_impl; compute.cpp layer_traffic). Bytes on one
// GPU of one micro-batch; inside the checkpoint when moe_act or moe is recomputed.
double clamp_saved_bytes(const ModelSpec& m, double ab, double routed, double t) {
    return m.clamped_glu ? 2.0 * ab * routed * d(m.moe.expert_ffn_hidden) / t : 0.0;
}

}  // namespace

StateBytesPerParam state_bytes_per_param(const JobSpec& job) {
    return {bytes_of(job.weights), bytes_of(job.grads), optimizer_state_bytes(job)};
}

StateBytes model_states(const JobSpec& job, double params, int zero, int64_t shard) {
    return model_states(state_bytes_per_param(job), params, zero, shard);
}

Bytes activation_per_layer(const ModelSpec& m,
                           const JobSpec& job,
                           const Plan& p,
                           bool moe,
                           Recompute r,
                           LayerShape shape) {
    const bool has_attn = shape != LayerShape::ffn;
    const bool has_ffn = shape != LayerShape::attention;
    moe = moe && has_ffn;
    const double norms = shape == LayerShape::full ? 2.0 : 1.0;
    const double ab = activation_bytes(job);
    const double t = d(p.tp);
    const double sp = p.sp ? t : 1.0;  // divisor of the norm / dropout / layer-input region
    const double tok = tokens_per_gpu(job, p);
    const double h = d(m.hidden);
    if (r == Recompute::full) {
        return bytes(ab * tok * h / sp);  // the layer input only
    }
    if (r == Recompute::selective && job.stack.op_level_sac && !moe && !m.mla.enabled() &&
        shape == LayerShape::full) {
        return bytes(op_sac_saved_bytes_per_token(m, job, p) * tok);
    }
    // Norm inputs (2 x ab) and dropout masks (2 x 1 B, when the recipe keeps hidden dropout):
    // split only by SP.
    const double masks = job.stack.hidden_dropout ? 2.0 : 0.0;
    // Sandwich norms (Gemma) keep their input too: each block's output, ab per element.
    const double post_norms = m.sandwich_norms ? 1.0 : 0.0;
    // torchtitan's eager RMSNorm (models/norms.py @9dec370: self._norm(x.float()).type_as(x) *
    // weight) keeps the fp32 upcast (pow's and mul's backward) and the pre-weight output (the
    // weight mul's backward) where a fused norm keeps the 16-bit input: 4 + ab per element.
    // Compiled, inductor fuses the norm and keeps the 16-bit input.
    const double norm_in = job.stack.framework == StackFramework::torchtitan && !job.stack.torch_compile
                               ? 4.0 + ab
                               : ab;
    const double ln_region = norms * (norm_in + ab * post_norms + masks / 2.0) * tok * h / sp;
    // A GEMM input kept for its weight gradient: under quantised training Transformer Engine
    // keeps it as the quantised copy it fed the GEMM (fp8 + scales; saved_input_bytes()). A
    // frozen weight (job.peft) has no weight gradient, so its linear keeps no input at all
    // (TE v1.10 pytorch/module/linear.py:283 "if weight.requires_grad:" around saved_inputmat;
    // layernorm_linear.py:297,308 "ln_out if weight.requires_grad else None"); the LoRA
    // adapters keep their own (lora_activation_per_layer).
    const double qb = job.peft != Peft::none ? 0.0 : saved_input_bytes(job);
    // QKV input and MLP input (norm outputs): replicated across TP ranks unless SP.
    const double replicated = norms * qb * tok * h / sp;
    // The projection's input: the attention output the kernel keeps (ab, in the elements
    // below) and, quantised, the Linear's own fp8 copy beside it.
    const double attn = !has_attn ? 0.0
                                  : attention_activation_elements(m, p) * ab * tok +
                                        (qb < ab ? qb * d(m.heads) * d(v_head_dim(m)) / t * tok : 0.0);
    // MoE: top_k routed copies + the shared expert's every token (DeepSeek), TP-split alike.
    const double inner =
        moe ? tok * (d(m.moe.top_k) * d(m.moe.expert_ffn_hidden) + d(m.moe.shared_ffn_hidden))
            : tok * d(m.ffn_hidden);
    // The up projection's output (2 f gated, f otherwise) for the activation's backward, and
    // the activation's output as the down projection's input; the routed copies as the experts'
    // input.
    // LatentMoE: the routed copies are latent wide, and fc2_latent_proj keeps its input (the
    // combined latent rows of this GPU's SP shard) for its weight gradient.
    const double w = d(moe_token_width(m));
    const double clamp_saved = moe ? clamp_saved_bytes(m, ab, tok * d(m.moe.top_k), t) : 0.0;
    double mlp = !has_ffn ? 0.0
                          : ((m.mlp == MlpKind::swiglu ? 2.0 : 1.0) * ab + qb) * inner / t +
                                (moe ? qb * tok * (d(m.moe.top_k) * w / t + d(m.moe.latent) / sp)
                                     : 0.0) +
                                clamp_saved;
    const uint16_t mods = r == Recompute::selective ? p.recompute_modules : 0;
    double attn_kept = attn;
    if (mods != 0) {
        const double saved = module_recompute_saving(m, job, p, moe);
        attn_kept -= (mods & recompute_module::mla_up_proj) != 0 && m.mla.enabled() && has_attn
                         ? (d(m.heads) * d(head_dim(m)) + d(kv_width(m))) / t * ab * tok
                         : 0.0;
        mlp -= has_ffn ? saved : 0.0;
    }
    double total = ln_region + replicated + attn_kept + mlp;
    if (r == Recompute::none && shape == LayerShape::full && !moe) {
        // torchao's float8 weights saved unsharded for backward where the release keeps them
        // (costmodel/float8.hpp); a checkpointed block keeps none.
        total += float8_saved_weight_bytes_per_param(job) * float8_linear_params(m, p, 1.0);
    }
    if (!has_attn) {
        return bytes(total);
    }
    if (job.stack.attention == AttentionImpl::fused) {
        // No scores in memory: the kernel keeps each query row's fp32 log-sum-exp.
        return bytes(total + fused_attention_saved_bytes(m, job, p));
    }
    // Materialised scores are dropped by core_attn recomputation (Megatron's default list).
    if (r == Recompute::none || (mods != 0 && (mods & recompute_module::core_attn) == 0)) {
        // softmax output (ab), dropout mask (1 B), dropout output (ab) per score: 5 a s^2 b.
        const double scores =
            d(p.mbs) * d(m.heads) / t * (d(job.seq_len) / d(p.cp)) * d(job.seq_len);
        total += (2.0 * ab + 1.0) * scores;
    }
    return bytes(total);
}

namespace {

// A sequence-mixer layer's saved activations (Mamba-2, gated DeltaNet) per micro-batch on one
// GPU: under full recomputation the layer input only; otherwise the pre-norm's input (16-bit)
// and in_proj's saved input (saved_input_bytes: FP8 under an FP8 recipe), both T x h (/t with
// SP), plus the mixer's own tensors, `mixer` bytes per token (already split by TP).
Bytes mixer_activation(const ModelSpec& m, const JobSpec& job, const Plan& p, Recompute r,
                       double mixer) {
    const double ab = activation_bytes(job);
    const double sp = p.sp ? d(p.tp) : 1.0;
    const double tok = tokens_per_gpu(job, p);
    const double h = d(m.hidden);
    if (r == Recompute::full) {
        return bytes(ab * tok * h / sp);
    }
    return bytes(tok * ((ab + saved_input_bytes(job)) * h / sp + mixer));
}

}  // namespace

// The tensors each keeps are listed in memory.hpp.
Bytes mamba_activation_per_layer(const ModelSpec& m, const JobSpec& job, const Plan& p, Recompute r) {
    const MambaSpec& a = m.mamba;
    const double ab = activation_bytes(job);
    const double t = d(p.tp);
    const double qb = saved_input_bytes(job);
    const double di = d(a.d_inner()) / t;
    const double zxbcdt = d(2 * a.d_inner() + 2 * a.groups * a.state + a.heads) / t;
    const double rstd = 4.0 * d(a.groups) / t;
    return mixer_activation(m, job, p, r, ab * zxbcdt + 2.0 * ab * di + qb * di + rstd);
}

Bytes gdn_activation_per_layer(const ModelSpec& m, const JobSpec& job, const Plan& p, Recompute r) {
    const GdnSpec& a = m.gdn;
    const double ab = activation_bytes(job);
    const double t = d(p.tp);
    const double qb = saved_input_bytes(job);
    const double heads = d(a.v_heads) / t;
    const double qk2 = 2.0 * d(a.qk_dim()) / t;
    const double v = d(a.v_dim()) / t;
    const double repeat = a.v_heads > a.qk_heads ? 2.0 * heads * d(a.qk_head_dim) : 0.0;
    const double mixer = ab * d(a.in_proj_dim()) / t           // in_proj's output
                         + ab * (qk2 + v)                      // the conv's output
                         + ab * (qk2 + repeat)                 // q, k L2-normed, repeated
                         + (4.0 + ab) * heads + ab * heads * d(a.chunk)  // g (fp32), beta, A
                         + 2.0 * ab * v + 4.0 * heads + qb * v;  // o, the norm's output, rstd,
                                                                 // out_proj's input
    return mixer_activation(m, job, p, r, mixer);
}

double module_recompute_saving(const ModelSpec& m, const JobSpec& job, const Plan& p, bool moe) {
    const uint16_t mods = p.recompute_modules;
    const double ab = activation_bytes(job);
    const double t = d(p.tp);
    const double tok = tokens_per_gpu(job, p);
    const double gate = m.mlp == MlpKind::swiglu ? 3.0 : 2.0;
    if (!moe) {
        // mlp: the dense MLP checkpointed, its input (the norm output) kept by the layer anyway.
        return (mods & recompute_module::mlp) != 0 ? gate * ab * tok * d(m.ffn_hidden) / t : 0.0;
    }
    const double routed = tok * d(m.moe.top_k);
    const double clamp = clamp_saved_bytes(m, ab, routed, t);  // inside the checkpoint
    if ((mods & recompute_module::moe) != 0) {
        // moe: the whole MoE block re-run (routing, dispatch, experts, combine).
        return gate * ab * (routed * d(m.moe.expert_ffn_hidden) + tok * d(m.moe.shared_ffn_hidden)) / t +
               ab * routed * d(moe_token_width(m)) / t + clamp;
    }
    double saving = 0.0;
    if ((mods & recompute_module::moe_act) != 0) {
        saving += ab * routed * d(m.moe.expert_ffn_hidden) / t + clamp;  // the act output, clamps
    }
    if ((mods & recompute_module::shared_experts) != 0) {
        saving += gate * ab * tok * d(m.moe.shared_ffn_hidden) / t;
    }
    return saving;
}

double attention_activation_elements(const ModelSpec& m, const Plan& p) {
    const double t = d(p.tp);
    // Q (a d_qk), K and V as the kernel reads them (kv_width), the projection input (a d_v):
    // split by TP. GQA: 2 a d + 2 a_kv d (Korthikanti Table 2's 4 s b h for a d = h).
    // Gated attention (attn_output_gate): the gate and the gated product beside the core output
    // (a d_v each), kept for the sigmoid-multiply's backward.
    const double gate = m.attn_output_gate ? 2.0 * d(m.heads) * d(v_head_dim(m)) : 0.0;
    const double split =
        (d(m.heads) * d(head_dim(m)) + d(kv_width(m)) + d(m.heads) * d(v_head_dim(m)) + gate) / t;
    if (!m.mla.enabled()) {
        return split;
    }
    // MLA (Megatron-Core multi_latent_attention.py): the down projections run on every TP rank;
    // backward keeps the q latent (q_layernorm input) and its normed copy (linear_q_up_proj
    // input), the same two for the kv latent, and the rope key part k_pe before it is broadcast.
    const MlaSpec& a = m.mla;
    return split + 2.0 * d(a.q_lora_rank) + 2.0 * d(a.kv_lora_rank) + d(a.qk_rope_dim);
}

double kv_bytes_per_token(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    return d(kv_width(m)) / d(p.tp) * activation_bytes(job);
}

double saved_input_bytes(const JobSpec& job) {
    const double ab = activation_bytes(job);
    if (float8_run(job).active) {
        return float8_saved_input_bytes(job);  // torchao, by release and recipe (float8.hpp)
    }
    if (job.stack.framework != StackFramework::megatron || job.stack.attention != AttentionImpl::fused) {
        return ab;  // no Transformer Engine before fused attention
    }
    return gathered_bytes_per_element(job, ab);
}

double op_sac_saved_bytes_per_token(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    const double ab = activation_bytes(job);
    const double t = d(p.tp);
    const double h = d(m.hidden);
    const double hd = d(head_dim(m));
    // The layer's matmuls in forward order, by output width per token on one GPU: column-
    // parallel outputs split by TP, row-parallel ones (o, down) the full-width partial sums.
    const double kv = d(m.kv_heads) * hd / t;
    const bool gated = m.mlp == MlpKind::swiglu;
    const double f = d(m.ffn_hidden) / t;
    double widths[7] = {d(m.heads) * hd / t, kv, kv, h, f, gated ? f : h, h};
    const int n = gated ? 7 : 6;
    double saved = 0.0;
    for (int i = 0; i < n; i += 2) {  // the 1st, 3rd, 5th, ... matmul: saved
        saved += widths[i];
    }
    if (job.stack.torch_compile && n % 2 == 1) {
        saved -= widths[n - 1];  // compiled: the last matmul's output is read by no backward op
    }
    // + the block input (the checkpoint), SP-sharded; + the attention output and its fp32
    // log-sum-exp per head.
    const double input = h / (p.sp ? t : 1.0);
    const double attention = d(m.heads) * d(v_head_dim(m)) / t;
    return ab * (saved + input + attention) + 4.0 * d(m.heads) / t;
}

double loss_buffer_count(const JobSpec& job, const Plan& p) {
    if (job.stack.loss != LossImpl::unset) {
        return loss_impl_buffers(job.stack.loss, p.tp > 1);
    }
    if (p.tp > 1 && job.stack.loss_parallel_buffers > 0.0) {
        return job.stack.loss_parallel_buffers;
    }
    if (job.stack.loss_buffers > 0.0) {
        return job.stack.loss_buffers;
    }
    // A fused cross-entropy (Transformer Engine / Triton) works on the 16-bit logits in place;
    // unfused, the logits and their fp32 copy (2 + 4 bytes = 3 logits' worth).
    return job.stack.fused_cross_entropy ? 1.0 : 3.0;
}

Bytes logits_bytes(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    if (job.stack.loss != LossImpl::unset) {
        return loss_peak_bytes(m, job, p);  // the stack names its loss (costmodel/loss.hpp)
    }
    return bytes(loss_buffer_count(job, p) * activation_bytes(job) * tokens_per_gpu(job, p) *
                 d(m.vocab) / d(p.tp));
}

double largest_layer_matrix(const ModelSpec& m, const Plan& p) {
    const double h = d(m.hidden);
    const double hd = d(head_dim(m));
    const double gate = m.mlp == MlpKind::swiglu ? 2.0 : 1.0;
    const double ffn = std::max({d(m.ffn_hidden),
                                 m.moe.enabled() ? d(m.moe.expert_ffn_hidden) : 0.0,
                                 d(m.moe.shared_ffn_hidden)});
    const double t = d(p.tp);
    const double proj = d(m.heads) * d(v_head_dim(m)) * h / t;
    const double mlp = gate * h * ffn / t;  // MLP in; MLP out (f x h) is no larger
    const double q_rows = m.attn_output_gate ? 2.0 : 1.0;  // gated attention: q and its gate
    const double qkv = h * (q_rows * d(m.heads) + 2.0 * d(m.kv_heads)) * hd / t;
    if (m.mamba.enabled() || m.gdn.enabled()) {
        // A hybrid model's sequence mixer's in_proj (column-split) may be its largest matrix.
        const MambaSpec& a = m.mamba;
        const double mamba = h * d(2 * a.d_inner() + 2 * a.groups * a.state + a.heads) / t;
        const double gdn = h * d(m.gdn.in_proj_dim()) / t;
        return std::max({mamba, gdn, mlp, proj, qkv});
    }
    if (m.mla.enabled()) {
        // Down projections whole on every TP rank, up projections column-split.
        const MlaSpec& a = m.mla;
        const double down = h * d(a.q_lora_rank + a.kv_lora_rank + a.qk_rope_dim);
        const double q_in = a.q_lora_rank > 0 ? d(a.q_lora_rank) : h;
        const double q_up = q_in * d(m.heads) * hd / t;
        const double kv_up = d(a.kv_lora_rank) * d(m.heads) * d(a.qk_nope_dim + a.v_dim) / t;
        return std::max({down, q_up, kv_up, proj, mlp});
    }
    return std::max({qkv, proj, mlp});
}

Bytes zero3_gather_bytes(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    if (p.zero < 3) {
        return {};
    }
    if (job.stack.framework == StackFramework::torchtitan) {
        // FSDP2 gathers per transformer block: the running block and the prefetched one; under
        // PP nothing is resharded (the stage's weights are counted whole instead).
        if (p.pp > 1) {
            return {};
        }
        // Under torchao's float8 all-gather the converted Linears arrive as float8 (float8.hpp).
        const double block = d(params_attention(m) + params_layer_norms(m) + params_mlp(m, m.ffn_hidden));
        const double linear = float8_linear_params(m, p, 1.0);
        return bytes(2.0 * (block / d(p.tp) * bytes_of(job.weights) -
                            linear * (bytes_of(job.weights) - float8_gather_bytes_per_param(job))));
    }
    return bytes(2.0 * largest_layer_matrix(m, p) * bytes_of(job.weights));
}

Bytes embedding_activation_bytes(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    return bytes(tokens_per_gpu(job, p) * d(m.hidden) / (p.sp ? d(p.tp) : 1.0));
}

Bytes moe_dispatch_buffer_bytes(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    if (!m.moe.enabled()) {
        return {};
    }
    const double ab = activation_bytes(job);
    const double t = d(p.tp);
    const double copies = tokens_per_gpu(job, p) * d(m.moe.top_k) / t;  // routed from this GPU
    const double load = rank_load_ratio(m, job, p);
    const double got = copies * d(expert_tp(p)) * load;  // rows at this GPU's experts
    const double h = d(moe_token_width(m));  // a dispatched row (LatentMoE: the latent)
    const double inner = (m.mlp == MlpKind::swiglu ? 3.0 : 2.0) * ab * tokens_per_gpu(job, p) *
                         d(m.moe.top_k) * d(m.moe.expert_ffn_hidden) / t;
    // The expert outputs the combine keeps for the probabilities' gradient: only where the
    // probabilities scale them after the experts (the stack's [moe] probs_in_experts).
    const double outputs = job.stack.moe_probs_in_experts ? 0.0 : ab * h * got;
    return bytes(ab * h * (got - copies) + outputs + inner * (load - 1.0) + 12.0 * copies);
}

}  // namespace cleave
