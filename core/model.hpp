#pragma once
// Model description: a decoder-only transformer, GPT-style or Llama-style, optionally MoE, with
// multi-head latent attention (DeepSeek-V2/V3), sliding-window layers (GPT-OSS) and multi-token
// prediction layers kept apart.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cleave {

enum class MlpKind { gelu, swiglu };         // swiglu: three matrices (gate, up, down)
enum class NormKind { layernorm, rmsnorm };  // layernorm has a bias, rmsnorm does not
enum class PositionKind { learned, rope };   // learned adds a seq_len x hidden table

struct MoeSpec {
    int64_t experts = 0;             // routed experts per MoE layer; 0 = dense model
    int64_t top_k = 0;               // experts each token is routed to
    int64_t expert_ffn_hidden = 0;   // inner size of one expert's MLP (one branch for SwiGLU)
    int64_t layer_freq = 1;          // every layer_freq-th layer is MoE (1 = every layer)
    int64_t first_dense_layers = 0;  // leading dense layers before MoE layers start
    /// Inner size of the always-active shared expert MLP of an MoE layer (DeepSeek-V3:
    /// n_shared_experts x moe_intermediate_size); 0 = none.
    int64_t shared_ffn_hidden = 0;
    /// One bias per routed expert on the router (GPT-OSS router.bias; DeepSeek-V3's
    /// e_score_correction_bias): `experts` parameters per MoE layer.
    bool router_bias = false;
    /// Group-limited routing as the model was trained (DeepSeek-V3 config.json n_group 8,
    /// topk_group 4): experts in router_groups groups, a token's experts from its best
    /// router_group_topk; 0 = not limited. A job's --moe-router-num-groups overrides it.
    int64_t router_groups = 0;
    int64_t router_group_topk = 0;
    /// LatentMoE (Nemotron 3 Super, HF moe_latent_size / Megatron --moe-latent-size): the routed
    /// experts work on a latent of this width; each token is projected h -> latent before the
    /// dispatch and latent -> h after the combine (Megatron-Core moe_layer.py fc1_latent_proj /
    /// fc2_latent_proj @d98e8a64, parallel_mode "duplicated": whole on every TP rank), so the
    /// all-to-all and the experts' inputs and outputs are latent wide. 0 = none.
    int64_t latent = 0;
    /// A sigmoid gate on the shared expert's output (Qwen2-MoE / Qwen3-Next shared_expert_gate,
    /// Megatron --moe-shared-expert-gate): one h -> 1 linear per MoE layer.
    bool shared_gate = false;

    [[nodiscard]] bool enabled() const { return experts > 0; }

    bool operator==(const MoeSpec&) const = default;
};

/// Multi-head latent attention (DeepSeek-V2 paper, Liu et al. 2024, Sec. 2.1.2): queries and keys
/// / values go through low-rank latents; each head's query and key are a no-position part
/// (qk_nope_dim) plus a decoupled rotary part (qk_rope_dim, one key part shared by all heads).
struct MlaSpec {
    int64_t q_lora_rank = 0;   // query latent width; 0 = plain h x heads*(nope+rope) projection
    int64_t kv_lora_rank = 0;  // key/value latent width; 0 = no MLA
    int64_t qk_nope_dim = 0;   // per-head query/key width without position
    int64_t qk_rope_dim = 0;   // per-head rotary query/key width (the key part shared by heads)
    int64_t v_dim = 0;         // per-head value width

    [[nodiscard]] bool enabled() const { return kv_lora_rank > 0; }

    bool operator==(const MlaSpec&) const = default;
};

/// Mamba-2 mixer (Dao & Gu 2024, "Transformers are SSMs", arXiv:2405.21060; Megatron-Core
/// megatron/core/ssm/mamba_mixer.py @d98e8a64): in_proj h -> [z, x, B, C, dt] = 2 d_inner +
/// 2 groups state + heads, a depthwise causal conv over [x, B, C], the chunked SSD scan, a
/// gated RMSNorm over d_inner, out_proj d_inner -> h; d_inner = heads x head_dim.
struct MambaSpec {
    int64_t heads = 0;        // mamba_num_heads; 0 = no Mamba layer
    int64_t head_dim = 0;     // mamba_head_dim
    int64_t state = 0;        // ssm_state_size (d_state)
    int64_t groups = 1;       // n_groups: B and C are shared by heads / groups heads
    int64_t conv_kernel = 4;  // conv_kernel (d_conv)
    int64_t chunk = 128;      // chunk_size of the SSD scan

    [[nodiscard]] bool enabled() const { return heads > 0; }
    [[nodiscard]] int64_t d_inner() const { return heads * head_dim; }

    bool operator==(const MambaSpec&) const = default;
};

/// Gated DeltaNet mixer (Yang, Kautz & Hatamizadeh 2024, "Gated Delta Networks", arXiv:2412.06464;
/// Megatron-Core megatron/core/ssm/gated_delta_net/gdn.py @d98e8a64, transformers
/// modeling_qwen3_next.py Qwen3NextGatedDeltaNet): in_proj h -> [q, k, v, z, beta, alpha] =
/// 2 qk_dim + 2 v_dim + 2 v_heads, a depthwise causal conv (no bias) over [q, k, v], L2-normed q
/// and k (repeated to the value heads), the chunked gated delta rule over chunks of 64 tokens
/// (flash-linear-attention chunk_gated_delta_rule), an RMSNorm over each head's value width gated
/// by SiLU(z), out_proj v_dim -> h. qk_dim = qk_heads x qk_head_dim, v_dim = v_heads x v_head_dim.
struct GdnSpec {
    int64_t qk_heads = 0;     // linear_num_key_heads
    int64_t v_heads = 0;      // linear_num_value_heads (a multiple of qk_heads); 0 = no GDN layer
    int64_t qk_head_dim = 0;  // linear_key_head_dim
    int64_t v_head_dim = 0;   // linear_value_head_dim
    int64_t conv_kernel = 4;  // linear_conv_kernel_dim
    int64_t chunk = 64;       // chunk size of the chunked delta rule (gdn.py: self.chunk_size = 64)

    [[nodiscard]] bool enabled() const { return v_heads > 0; }
    [[nodiscard]] int64_t qk_dim() const { return qk_heads * qk_head_dim; }
    [[nodiscard]] int64_t v_dim() const { return v_heads * v_head_dim; }
    /// Width of in_proj's output: q, k, v, the output gate z, beta and alpha per value head.
    [[nodiscard]] int64_t in_proj_dim() const { return 2 * qk_dim() + 2 * v_dim() + 2 * v_heads; }
    /// Channels of the causal conv: q, k and v.
    [[nodiscard]] int64_t conv_dim() const { return 2 * qk_dim() + v_dim(); }

    bool operator==(const GdnSpec&) const = default;
};

/// What one layer of a hybrid model holds, as Megatron-Core's --hybrid-layer-pattern writes it
/// (megatron/core/models/hybrid/hybrid_layer_allocation.py @d98e8a64: M Mamba-2, * attention,
/// - MLP, E MoE, G gated DeltaNet), each with its own pre-norm. A model with no layer_kinds is a
/// transformer: every layer attention + an MLP (or MoE, is_moe_layer).
enum class LayerKind : uint8_t { mamba, attention, mlp, moe, gdn };

/// Number of LayerKind values (arrays indexed by kind).
inline constexpr std::size_t layer_kind_count = 5;

struct ModelSpec {
    std::string name;
    int64_t layers = 0;
    int64_t hidden = 0;
    int64_t heads = 0;
    int64_t kv_heads = 0;    // == heads for multi-head attention; fewer for GQA/MQA
    int64_t ffn_hidden = 0;  // MLP inner size (one branch for SwiGLU)
    int64_t vocab = 0;
    int64_t seq_len = 0;  // default training sequence length (learned positions use it too)
    MlpKind mlp = MlpKind::gelu;
    NormKind norm = NormKind::layernorm;
    PositionKind positions = PositionKind::learned;
    bool tied_embeddings = true;
    bool linear_bias = true;  // biases on QKV / output / MLP matrices (GPT: yes, Llama: no)
    bool qkv_bias = false;    // biases on Q, K and V only (Qwen2); implied by linear_bias
    /// Per-head width of Q, K and V when the model states it apart from hidden / heads (Qwen3,
    /// GPT-OSS: head_dim; Megatron kv_channels); 0 = hidden / heads.
    int64_t head_size = 0;
    bool qk_norm = false;          // RMSNorm over each head's q and k (Qwen3): 2 x head_dim params
    bool attention_sinks = false;  // one learned softmax logit per head (GPT-OSS): heads params
    /// Gated attention (Qwen3-Next, Megatron --attention-output-gate): the query projection also
    /// emits a gate of heads x head_dim, and the attention output is multiplied by its sigmoid
    /// before the output projection (h x heads head_dim more weights).
    bool attn_output_gate = false;
    /// GPT-OSS's GLU: x sigma(1.702 x) (x_up + 1), clamped at 7 (Megatron quick_gelu +
    /// activation_func_clamp_value). Same FLOPs as SwiGLU; Megatron-Bridge counts it ungated.
    bool clamped_glu = false;
    /// Squared-ReLU MLP, relu(x)^2 (Nemotron-4, Nemotron-H: up + down, priced as MlpKind::gelu's
    /// shapes; Megatron --squared-relu). Exported so the launched model has it.
    bool squared_relu = false;
    /// A norm after each block too, on its output before the residual add (Gemma 2 / 3:
    /// post_attention_layernorm and post_feedforward_layernorm beside the pre-norms): four norms a
    /// transformer layer instead of two (params, traffic, saved inputs).
    bool sandwich_norms = false;
    /// Keys a windowed layer's query attends to (GPT-OSS: 128); 0 = every layer attends fully.
    int64_t sliding_window = 0;
    /// windowed[i]: layer i uses the sliding window. Empty = no windowed layer; else size layers.
    std::vector<bool> windowed;
    /// Multi-token prediction modules (DeepSeek-V3 num_nextn_predict_layers): each one more
    /// transformer block + a 2h x h projection + 3 norms, sharing the embedding and output head.
    /// Kept apart: params_total and the FLOPs leave them out unless a job trains them
    /// (JobSpec::mtp).
    int64_t mtp_layers = 0;
    MlaSpec mla;
    MoeSpec moe;
    MambaSpec mamba;
    GdnSpec gdn;
    /// One entry per layer for a hybrid model (Nemotron-H); empty for a transformer.
    std::vector<LayerKind> layer_kinds;
    /// A hybrid model's MTP block, layer by layer (Nemotron 3 Super mtp_hybrid_override_pattern
    /// "*E": attention then MoE); empty = one layer of the main model's last kind.
    std::vector<LayerKind> mtp_kinds;

    bool operator==(const ModelSpec&) const = default;
};

/// True for a hybrid model (layer_kinds set): its layers are single blocks, not attention + MLP.
[[nodiscard]] bool is_hybrid(const ModelSpec& m);

/// Layers of `kind` among [first, last) of a hybrid model (0 for a transformer).
[[nodiscard]] int64_t kind_count(const ModelSpec& m, LayerKind kind, int64_t first, int64_t last);

/// The letter Megatron's --hybrid-layer-pattern writes for `kind` (M, *, -, E, G).
[[nodiscard]] char layer_kind_letter(LayerKind kind);

/// One Mamba-2 layer: in_proj, conv1d (weight + bias), dt_bias, A_log, D (one per head), the
/// gated RMSNorm over d_inner, out_proj, and the layer's pre-norm (Megatron-Core MambaLayer;
/// transformers modeling_nemotron_h.py NemotronHMamba2Mixer + NemotronHBlock.norm).
[[nodiscard]] int64_t params_mamba_layer(const ModelSpec& m);

/// One gated DeltaNet layer: in_proj, the conv1d weight (no bias), dt_bias and A_log (one per
/// value head), the gated RMSNorm's weight (v_head_dim, shared by the heads), out_proj, and the
/// layer's pre-norm.
[[nodiscard]] int64_t params_gdn_layer(const ModelSpec& m);

/// Width of one head's query and key: MLA nope + rope, else head_size or hidden / heads.
[[nodiscard]] int64_t head_dim(const ModelSpec& m);

/// Width of one head's value (MLA v_dim, else head_dim).
[[nodiscard]] int64_t v_head_dim(const ModelSpec& m);

/// Elements of K and V per token as the attention kernel sees them (after MLA's up-projection):
/// kv_heads x (head_dim + v_head_dim).
[[nodiscard]] int64_t kv_width(const ModelSpec& m);

/// True when layer `index` (0-based) attends over the sliding window only.
[[nodiscard]] bool is_windowed_layer(const ModelSpec& m, int64_t index);

/// Number of windowed layers among all layers.
[[nodiscard]] int64_t windowed_layer_count(const ModelSpec& m);

/// Parameters of one norm over `width` elements (LayerNorm: weight + bias; RMSNorm: weight).
[[nodiscard]] int64_t params_norm(const ModelSpec& m, int64_t width);

/// Router of one MoE layer: h x experts (+ experts with router_bias).
[[nodiscard]] int64_t params_router(const ModelSpec& m);

/// The shared expert MLP of one MoE layer (0 when the model has none).
[[nodiscard]] int64_t params_shared_expert(const ModelSpec& m);

/// LatentMoE's two projections of one MoE layer, h x latent and latent x h (+ biases with
/// linear_bias); 0 without a latent.
[[nodiscard]] int64_t params_latent_proj(const ModelSpec& m);

/// An MoE layer's tensors outside its routed experts: router, shared expert, latent projections.
[[nodiscard]] int64_t params_moe_dense(const ModelSpec& m);

/// One routed expert's MLP: as params_mlp with the expert's inner size, on the latent width
/// under LatentMoE.
[[nodiscard]] int64_t params_expert(const ModelSpec& m);

/// Width of a routed token (dispatched, and the experts' input and output): the latent under
/// LatentMoE, else hidden.
[[nodiscard]] int64_t moe_token_width(const ModelSpec& m);

/// True when layer `index` (0-based) is an MoE layer.
[[nodiscard]] bool is_moe_layer(const ModelSpec& m, int64_t index);

/// Parameters of the attention block of one layer: QKV (MLA: the q/kv down and up projections and
/// the latent norms) + output projection, with biases, q/k norms and sinks.
[[nodiscard]] int64_t params_attention(const ModelSpec& m);

/// Parameters of one dense MLP with inner size `ffn` (2 or 3 matrices, with biases).
[[nodiscard]] int64_t params_mlp(const ModelSpec& m, int64_t ffn);

/// Parameters of the two norms of one layer.
[[nodiscard]] int64_t params_layer_norms(const ModelSpec& m);

/// Parameters of layer `index`: attention + MLP (or router + all experts + shared expert) + norms.
/// A hybrid model's layer of `kind`: its block and pre-norm.
[[nodiscard]] int64_t params_hybrid_layer(const ModelSpec& m, LayerKind kind);

[[nodiscard]] int64_t params_layer(const ModelSpec& m, int64_t index);

/// Parameters of a dense layer (the per-layer figure reported for dense models).
[[nodiscard]] int64_t params_per_layer(const ModelSpec& m);

/// Input embedding (+ learned positions).
[[nodiscard]] int64_t params_embedding(const ModelSpec& m);

/// Final norm + output projection (0 extra for tied embeddings on a single stage).
[[nodiscard]] int64_t params_head(const ModelSpec& m);

/// Every parameter counted once (tied embeddings once).
[[nodiscard]] int64_t params_total(const ModelSpec& m);

/// Parameters that one pipeline stage holds before TP/EP splitting, `pp` even stages of
/// layers/pp layers. The first stage adds the embedding; the last stage adds the final norm and
/// the output projection (with tied embeddings and pp > 1, Megatron keeps a copy of the word
/// embedding on the last stage, so it is counted there too). Precondition: layers % pp == 0.
[[nodiscard]] int64_t params_stage(const ModelSpec& m, int64_t pp, int64_t stage);

/// Active parameters per token (MoE: only top_k experts count). Embedding and output head are
/// counted (DeepSeek-V3's and Qwen3's cards count them; MTP apart).
[[nodiscard]] int64_t params_active(const ModelSpec& m);

/// The multi-token-prediction modules: mtp_layers x (one transformer block shaped like the last
/// layer + the 2h x h projection + 3 norms); the embedding and output head are shared with the
/// main model (Megatron-Core multi_token_prediction.py; the HF checkpoint stores a copy of both).
[[nodiscard]] int64_t params_mtp(const ModelSpec& m);

}  // namespace cleave
