// The models of published MoE rows: the shipped Hugging Face configs they are built from, and
// Megatron-Bridge's FLOP convention for them (the TFLOP/s of public_runs_2025.csv).
#include "core/load_detail.hpp"
#include "costmodel/flops.hpp"
#include "published/published.hpp"

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>

namespace cleave {

// The shipped Hugging Face config of a row's model, by the name the CSV gives it: the rows' own
// columns cannot carry MLA, shared experts, dense first layers or a stated head_dim.
const char* shipped_model_config(const std::string& name) {
    const std::pair<const char*, const char*> known[] = {
        {"DeepSeek-V3", "deepseek-v3.config.json"},
        {"Qwen3-235B-A22B", "qwen3-235b-a22b.config.json"},
        {"Qwen3-30B-A3B", "qwen3-30b-a3b.config.json"},
        {"Qwen3-Next-80B", "qwen3-next-80b-a3b-instruct.config.json"},
        {"GPT-OSS 120B", "gpt-oss-120b.config.json"},
        {"GPT-OSS-120B", "gpt-oss-120b.config.json"},
        {"GPT-OSS 20B", "gpt-oss-20b.config.json"},
        {"GPT-OSS-20B", "gpt-oss-20b.config.json"},
        {"Nemotron 3 Nano", "nemotron-3-nano-30b-a3b.config.json"},
        {"Nemotron 3 Super", "nemotron-3-super-120b-a12b.config.json"},
        {"Kimi K2", "kimi-k2-instruct.config.json"}};
    for (const auto& [key, file] : known) {
        if (name.find(key) != std::string::npos) {
            return file;
        }
    }
    return nullptr;
}

std::filesystem::path shipped_model_config_path(const char* file) {
    for (const auto& dir :
         detail::data_dirs("CLEAVE_MODELS", CLEAVE_SOURCE_MODELS, CLEAVE_INSTALL_MODELS)) {
        std::error_code ec;
        if (std::filesystem::is_regular_file(dir / file, ec)) {
            return dir / file;
        }
    }
    return {};
}

namespace {

// Megatron-Bridge's count of one layer's GEMM weights per token (flop_utils.py
// num_floating_point_operations @7af9601c9d): GQA 2hq + 2h kv, or MLA q_lora (h + a d_qk + 1)
// + kv_lora (h + a (nope + v) + 1) + h rope + a v h; MLP 2 h f x 3/2 when gated with F.silu,
// x 1 otherwise (GPT-OSS's clamped quick-GELU GLU); no router.
double bridge_layer_weights(const ModelSpec& m, bool moe) {
    const double h = static_cast<double>(m.hidden);
    const double a = static_cast<double>(m.heads);
    double attn = 0.0;
    if (m.mla.enabled()) {
        const MlaSpec& x = m.mla;
        const double dqk = static_cast<double>(x.qk_nope_dim + x.qk_rope_dim);
        const double q_lora = static_cast<double>(x.q_lora_rank);
        attn = (x.q_lora_rank > 0 ? q_lora * (h + a * dqk + 1.0) : h * a * dqk) +
               static_cast<double>(x.kv_lora_rank) *
                   (h + a * static_cast<double>(x.qk_nope_dim + x.v_dim) + 1.0) +
               h * static_cast<double>(x.qk_rope_dim) + a * static_cast<double>(x.v_dim) * h;
    } else {
        const double d = static_cast<double>(head_dim(m));
        attn = 2.0 * h * a * d + 2.0 * h * static_cast<double>(m.kv_heads) * d;
    }
    const double gated = m.mlp == MlpKind::swiglu && !m.clamped_glu ? 1.5 : 1.0;
    const double f =
        moe ? static_cast<double>(m.moe.top_k * m.moe.expert_ffn_hidden + m.moe.shared_ffn_hidden)
            : static_cast<double>(m.ffn_hidden);
    return attn + 2.0 * h * f * gated;
}

}  // namespace

namespace {

// Megatron-Bridge's hybrid count (flop_utils.py hybrid_flops @0fbfe7d3e9, v0.4.0), per token of
// the forward: attention 4 h p (h + h g / a + s / 2) with p = d a / h and g query groups; Mamba
// 2 h (2 d_in + 2 G N + H) + 7 d_in N + 2 d_in h with Bridge's d_in = 2 h (not heads x
// head_dim); MLP 4 f h; MoE 4 h (k f_e + f_s) (squared ReLU: no gate factor); logits 2 h V.
// Qwen3-Next, which Bridge counts on its GPT path (linear_attention_freq), comes to the same
// terms: per layer h (q + k + v + gate) + q h + q s for its attention, the GDN term below, and
// 3 h (k f_e + f_s) for its MoE, doubled.
double bridge_hybrid_per_token(const ModelSpec& m, double s, double mtp_depths) {
    const double h = static_cast<double>(m.hidden);
    const double a = static_cast<double>(m.heads);
    const double p = static_cast<double>(head_dim(m)) * a / h;
    const double g = static_cast<double>(m.kv_heads);
    const double din = 2.0 * h;
    const MambaSpec& x = m.mamba;
    const double gn = static_cast<double>(x.groups * x.state);
    // calculate_layer_counts (@v0.4.0): the main pattern's layers, plus the MTP pattern's once
    // per depth.
    const auto n = [&m, mtp_depths](LayerKind k) {
        const double mtp = static_cast<double>(std::count(m.mtp_kinds.begin(), m.mtp_kinds.end(), k));
        return static_cast<double>(kind_count(m, k, 0, m.layers)) + mtp * mtp_depths;
    };
    const double gate = m.mlp == MlpKind::swiglu ? 1.5 : 1.0;
    // Gated attention (Qwen3-Next): the gate's h x a d more (flop_utils.py @067f987df
    // gate_projection_size).
    const double gate_q = m.attn_output_gate ? 2.0 * h * static_cast<double>(head_dim(m)) * a : 0.0;
    const double attn = 4.0 * h * p * (h + h * g / a + s / 2.0) + gate_q;
    // Gated DeltaNet (gdn_layer_flops / the GPT path's gdn_self_attn_per_layer @067f987df, as
    // Megatron's training.py): 2 (h in_proj + K (2 qk + v) + 4 Hv d_v^2 + h v) per token.
    const GdnSpec& gd = m.gdn;
    const double gdn =
        2.0 * (h * static_cast<double>(gd.in_proj_dim()) +
               static_cast<double>(gd.conv_kernel * gd.conv_dim()) +
               4.0 * static_cast<double>(gd.v_heads) * static_cast<double>(gd.v_head_dim * gd.v_head_dim) +
               h * static_cast<double>(gd.v_dim()));
    const double mamba = 2.0 * h * (2.0 * din + 2.0 * gn + static_cast<double>(x.heads)) +
                         7.0 * din * static_cast<double>(x.state) + 2.0 * din * h;
    const double mlp = 4.0 * static_cast<double>(m.ffn_hidden) * h * gate;
    // LatentMoE (moe_layer_flops @v0.4.0): the routed experts on the latent L, 4 L k f_e, plus
    // the two projections 4 h L.
    const double lat = static_cast<double>(m.moe.latent);
    const double routed = static_cast<double>(m.moe.top_k * m.moe.expert_ffn_hidden);
    const double moe = (m.moe.latent > 0 ? 4.0 * lat * routed * gate + 4.0 * h * lat
                                         : 4.0 * h * routed * gate) +
                       4.0 * h * static_cast<double>(m.moe.shared_ffn_hidden) * gate;
    // Logits once, and once more per MTP depth (hybrid_flops' (1 + mtp_num_layers)).
    return n(LayerKind::attention) * attn + n(LayerKind::mamba) * mamba + n(LayerKind::gdn) * gdn +
           n(LayerKind::mlp) * mlp +
           n(LayerKind::moe) * moe + 2.0 * h * static_cast<double>(m.vocab) * (1.0 + mtp_depths);
}

}  // namespace

double bridge_flops(const ModelSpec& m, const JobSpec& job) {
    const double B = static_cast<double>(job.global_batch);
    const double s = static_cast<double>(job.seq_len);
    const double h = static_cast<double>(m.hidden);
    const double V = static_cast<double>(m.vocab);
    if (is_hybrid(m)) {
        const double depths =
            job.mtp ? static_cast<double>(m.mtp_layers * std::max<int64_t>(1, job.mtp_repeats))
                    : 0.0;
        return 3.0 * B * s * bridge_hybrid_per_token(m, s, depths);
    }
    const int64_t n_moe = moe_layers_in(m, 0, m.layers);
    // MTP modules add layers of the last layer's kind, 3 norms + the 2h^2 projection, logits.
    const double mtp = job.mtp ? static_cast<double>(m.mtp_layers) : 0.0;
    const bool last_moe = m.layers > 0 && is_moe_layer(m, m.layers - 1);
    const double moe_layers = static_cast<double>(n_moe) + (last_moe ? mtp : 0.0);
    const double dense_layers = static_cast<double>(m.layers - n_moe) + (last_moe ? 0.0 : mtp);
    const double layers = moe_layers + dense_layers;
    // Core attention per token, causal half: s a (d_qk + d_v) / 2 per GEMM pair member; the
    // window of GPT-OSS's layers is not in Bridge's count.
    const double core =
        s * static_cast<double>(m.heads) * static_cast<double>(head_dim(m) + v_head_dim(m)) / 2.0;
    const double per_token = 2.0 * (dense_layers * bridge_layer_weights(m, false) +
                                    moe_layers * bridge_layer_weights(m, true) + layers * core) +
                             2.0 * mtp * (3.0 * h + 2.0 * h * h) + 2.0 * h * V * (mtp + 1.0);
    return 3.0 * B * s * per_token;
}

}  // namespace cleave
