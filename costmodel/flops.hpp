#pragma once
// FLOP counts: the GEMMs of one transformer layer after the TP/CP/EP split, and the whole-job
// model / hardware FLOPs of Korthikanti et al. 2022, App. A, generalised to GQA, SwiGLU and MoE.

#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "core/units.hpp"

#include <cstdint>

namespace cleave {

/// `count` independent GEMMs of shape (m x k) * (k x n): 2*m*n*k*count FLOPs.
struct GemmShape {
    double m = 0.0;
    double n = 0.0;
    double k = 0.0;
    double count = 1.0;

    bool operator==(const GemmShape&) const = default;
};

[[nodiscard]] constexpr Flops gemm_flops(const GemmShape& g) {
    return flop(2.0 * g.m * g.n * g.k * g.count);
}

/// Forward GEMMs of one layer on one GPU for one micro-batch (backward: dgrad + wgrad, each the
/// same FLOPs). MLP fields describe the dense MLP, or for an MoE layer all local experts together
/// (count = experts / ep, m = tokens routed to one expert).
struct LayerGemms {
    GemmShape qkv;      // T x h  ->  (a + 2 a_kv) d / t; MLA: the down projections (below)
    GemmShape score;    // Q K^T: b a/t batches of (s/cp x d) (d x s)
    GemmShape attn_v;   // softmax(.) V: b a/t batches of (s/cp x s) (s x d)
    GemmShape proj;     // T x a d / t -> h
    GemmShape mlp_in;   // T x h -> f/t (x2 for SwiGLU gate + up)
    GemmShape mlp_out;  // T x f/t -> h
    GemmShape router;   // MoE router T x h -> experts (zero for dense layers)
    // Multi-head latent attention (zero otherwise). qkv is then T x h -> q_lora + kv_lora + rope,
    // replicated on every TP rank (Megatron-Core MLA: the down projections are not split);
    // q_up T x q_lora -> a (nope + rope) / t (T x h -> ... without a q latent); kv_up
    // T x kv_lora -> a (nope + v) / t.
    GemmShape q_up;
    GemmShape kv_up;
    GemmShape
        shared;  // MoE shared expert MLP in + out together: T x h -> 2 or 3 f_s / t (zero: none)
    // LatentMoE (zero otherwise): fc1_latent_proj T_sp x h -> latent before the dispatch and
    // fc2_latent_proj T_sp x latent -> h after the combine, whole on every TP rank (T_sp: this
    // GPU's SP shard of tokens, the rows the router and dispatcher see).
    GemmShape latent_in;
    GemmShape latent_out;

    bool operator==(const LayerGemms&) const = default;
};

/// What one priced layer holds: a transformer layer's attention and MLP (or MoE), or one of the
/// two alone, as a hybrid model's * and - / E layers are (core LayerKind).
enum class LayerShape : uint8_t { full, attention, ffn };

/// The shape a hybrid layer of `kind` is priced as (mamba: none; see mamba_gemms).
[[nodiscard]] LayerShape shape_of(LayerKind kind);

/// Tokens of one micro-batch on one GPU: mbs * seq / cp.
[[nodiscard]] double tokens_per_gpu(const JobSpec& job, const Plan& p);

/// The GEMMs of layer kind `moe` (true: routed experts) for `p` (Megatron's column/row splits;
/// top_k routed tokens spread evenly over the experts).
[[nodiscard]] LayerGemms layer_gemms(
    const ModelSpec& m, const JobSpec& job, const Plan& p, bool moe, LayerShape shape = LayerShape::full);

/// Forward GEMMs of one Mamba-2 layer on one GPU for one micro-batch (Megatron-Core mamba_mixer.py
/// @d98e8a64: in_proj column-parallel over heads, out_proj row-parallel) and the tensor-core
/// work of the chunked SSD scan (Dao & Gu 2024, arXiv:2405.21060, Sec. 6 and its
/// ssd_combined.py): per chunk of Q tokens, C B^T per group, (C B^T o L) X, the chunk states
/// B^T X and their output C h per head. T tokens, H heads of width P, G groups, state N.
struct MambaGemms {
    GemmShape in_proj;    // T x h -> (2 d_inner + 2 G N + H) / t
    GemmShape out_proj;   // T x d_inner / t -> h
    GemmShape cb;         // (Q x N)(N x Q): T/Q chunks x G/t groups
    GemmShape scan_x;     // (Q x Q)(Q x P): T/Q chunks x H/t heads
    GemmShape states;     // (N x Q)(Q x P): T/Q chunks x H/t heads
    GemmShape state_out;  // (Q x N)(N x P): T/Q chunks x H/t heads

    bool operator==(const MambaGemms&) const = default;
};

[[nodiscard]] MambaGemms mamba_gemms(const ModelSpec& m, const JobSpec& job, const Plan& p);

/// Forward FLOPs of the SSD scan per token, all heads on one GPU (t = 1):
/// 2 Q N G + H (2 Q P + 4 N P) (the four products above divided by T).
[[nodiscard]] double mamba_scan_flops_per_token(const ModelSpec& m);

/// Forward GEMMs of one gated DeltaNet layer on one GPU for one micro-batch (Megatron-Core
/// ssm/gated_delta_net/gdn.py @d98e8a64: in_proj column-parallel over heads, out_proj
/// row-parallel) and the tensor-core work of the chunked gated delta rule (the WY form of Yang et
/// al. 2024, arXiv:2406.06484 Sec. 3.2, with the decay of Gated DeltaNet, arXiv:2412.06464
/// Sec. 3.3; flash-linear-attention chunk_gated_delta_rule): per chunk of C tokens and value head
/// (q and k repeated to the value heads), A = K K^T, the inverse (I + A)^-1 applied to beta K and
/// beta V (W, U), Q K^T and its product with the new values U - W S, and three products of a chunk
/// with the d_k x d_v state (W S, Q S, and the update K^T (U - W S)). The triangular solve
/// (C^3 / 3 per chunk and head: 0.7% of the rest at C = 64, d_k = d_v = 128) is left out.
struct GdnGemms {
    GemmShape in_proj;   // T x h -> in_proj_dim / t
    GemmShape out_proj;  // T x v_dim / t -> h
    GemmShape kk;        // (C x d_k)(d_k x C): T/C chunks x Hv/t heads
    GemmShape wu;        // (C x C)(C x (d_k + d_v))
    GemmShape qk;        // (C x d_k)(d_k x C)
    GemmShape attn_v;    // (C x C)(C x d_v)
    GemmShape state;     // (C x d_k)(d_k x d_v): three per chunk and head

    bool operator==(const GdnGemms&) const = default;
};

[[nodiscard]] GdnGemms gdn_gemms(const ModelSpec& m, const JobSpec& job, const Plan& p);

/// Forward FLOPs of the chunked gated delta rule per token, all heads on one GPU (t = 1):
/// Hv (2 C (3 d_k + 2 d_v) + 6 d_k d_v) (the five products above divided by T).
[[nodiscard]] double gdn_scan_flops_per_token(const ModelSpec& m);

/// GEMM weights of one gated DeltaNet layer (in_proj + out_proj).
[[nodiscard]] double gdn_gemm_params(const ModelSpec& m);

/// Forward FLOPs of the whole list.
[[nodiscard]] Flops forward_flops(const LayerGemms& g);

/// GEMM weights per token of layer kind `moe`, active ones only (no biases, no norms):
/// attention 2h*ad + 2h*a_kv*d (MLA: the down and up projections + output), MLP 2hf or 3hf
/// (SwiGLU), MoE top_k experts + router + shared expert.
[[nodiscard]] double gemm_params_active(const ModelSpec& m, bool moe, LayerShape shape = LayerShape::full);

/// GEMM weights of one Mamba-2 layer (in_proj + out_proj).
[[nodiscard]] double mamba_gemm_params(const ModelSpec& m);

/// Number of MoE layers among layers [first, last).
[[nodiscard]] int64_t moe_layers_in(const ModelSpec& m, int64_t first, int64_t last);

/// Forward FLOPs of the attention core of one sequence summed over all attention layers (every
/// layer of a transformer, the * layers of a hybrid model): per layer
/// 2 s k a (d_qk + d_v) with k = s keys per query, k = min(s, window) on windowed layers (no
/// causal halving, as Korthikanti counts; MLA: d_qk = nope + rope). `span` (default s): the keys
/// of a query's own sample when the sequence is a pack (costmodel/packing.hpp attention_span),
/// k = span, min(span, window) on windowed layers.
[[nodiscard]] double attention_core_per_sequence(const ModelSpec& m, double s, double span = -1.0);

/// Model FLOPs per iteration (fwd + bwd = 3 x fwd), Korthikanti et al. 2022 App. A:
/// 3 B [sum_l (2 s G_l + 4 s^2 a d) + 2 s h V]; for GPT (G = 12h^2) this is
/// 72 B s L h^2 (1 + s/(6h) + V/(12 L h)). With job.mtp, each MTP module adds one more layer
/// of the last layer's kind, its 2h x h projection and one more logits GEMM (Megatron-Bridge
/// flop_utils.py num_floating_point_operations @7af9601c9d: mtp_num_layers extra layers +
/// 2h^2 eh_proj + logits x (mtp + 1)). Under --peft lora the frozen linears and output layer do
/// no weight gradient, - B (2 s L G + 2 s h V), and the adapters add 6 B s L P_lora (the FLOPs
/// the hardware does: MFU is then the GPU's share of its peak, not 6N-based). Packed sequences
/// count the core over each sample: 4 s^2 a d becomes 4 s L a d (L = attention_span()).
[[nodiscard]] Flops model_flops(const ModelSpec& m, const JobSpec& job);

/// Hardware FLOPs per iteration with recomputation, in the paper's convention: full adds one
/// forward of every layer, 96 B s L h^2 (1 + s/(6h) + V/(16 L h)); selective adds
/// 72 B s L h^2 * s/(6h) (Korthikanti App. A, HFU of Table 5: 1 + s/(3h) + V/(12 L h)).
[[nodiscard]] Flops hardware_flops(const ModelSpec& m, const JobSpec& job, Recompute r);

}  // namespace cleave
