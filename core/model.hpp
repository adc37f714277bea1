#pragma once
// Model description: a decoder-only transformer, GPT-style or Llama-style, optionally MoE.

#include <cstdint>
#include <string>

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

    [[nodiscard]] bool enabled() const { return experts > 0; }

    bool operator==(const MoeSpec&) const = default;
};

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
    MoeSpec moe;

    bool operator==(const ModelSpec&) const = default;
};

/// Hidden size of one attention head.
[[nodiscard]] int64_t head_dim(const ModelSpec& m);

/// True when layer `index` (0-based) is an MoE layer.
[[nodiscard]] bool is_moe_layer(const ModelSpec& m, int64_t index);

/// Parameters of the attention block of one layer (QKV + output projection, with biases).
[[nodiscard]] int64_t params_attention(const ModelSpec& m);

/// Parameters of one dense MLP with inner size `ffn` (2 or 3 matrices, with biases).
[[nodiscard]] int64_t params_mlp(const ModelSpec& m, int64_t ffn);

/// Parameters of the two norms of one layer.
[[nodiscard]] int64_t params_layer_norms(const ModelSpec& m);

/// Parameters of layer `index`: attention + MLP (or router + all experts) + norms.
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

/// Active parameters per token (MoE: only top_k experts count).
[[nodiscard]] int64_t params_active(const ModelSpec& m);

}  // namespace cleave
