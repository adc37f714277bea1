#include "costmodel/flops.hpp"
#include "costmodel/packing.hpp"
#include "costmodel/peft.hpp"
#include "costmodel/num.hpp"

#include <algorithm>

namespace cleave {

namespace {

using detail::d;

double mlp_matrices(const ModelSpec& m) {
    return m.mlp == MlpKind::swiglu ? 3.0 : 2.0;
}

}  // namespace

double tokens_per_gpu(const JobSpec& job, const Plan& p) {
    return d(p.mbs) * d(job.seq_len) / d(std::max<int64_t>(1, p.cp));
}

namespace {

// The attention projections: plain Q/K/V (GQA) or MLA's down and up projections.
void attention_gemms(const ModelSpec& m, double tok, double t, LayerGemms& g) {
    const double h = d(m.hidden);
    const double a = d(m.heads);
    if (!m.mla.enabled()) {
        const double hd = d(head_dim(m));
        const double q = m.attn_output_gate ? 2.0 : 1.0;  // the gate beside each query
        g.qkv = {tok, (q * a * hd + 2.0 * d(m.kv_heads) * hd) / t, h, 1.0};
        return;
    }
    // Megatron-Core MLASelfAttention (multi_latent_attention.py): linear_q_down_proj and
    // linear_kv_down_proj are duplicated across TP ranks, linear_q_up_proj / linear_kv_up_proj
    // column-parallel; without q_lora_rank, linear_q_proj is column-parallel from h.
    const MlaSpec& mla = m.mla;
    const double q_lora = d(mla.q_lora_rank);
    const double q_out = a * d(mla.qk_nope_dim + mla.qk_rope_dim) / t;
    g.qkv = {tok, q_lora + d(mla.kv_lora_rank + mla.qk_rope_dim), h, 1.0};
    g.q_up = {tok, q_out, mla.q_lora_rank > 0 ? q_lora : h, 1.0};
    g.kv_up = {tok, a * d(mla.qk_nope_dim + mla.v_dim) / t, d(mla.kv_lora_rank), 1.0};
}

}  // namespace

LayerShape shape_of(LayerKind kind) {
    return kind == LayerKind::attention ? LayerShape::attention : LayerShape::ffn;
}

LayerGemms layer_gemms(
    const ModelSpec& m, const JobSpec& job, const Plan& p, bool moe, LayerShape shape) {
    const double t = d(p.tp);
    const double tok = tokens_per_gpu(job, p);
    const double s = d(job.seq_len);
    const double qk_dim = d(head_dim(m));
    const double v_dim = d(v_head_dim(m));
    const double h = d(m.hidden);
    const double heads_local = d(p.mbs) * d(m.heads) / t;
    const double in_mult = m.mlp == MlpKind::swiglu ? 2.0 : 1.0;
    LayerGemms g;
    attention_gemms(m, tok, t, g);
    g.score = {s / d(p.cp), s, qk_dim, heads_local};
    g.attn_v = {s / d(p.cp), v_dim, s, heads_local};
    g.proj = {tok, h, d(m.heads) * v_dim / t, 1.0};
    if (moe) {
        const double local_experts = d(m.moe.experts) / d(p.ep);
        const double per_expert = tok * d(m.moe.top_k) / local_experts;
        const double fe = d(m.moe.expert_ffn_hidden);
        const double w = d(moe_token_width(m));  // hidden, or LatentMoE's latent
        g.mlp_in = {per_expert, in_mult * fe / t, w, local_experts};
        g.mlp_out = {per_expert, w, fe / t, local_experts};
        g.router = {tok, d(m.moe.experts), h, 1.0};
        // Shared expert: a dense MLP of every token, TP-split (Megatron-Core SharedExpertMLP).
        g.shared = {tok, (in_mult + 1.0) * d(m.moe.shared_ffn_hidden) / t, h, 1.0};
        if (m.moe.latent > 0) {
            const double rows = tok / (p.sp ? t : 1.0);
            g.latent_in = {rows, w, h, 1.0};
            g.latent_out = {rows, h, w, 1.0};
        }
    } else {
        const double f = d(m.ffn_hidden);
        g.mlp_in = {tok, in_mult * f / t, h, 1.0};
        g.mlp_out = {tok, h, f / t, 1.0};
    }
    if (shape == LayerShape::attention) {  // a hybrid model's attention layer: no MLP
        g.mlp_in = g.mlp_out = g.router = g.shared = g.latent_in = g.latent_out =
            GemmShape{0.0, 0.0, 0.0, 0.0};
    } else if (shape == LayerShape::ffn) {  // its MLP / MoE layer: no attention
        g.qkv = g.q_up = g.kv_up = g.score = g.attn_v = g.proj = GemmShape{0.0, 0.0, 0.0, 0.0};
    }
    return g;
}

MambaGemms mamba_gemms(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    const MambaSpec& a = m.mamba;
    const double t = d(p.tp);
    const double tok = tokens_per_gpu(job, p);
    const double h = d(m.hidden);
    const double q = d(a.chunk);
    const double n = d(a.state);
    const double hp = d(a.head_dim);
    const double chunks = tok / q;
    MambaGemms g;
    g.in_proj = {tok, d(2 * a.d_inner() + 2 * a.groups * a.state + a.heads) / t, h, 1.0};
    g.out_proj = {tok, h, d(a.d_inner()) / t, 1.0};
    g.cb = {q, q, n, chunks * d(a.groups) / t};
    g.scan_x = {q, hp, q, chunks * d(a.heads) / t};
    g.states = {n, hp, q, chunks * d(a.heads) / t};
    g.state_out = {q, hp, n, chunks * d(a.heads) / t};
    return g;
}

double mamba_scan_flops_per_token(const ModelSpec& m) {
    const MambaSpec& a = m.mamba;
    const double q = d(a.chunk);
    const double n = d(a.state);
    const double hp = d(a.head_dim);
    return 2.0 * q * n * d(a.groups) + d(a.heads) * (2.0 * q * hp + 4.0 * n * hp);
}

double mamba_gemm_params(const ModelSpec& m) {
    const MambaSpec& a = m.mamba;
    return d(m.hidden) * d(2 * a.d_inner() + 2 * a.groups * a.state + a.heads) +
           d(a.d_inner()) * d(m.hidden);
}

GdnGemms gdn_gemms(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    const GdnSpec& a = m.gdn;
    const double t = d(p.tp);
    const double tok = tokens_per_gpu(job, p);
    const double h = d(m.hidden);
    const double c = d(a.chunk);
    const double dk = d(a.qk_head_dim);
    const double dv = d(a.v_head_dim);
    const double batch = tok / c * d(a.v_heads) / t;  // chunks x this GPU's value heads
    GdnGemms g;
    g.in_proj = {tok, d(a.in_proj_dim()) / t, h, 1.0};
    g.out_proj = {tok, h, d(a.v_dim()) / t, 1.0};
    g.kk = {c, c, dk, batch};
    g.wu = {c, dk + dv, c, batch};
    g.qk = {c, c, dk, batch};
    g.attn_v = {c, dv, c, batch};
    g.state = {c, dv, dk, 3.0 * batch};
    return g;
}

double gdn_scan_flops_per_token(const ModelSpec& m) {
    const GdnSpec& a = m.gdn;
    const double c = d(a.chunk);
    const double dk = d(a.qk_head_dim);
    const double dv = d(a.v_head_dim);
    return d(a.v_heads) * (2.0 * c * (3.0 * dk + 2.0 * dv) + 6.0 * dk * dv);
}

double gdn_gemm_params(const ModelSpec& m) {
    return d(m.hidden) * d(m.gdn.in_proj_dim()) + d(m.gdn.v_dim()) * d(m.hidden);
}

Flops forward_flops(const LayerGemms& g) {
    return gemm_flops(g.qkv) + gemm_flops(g.q_up) + gemm_flops(g.kv_up) + gemm_flops(g.score) +
           gemm_flops(g.attn_v) + gemm_flops(g.proj) + gemm_flops(g.mlp_in) +
           gemm_flops(g.mlp_out) + gemm_flops(g.router) + gemm_flops(g.shared) +
           gemm_flops(g.latent_in) + gemm_flops(g.latent_out);
}

namespace {

// Attention projection weights per token (MLA: Megatron-Bridge flop_utils.py @7af9601c9d q_term
// and kv terms without its +1 norm columns: norms are not GEMMs).
double attention_gemm_params(const ModelSpec& m) {
    const double h = d(m.hidden);
    const double a = d(m.heads);
    if (!m.mla.enabled()) {
        const double hd = d(head_dim(m));
        const double q = m.attn_output_gate ? 2.0 : 1.0;  // the gate beside each query
        return (q + 1.0) * h * a * hd + 2.0 * h * d(m.kv_heads) * hd;
    }
    const MlaSpec& mla = m.mla;
    const double q_out = a * d(mla.qk_nope_dim + mla.qk_rope_dim);
    const double q = mla.q_lora_rank > 0 ? d(mla.q_lora_rank) * (h + q_out) : h * q_out;
    const double kv =
        d(mla.kv_lora_rank) * (h + a * d(mla.qk_nope_dim + mla.v_dim)) + h * d(mla.qk_rope_dim);
    return q + kv + a * d(mla.v_dim) * h;
}

}  // namespace

double gemm_params_active(const ModelSpec& m, bool moe, LayerShape shape) {
    const double h = d(m.hidden);
    const double attn = shape == LayerShape::ffn ? 0.0 : attention_gemm_params(m);
    if (shape == LayerShape::attention) {
        return attn;
    }
    if (moe) {
        // LatentMoE: the experts on the latent width, plus its two h x latent projections.
        return attn +
               d(m.moe.top_k) * mlp_matrices(m) * d(moe_token_width(m)) *
                   d(m.moe.expert_ffn_hidden) +
               mlp_matrices(m) * h * d(m.moe.shared_ffn_hidden) + h * d(m.moe.experts) +
               2.0 * h * d(m.moe.latent) + (m.moe.shared_gate ? h : 0.0);
    }
    return attn + mlp_matrices(m) * h * d(m.ffn_hidden);
}

int64_t moe_layers_in(const ModelSpec& m, int64_t first, int64_t last) {
    if (is_hybrid(m)) {
        return kind_count(m, LayerKind::moe, first, last);
    }
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

double attention_core_per_sequence(const ModelSpec& m, double s, double span) {
    const double keys = span > 0.0 ? span : s;
    const double per_key = 2.0 * s * d(m.heads) * d(head_dim(m) + v_head_dim(m));
    const double n_window = d(windowed_layer_count(m));
    const double window_keys = std::min(keys, d(m.sliding_window));
    const double attention_layers =
        is_hybrid(m) ? d(kind_count(m, LayerKind::attention, 0, m.layers)) : d(m.layers);
    return per_key * (attention_layers - n_window) * keys + per_key * n_window * window_keys;
}

namespace {

// Forward FLOPs of one sequence through every layer (GEMMs + attention core over `span` keys,
// attention_span()), no logits.
double layers_forward_per_sequence(const ModelSpec& m, double s, double span) {
    if (is_hybrid(m)) {
        // Each kind's GEMMs, the Mamba layers' SSD scan, the attention layers' core.
        const auto n = [&m](LayerKind k) { return d(kind_count(m, k, 0, m.layers)); };
        return n(LayerKind::mamba) * s *
                   (2.0 * mamba_gemm_params(m) + mamba_scan_flops_per_token(m)) +
               n(LayerKind::gdn) * s * (2.0 * gdn_gemm_params(m) + gdn_scan_flops_per_token(m)) +
               n(LayerKind::attention) * 2.0 * s * gemm_params_active(m, false, LayerShape::attention) +
               n(LayerKind::mlp) * 2.0 * s * gemm_params_active(m, false, LayerShape::ffn) +
               n(LayerKind::moe) * 2.0 * s * gemm_params_active(m, true, LayerShape::ffn) +
               attention_core_per_sequence(m, s, span);
    }
    const int64_t n_moe = moe_layers_in(m, 0, m.layers);
    const double n_dense = d(m.layers - n_moe);
    return n_dense * 2.0 * s * gemm_params_active(m, false) +
           d(n_moe) * 2.0 * s * gemm_params_active(m, true) + attention_core_per_sequence(m, s, span);
}

// Forward FLOPs of the MTP modules of one sequence: each a layer of the last layer's kind
// (its core over s keys), the 2h -> h projection and one more logits GEMM.
double mtp_forward_per_sequence(const ModelSpec& m, double s, double span) {
    if (m.mtp_layers <= 0 || m.layers <= 0) {
        return 0.0;
    }
    // A hybrid MTP block is '*E' or '*-' (core/load_hf.cpp): a transformer layer's shape.
    const bool moe = m.mtp_kinds.empty() ? is_moe_layer(m, m.layers - 1)
                                         : std::find(m.mtp_kinds.begin(), m.mtp_kinds.end(),
                                                     LayerKind::moe) != m.mtp_kinds.end();
    const double h = d(m.hidden);
    const double core = 2.0 * s * span * d(m.heads) * d(head_dim(m) + v_head_dim(m));
    const double per_module = 2.0 * s * gemm_params_active(m, moe) + core + 2.0 * s * 2.0 * h * h +
                              2.0 * s * h * d(m.vocab);
    return d(m.mtp_layers) * per_module;
}

}  // namespace

Flops model_flops(const ModelSpec& m, const JobSpec& job) {
    const double s = d(job.seq_len);
    const double span = attention_span(job);  // s unless packed (costmodel/packing.hpp)
    const double logits = 2.0 * s * d(m.hidden) * d(m.vocab);
    const double mtp = job.mtp ? d(std::max<int64_t>(1, job.mtp_repeats)) *
                                     mtp_forward_per_sequence(m, s, span)
                               : 0.0;
    const double trained =
        3.0 * d(job.global_batch) * (layers_forward_per_sequence(m, s, span) + logits + mtp);
    if (job.peft == Peft::none) {
        return flop(trained);
    }
    // LoRA: the frozen linears and output layer skip their weight gradients (one forward's worth
    // of their GEMM FLOPs, 2 s P), the adapters run forward, dgrad and wgrad (6 s P_lora).
    const double layers = d(m.layers);
    const double frozen_wgrad = 2.0 * s * layers * gemm_params_active(m, false) + logits;
    const double adapters = 6.0 * s * layers * lora_params_per_layer(m, job);
    return flop(trained + d(job.global_batch) * (adapters - frozen_wgrad));
}

Flops hardware_flops(const ModelSpec& m, const JobSpec& job, Recompute r) {
    const double s = d(job.seq_len);
    const double b = d(job.global_batch);
    switch (r) {
    case Recompute::none:
        return model_flops(m, job);
    case Recompute::full:
        return model_flops(m, job) +
               flop(b * layers_forward_per_sequence(m, s, attention_span(job)));
    case Recompute::selective:
        // 72 B s L h^2 * s/(6h) = 12 B s^2 h L: the paper's count for the attention core.
        return model_flops(m, job) +
               flop(3.0 * b * attention_core_per_sequence(m, s, attention_span(job)));
    }
    return model_flops(m, job);
}

}  // namespace cleave
