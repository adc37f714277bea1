#include "core/model.hpp"

namespace cleave {

int64_t head_dim(const ModelSpec& m) {
    return m.heads > 0 ? m.hidden / m.heads : 0;
}

bool is_moe_layer(const ModelSpec& m, int64_t index) {
    if (!m.moe.enabled() || index < m.moe.first_dense_layers) {
        return false;
    }
    const int64_t freq = m.moe.layer_freq > 0 ? m.moe.layer_freq : 1;
    return (index - m.moe.first_dense_layers) % freq == 0;
}

// Q and O are h x h; K and V are h x (kv_heads * head_dim) (GQA, Ainslie et al. 2023).
// Qwen2 has biases on Q, K and V but not on O (qkv_bias without linear_bias).
int64_t params_attention(const ModelSpec& m) {
    const int64_t h = m.hidden;
    const int64_t kv = m.kv_heads * head_dim(m);
    const int64_t weights = 2 * h * h + 2 * h * kv;
    const int64_t qkv_biases = (m.linear_bias || m.qkv_bias) ? h + 2 * kv : 0;
    const int64_t biases = qkv_biases + (m.linear_bias ? h : 0);
    return weights + biases;
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
    return m.norm == NormKind::layernorm ? 4 * m.hidden : 2 * m.hidden;
}

int64_t params_layer(const ModelSpec& m, int64_t index) {
    const int64_t base = params_attention(m) + params_layer_norms(m);
    if (is_moe_layer(m, index)) {
        const int64_t router = m.hidden * m.moe.experts;
        return base + router + m.moe.experts * params_mlp(m, m.moe.expert_ffn_hidden);
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
    const int64_t final_norm = m.norm == NormKind::layernorm ? 2 * m.hidden : m.hidden;
    return final_norm + (m.tied_embeddings ? 0 : m.vocab * m.hidden);
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
        if (is_moe_layer(m, i)) {
            total += params_attention(m) + params_layer_norms(m) + m.hidden * m.moe.experts +
                     m.moe.top_k * params_mlp(m, m.moe.expert_ffn_hidden);
        } else {
            total += params_layer(m, i);
        }
    }
    return total;
}

}  // namespace cleave
