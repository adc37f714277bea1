#include "core/model.hpp"

#include <algorithm>

namespace cleave {

int64_t head_dim(const ModelSpec& m) {
    if (m.mla.enabled()) {
        return m.mla.qk_nope_dim + m.mla.qk_rope_dim;
    }
    if (m.head_size > 0) {
        return m.head_size;
    }
    return m.heads > 0 ? m.hidden / m.heads : 0;
}

int64_t v_head_dim(const ModelSpec& m) {
    return m.mla.enabled() ? m.mla.v_dim : head_dim(m);
}

int64_t kv_width(const ModelSpec& m) {
    return m.kv_heads * (head_dim(m) + v_head_dim(m));
}

bool is_windowed_layer(const ModelSpec& m, int64_t index) {
    return m.sliding_window > 0 && index >= 0 && static_cast<size_t>(index) < m.windowed.size() &&
           m.windowed[static_cast<size_t>(index)];
}

int64_t windowed_layer_count(const ModelSpec& m) {
    int64_t n = 0;
    for (int64_t i = 0; i < m.layers; ++i) {
        n += is_windowed_layer(m, i) ? 1 : 0;
    }
    return n;
}

bool is_hybrid(const ModelSpec& m) {
    return !m.layer_kinds.empty();
}

int64_t kind_count(const ModelSpec& m, LayerKind kind, int64_t first, int64_t last) {
    int64_t n = 0;
    const auto size = static_cast<int64_t>(m.layer_kinds.size());
    for (int64_t i = std::max<int64_t>(0, first); i < std::min(last, size); ++i) {
        n += m.layer_kinds[static_cast<size_t>(i)] == kind ? 1 : 0;
    }
    return n;
}

char layer_kind_letter(LayerKind kind) {
    switch (kind) {
    case LayerKind::mamba:
        return 'M';
    case LayerKind::attention:
        return '*';
    case LayerKind::mlp:
        return '-';
    case LayerKind::moe:
        return 'E';
    case LayerKind::gdn:
        return 'G';
    }
    return '?';
}

// gdn.py / common.py _GDNBase: in_proj h x (2 qk + 2 v + 2 v_heads), conv1d (2 qk + v) x kernel
// (conv_bias False), dt_bias and A_log v_heads each, out_norm RMSNorm(v_head_dim), out_proj
// v x h; no linear biases (Qwen3-Next). HF Qwen3NextGatedDeltaNet holds the same tensors
// (in_proj_qkvz, in_proj_ba, conv1d, dt_bias, A_log, norm, out_proj).
int64_t params_gdn_layer(const ModelSpec& m) {
    const GdnSpec& g = m.gdn;
    const int64_t h = m.hidden;
    return h * g.in_proj_dim() + g.conv_dim() * g.conv_kernel + 2 * g.v_heads + g.v_head_dim +
           g.v_dim() * h + params_norm(m, h);
}

// in_proj h x (2 d_inner + 2 groups state + heads) (mamba_mixer.py: z x B C dt), conv1d over
// x B C: (d_inner + 2 groups state) x (kernel + 1 bias), dt_bias / A_log / D per head, the gated
// norm's weight (d_inner), out_proj d_inner x h; no linear biases (use_bias false in Nemotron-H).
int64_t params_mamba_layer(const ModelSpec& m) {
    const MambaSpec& a = m.mamba;
    const int64_t h = m.hidden;
    const int64_t di = a.d_inner();
    const int64_t bc = 2 * a.groups * a.state;
    const int64_t in_proj = h * (2 * di + bc + a.heads);
    const int64_t conv = (di + bc) * (a.conv_kernel + 1);
    return in_proj + conv + 3 * a.heads + di + di * h + params_norm(m, h);
}

bool is_moe_layer(const ModelSpec& m, int64_t index) {
    if (is_hybrid(m)) {
        return index >= 0 && static_cast<size_t>(index) < m.layer_kinds.size() &&
               m.layer_kinds[static_cast<size_t>(index)] == LayerKind::moe;
    }
    if (!m.moe.enabled() || index < m.moe.first_dense_layers) {
        return false;
    }
    const int64_t freq = m.moe.layer_freq > 0 ? m.moe.layer_freq : 1;
    return (index - m.moe.first_dense_layers) % freq == 0;
}

int64_t params_norm(const ModelSpec& m, int64_t width) {
    return m.norm == NormKind::layernorm ? 2 * width : width;
}

namespace {

// MLA (DeepSeek-V3 modeling_deepseek.py DeepseekV3Attention): q_a_proj h x q_lora, q_a_layernorm,
// q_b_proj q_lora x a(nope+rope) (or q_proj h x a(nope+rope) without q_lora);
// kv_a_proj_with_mqa h x (kv_lora + rope), kv_a_layernorm, kv_b_proj kv_lora x a(nope+v);
// o_proj a v x h. No biases (attention_bias = false in every published MLA config).
int64_t params_mla(const ModelSpec& m) {
    const MlaSpec& a = m.mla;
    const int64_t h = m.hidden;
    const int64_t q_out = m.heads * (a.qk_nope_dim + a.qk_rope_dim);
    const int64_t q = a.q_lora_rank > 0 ? h * a.q_lora_rank + params_norm(m, a.q_lora_rank) +
                                              a.q_lora_rank * q_out
                                        : h * q_out;
    const int64_t kv = h * (a.kv_lora_rank + a.qk_rope_dim) + params_norm(m, a.kv_lora_rank) +
                       a.kv_lora_rank * m.heads * (a.qk_nope_dim + a.v_dim);
    return q + kv + m.heads * a.v_dim * h;
}

}  // namespace

// Q is h x (a d), K and V are h x (kv_heads d) (GQA, Ainslie et al. 2023), O is (a d) x h; a d = h
// unless the model states head_dim. Qwen2 has biases on Q, K and V but not on O (qkv_bias without
// linear_bias). Qwen3's q_norm / k_norm are RMSNorm(head_dim) shared by the heads
// (modeling_qwen3_moe.py); GPT-OSS's sinks are one parameter per head (modeling_gpt_oss.py).
int64_t params_attention(const ModelSpec& m) {
    if (m.mla.enabled()) {
        return params_mla(m);
    }
    const int64_t h = m.hidden;
    const int64_t q = m.heads * head_dim(m);
    const int64_t kv = m.kv_heads * head_dim(m);
    const int64_t gate = m.attn_output_gate ? h * q : 0;  // q_proj emits q and its gate
    const int64_t weights = 2 * h * q + 2 * h * kv + gate;
    const int64_t qkv_biases = (m.linear_bias || m.qkv_bias) ? q + 2 * kv : 0;
    const int64_t biases = qkv_biases + (m.linear_bias ? h : 0);
    const int64_t norms = m.qk_norm ? 2 * params_norm(m, head_dim(m)) : 0;
    return weights + biases + norms + (m.attention_sinks ? m.heads : 0);
}

// GeLU MLP: h x f and f x h (+ f + h biases); SwiGLU: gate, up (h x f) and down (f x h).
int64_t params_mlp(const ModelSpec& m, int64_t ffn) {
    const int64_t h = m.hidden;
    if (m.mlp == MlpKind::swiglu) {
        return 3 * h * ffn + (m.linear_bias ? 2 * ffn + h : 0);
    }
    return 2 * h * ffn + (m.linear_bias ? ffn + h : 0);
}

int64_t params_layer_norms(const ModelSpec& m) {
    return (m.sandwich_norms ? 4 : 2) * params_norm(m, m.hidden);
}

int64_t params_router(const ModelSpec& m) {
    return m.hidden * m.moe.experts + (m.moe.router_bias ? m.moe.experts : 0);
}

int64_t params_shared_expert(const ModelSpec& m) {
    return m.moe.shared_ffn_hidden > 0
               ? params_mlp(m, m.moe.shared_ffn_hidden) + (m.moe.shared_gate ? m.hidden : 0)
               : 0;
}

// Megatron-Core moe_layer.py: fc1_latent_proj TELinear(hidden, latent), fc2_latent_proj
// TELinear(latent, hidden), bias = add_bias_linear.
int64_t params_latent_proj(const ModelSpec& m) {
    const int64_t l = m.moe.latent;
    return l > 0 ? 2 * m.hidden * l + (m.linear_bias ? l + m.hidden : 0) : 0;
}

int64_t params_moe_dense(const ModelSpec& m) {
    return params_router(m) + params_shared_expert(m) + params_latent_proj(m);
}

int64_t moe_token_width(const ModelSpec& m) {
    return m.moe.latent > 0 ? m.moe.latent : m.hidden;
}

// Megatron-Core experts.py: fc1 input_size = moe_latent_size when set, fc2 output likewise.
int64_t params_expert(const ModelSpec& m) {
    const int64_t w = moe_token_width(m);
    const int64_t f = m.moe.expert_ffn_hidden;
    if (m.mlp == MlpKind::swiglu) {
        return 3 * w * f + (m.linear_bias ? 2 * f + w : 0);
    }
    return 2 * w * f + (m.linear_bias ? f + w : 0);
}

// One block + its pre-norm (Megatron-Core MambaLayer / TransformerLayer with only the
// self-attention or only the MLP submodule, as the hybrid stack builds them).
int64_t params_hybrid_layer(const ModelSpec& m, LayerKind kind) {
    const int64_t norm = params_norm(m, m.hidden);
    switch (kind) {
    case LayerKind::mamba:
        return params_mamba_layer(m);
    case LayerKind::attention:
        return params_attention(m) + norm;
    case LayerKind::mlp:
        return params_mlp(m, m.ffn_hidden) + norm;
    case LayerKind::moe:
        return params_moe_dense(m) + m.moe.experts * params_expert(m) + norm;
    case LayerKind::gdn:
        return params_gdn_layer(m);
    }
    return 0;
}

int64_t params_layer(const ModelSpec& m, int64_t index) {
    if (is_hybrid(m)) {
        return params_hybrid_layer(m, m.layer_kinds[static_cast<size_t>(index)]);
    }
    const int64_t base = params_attention(m) + params_layer_norms(m);
    if (is_moe_layer(m, index)) {
        return base + params_moe_dense(m) + m.moe.experts * params_expert(m);
    }
    return base + params_mlp(m, m.ffn_hidden);
}

int64_t params_per_layer(const ModelSpec& m) {
    return params_attention(m) + params_layer_norms(m) + params_mlp(m, m.ffn_hidden);
}

int64_t params_embedding(const ModelSpec& m) {
    const int64_t positions = m.positions == PositionKind::learned ? m.seq_len * m.hidden : 0;
    return m.vocab * m.hidden + positions;
}

int64_t params_head(const ModelSpec& m) {
    return params_norm(m, m.hidden) + (m.tied_embeddings ? 0 : m.vocab * m.hidden);
}

int64_t params_total(const ModelSpec& m) {
    int64_t total = params_embedding(m) + params_head(m);
    for (int64_t i = 0; i < m.layers; ++i) {
        total += params_layer(m, i);
    }
    return total;
}

int64_t params_stage(const ModelSpec& m, int64_t pp, int64_t stage) {
    const int64_t per_stage = m.layers / pp;
    int64_t total = 0;
    for (int64_t i = stage * per_stage; i < (stage + 1) * per_stage; ++i) {
        total += params_layer(m, i);
    }
    if (stage == 0) {
        total += params_embedding(m);
    }
    if (stage == pp - 1) {
        total += params_head(m);
        if (m.tied_embeddings && pp > 1) {
            total += m.vocab * m.hidden;
        }
    }
    return total;
}

int64_t params_active(const ModelSpec& m) {
    if (!m.moe.enabled()) {
        return params_total(m);
    }
    int64_t total = params_embedding(m) + params_head(m);
    for (int64_t i = 0; i < m.layers; ++i) {
        if (is_hybrid(m) && is_moe_layer(m, i)) {
            total += params_layer(m, i) - (m.moe.experts - m.moe.top_k) * params_expert(m);
        } else if (is_moe_layer(m, i)) {
            total += params_attention(m) + params_layer_norms(m) + params_moe_dense(m) +
                     m.moe.top_k * params_expert(m);
        } else {
            total += params_layer(m, i);
        }
    }
    return total;
}

// Megatron-Core MultiTokenPredictionLayer (multi_token_prediction.py): enorm, hnorm, eh_proj
// (2h -> h, no bias), one transformer layer of the main model's last-layer kind, final_layernorm.
int64_t params_mtp(const ModelSpec& m) {
    if (m.mtp_layers <= 0 || m.layers <= 0) {
        return 0;
    }
    int64_t block = params_layer(m, m.layers - 1);
    if (is_hybrid(m) && !m.mtp_kinds.empty()) {
        // Megatron-Bridge's hybrid MTP block (mtp_hybrid_override_pattern): those layers, each
        // one block with its pre-norm as in the main stack.
        block = 0;
        for (const LayerKind k : m.mtp_kinds) {
            block += params_hybrid_layer(m, k);
        }
    }
    return m.mtp_layers * (block + 2 * m.hidden * m.hidden + 3 * params_norm(m, m.hidden));
}

}  // namespace cleave
