#include "costmodel/flops.hpp"

#include <algorithm>

namespace cleave {

namespace {

double d(int64_t x) {
    return static_cast<double>(x);
}

double mlp_matrices(const ModelSpec& m) {
    return m.mlp == MlpKind::swiglu ? 3.0 : 2.0;
}

}  // namespace

double tokens_per_gpu(const JobSpec& job, const Plan& p) {
    return d(p.mbs) * d(job.seq_len) / d(std::max<int64_t>(1, p.cp));
}

LayerGemms layer_gemms(const ModelSpec& m, const JobSpec& job, const Plan& p, bool moe) {
    const double t = d(p.tp);
    const double tok = tokens_per_gpu(job, p);
    const double s = d(job.seq_len);
    const double hd = d(head_dim(m));
    const double q_dim = d(m.heads) * hd;
    const double kv_dim = d(m.kv_heads) * hd;
    const double h = d(m.hidden);
    const double heads_local = d(p.mbs) * d(m.heads) / t;
    const double in_mult = m.mlp == MlpKind::swiglu ? 2.0 : 1.0;
    LayerGemms g;
    g.qkv = {tok, (q_dim + 2.0 * kv_dim) / t, h, 1.0};
    g.score = {s / d(p.cp), s, hd, heads_local};
    g.attn_v = {s / d(p.cp), hd, s, heads_local};
    g.proj = {tok, h, q_dim / t, 1.0};
    if (moe) {
        const double local_experts = d(m.moe.experts) / d(p.ep);
        const double per_expert = tok * d(m.moe.top_k) / local_experts;
        const double fe = d(m.moe.expert_ffn_hidden);
        g.mlp_in = {per_expert, in_mult * fe / t, h, local_experts};
        g.mlp_out = {per_expert, h, fe / t, local_experts};
        g.router = {tok, d(m.moe.experts), h, 1.0};
    } else {
        const double f = d(m.ffn_hidden);
        g.mlp_in = {tok, in_mult * f / t, h, 1.0};
        g.mlp_out = {tok, h, f / t, 1.0};
    }
    return g;
}

Flops forward_flops(const LayerGemms& g) {
    return gemm_flops(g.qkv) + gemm_flops(g.score) + gemm_flops(g.attn_v) + gemm_flops(g.proj) +
           gemm_flops(g.mlp_in) + gemm_flops(g.mlp_out) + gemm_flops(g.router);
}

double gemm_params_active(const ModelSpec& m, bool moe) {
    const double h = d(m.hidden);
    const double hd = d(head_dim(m));
    const double attn = 2.0 * h * d(m.heads) * hd + 2.0 * h * d(m.kv_heads) * hd;
    if (moe) {
        return attn + d(m.moe.top_k) * mlp_matrices(m) * h * d(m.moe.expert_ffn_hidden) +
               h * d(m.moe.experts);
    }
    return attn + mlp_matrices(m) * h * d(m.ffn_hidden);
}

int64_t moe_layers_in(const ModelSpec& m, int64_t first, int64_t last) {
    if (!m.moe.enabled()) {
        return 0;
    }
    const int64_t freq = std::max<int64_t>(1, m.moe.layer_freq);
    // Count i in [max(first, f0), last) with (i - f0) % freq == 0.
    const int64_t f0 = m.moe.first_dense_layers;
    const int64_t lo = std::max(first, f0);
    if (lo >= last) {
        return 0;
    }
    const auto count_below = [&](int64_t x) { return x <= f0 ? 0 : (x - f0 + freq - 1) / freq; };
    return count_below(last) - count_below(lo);
}

namespace {

// Forward FLOPs of one sequence through every layer (GEMMs + attention core), no logits.
double layers_forward_per_sequence(const ModelSpec& m, double s) {
    const int64_t n_moe = moe_layers_in(m, 0, m.layers);
    const double n_dense = d(m.layers - n_moe);
    const double attn_core = 4.0 * s * s * d(m.heads) * d(head_dim(m));
    return n_dense * (2.0 * s * gemm_params_active(m, false) + attn_core) +
           d(n_moe) * (2.0 * s * gemm_params_active(m, true) + attn_core);
}

}  // namespace

Flops model_flops(const ModelSpec& m, const JobSpec& job) {
    const double s = d(job.seq_len);
    const double logits = 2.0 * s * d(m.hidden) * d(m.vocab);
    return flop(3.0 * d(job.global_batch) * (layers_forward_per_sequence(m, s) + logits));
}

Flops hardware_flops(const ModelSpec& m, const JobSpec& job, Recompute r) {
    const double s = d(job.seq_len);
    const double b = d(job.global_batch);
    switch (r) {
    case Recompute::none:
        return model_flops(m, job);
    case Recompute::full:
        return model_flops(m, job) + flop(b * layers_forward_per_sequence(m, s));
    case Recompute::selective:
        // 72 B s L h^2 * s/(6h) = 12 B s^2 h L: the paper's count for the attention core.
        return model_flops(m, job) +
               flop(3.0 * b * d(m.layers) * 4.0 * s * s * d(m.heads) * d(head_dim(m)));
    }
    return model_flops(m, job);
}

}  // namespace cleave
