// Hugging Face config.json -> ModelSpec (Llama, Mistral, Qwen2, Qwen3, OLMo-2, Mixtral,
// DeepSeek-V2/V3, Kimi-K2, GLM-4.5, Qwen3-MoE, GPT-OSS, Gemma 3, Nemotron, GPT-NeoX, GPT-2). Key
// names follow the transformers configuration classes (LlamaConfig, MistralConfig, Qwen2Config,
// Qwen3Config, Olmo2Config, MixtralConfig, DeepseekV3Config, Glm4MoeConfig, Qwen3MoeConfig,
// GptOssConfig, Gemma3TextConfig, NemotronConfig, GPTNeoXConfig, GPT2Config). Families with layers
// cleave does not price (Mamba-2, gated DeltaNet) are refused by the key that holds them.
#include "core/load.hpp"
#include "core/load_detail.hpp"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

namespace cleave {

namespace {

using json = nlohmann::json;

struct Position {
    int64_t line = 1;
    int64_t column = 1;
};

Position position_of_offset(std::string_view text, size_t offset) {
    Position p;
    for (size_t i = 0; i < offset && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++p.line;
            p.column = 1;
        } else {
            ++p.column;
        }
    }
    return p;
}

// nlohmann::json keeps no positions, so a key is located by its first `"key" :` in the text.
Position position_of_key(std::string_view text, const std::string& key) {
    const std::string quoted = "\"" + key + "\"";
    for (size_t at = text.find(quoted); at != std::string_view::npos;
         at = text.find(quoted, at + 1)) {
        size_t i = at + quoted.size();
        while (i < text.size() &&
               (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) {
            ++i;
        }
        if (i < text.size() && text[i] == ':') {
            return position_of_offset(text, at);
        }
    }
    return {};
}

// nlohmann's out_of_range messages quote the offending token ("... parsing '1e999'"): locate it.
Position position_of_quoted_token(std::string_view text, std::string_view message) {
    const auto open = message.find('\'');
    const auto close = message.rfind('\'');
    if (open == std::string_view::npos || close <= open + 1) {
        return {};
    }
    const auto at = text.find(message.substr(open + 1, close - open - 1));
    return at == std::string_view::npos ? Position{} : position_of_offset(text, at);
}

class JsonReader {
public:
    JsonReader(const json& j, std::string_view text, detail::DiagnosticSink& sink)
        : j_(j)
        , text_(text)
        , sink_(sink) {}

    std::optional<int64_t> count(const std::string& key, detail::Need need) {
        const json* v = get(key, need);
        if (v == nullptr) {
            return std::nullopt;
        }
        if (!v->is_number_integer()) {
            error(key, "'" + key + "' must be an integer, got " + std::string(v->type_name()));
            return std::nullopt;
        }
        return v->get<int64_t>();
    }

    /// A count that must stay within detail::max_count (the MoE / MLA sizes multiply).
    std::optional<int64_t> size(const std::string& key, detail::Need need) {
        const auto v = count(key, need);
        if (v && (*v < 0 || *v > detail::max_count)) {
            error(key, "'" + key + "' = " + std::to_string(*v) + " is out of range [0, 1e12]");
            return std::nullopt;
        }
        return v;
    }

    /// True when the key is written, even as null.
    [[nodiscard]] bool present(const std::string& key) const { return j_.contains(key); }

    /// The JSON value of `key` (nullptr when absent or null).
    [[nodiscard]] const json* value(const std::string& key) const {
        const auto it = j_.find(key);
        return it == j_.end() || it->is_null() ? nullptr : &*it;
    }

    std::optional<std::string> text(const std::string& key) {
        const json* v = get(key, detail::Need::optional);
        if (v == nullptr) {
            return std::nullopt;
        }
        if (!v->is_string()) {
            error(key, "'" + key + "' must be a string, got " + std::string(v->type_name()));
            return std::nullopt;
        }
        return v->get<std::string>();
    }

    std::optional<bool> flag(const std::string& key) {
        const json* v = get(key, detail::Need::optional);
        if (v == nullptr) {
            return std::nullopt;
        }
        if (!v->is_boolean()) {
            error(key, "'" + key + "' must be a boolean, got " + std::string(v->type_name()));
            return std::nullopt;
        }
        return v->get<bool>();
    }

    void error(const std::string& key, std::string message) {
        const Position p = position_of_key(text_, key);
        sink_.error_at(p.line, p.column, std::move(message));
    }

private:
    const json* get(const std::string& key, detail::Need need) {
        const auto it = j_.find(key);
        if (it == j_.end() || it->is_null()) {
            if (need == detail::Need::required) {
                sink_.error_at(1, 1, "missing required key '" + key + "'");
            }
            return nullptr;
        }
        return &*it;
    }

    const json& j_;
    std::string_view text_;
    detail::DiagnosticSink& sink_;
};

template <class T>
void set(T& field, const std::optional<T>& v) {
    if (v) {
        field = *v;
    }
}

void read_llama_family(JsonReader& r, const std::string& type, ModelSpec& m) {
    using detail::Need;
    m.mlp = MlpKind::swiglu;
    m.norm = NormKind::rmsnorm;
    m.positions = PositionKind::rope;
    m.linear_bias = false;
    m.tied_embeddings = false;
    set(m.layers, r.count("num_hidden_layers", Need::required));
    set(m.hidden, r.count("hidden_size", Need::required));
    set(m.heads, r.count("num_attention_heads", Need::required));
    m.kv_heads = m.heads;
    set(m.kv_heads, r.count("num_key_value_heads", Need::optional));
    set(m.ffn_hidden, r.count("intermediate_size", Need::required));
    set(m.vocab, r.count("vocab_size", Need::required));
    set(m.seq_len, r.count("max_position_embeddings", Need::required));
    set(m.tied_embeddings, r.flag("tie_word_embeddings"));
    // Qwen2 always has q/k/v biases. LlamaConfig.attention_bias also biases o_proj; those h
    // parameters per layer are not counted (no published Llama/Mistral model sets it).
    set(m.qkv_bias, r.flag("attention_bias"));
    if (type == "qwen2") {
        m.qkv_bias = true;
    }
    if (type == "mixtral") {
        set(m.moe.experts, r.count("num_local_experts", Need::required));
        set(m.moe.top_k, r.count("num_experts_per_tok", Need::required));
        m.moe.expert_ffn_hidden = m.ffn_hidden;
    }
}

// The dimensions every transformers config names the same way (untied unless stated).
void read_dims(JsonReader& r, ModelSpec& m) {
    using detail::Need;
    m.tied_embeddings = false;
    set(m.layers, r.size("num_hidden_layers", Need::required));
    set(m.hidden, r.size("hidden_size", Need::required));
    set(m.heads, r.size("num_attention_heads", Need::required));
    m.kv_heads = m.heads;
    set(m.kv_heads, r.size("num_key_value_heads", Need::optional));
    set(m.ffn_hidden, r.size("intermediate_size", Need::required));
    set(m.vocab, r.size("vocab_size", Need::required));
    set(m.seq_len, r.size("max_position_embeddings", Need::required));
    set(m.tied_embeddings, r.flag("tie_word_embeddings"));
}

// The Llama-style basics every MoE family below shares (no biases, untied unless stated).
void read_moe_base(JsonReader& r, ModelSpec& m) {
    m.mlp = MlpKind::swiglu;
    m.norm = NormKind::rmsnorm;
    m.positions = PositionKind::rope;
    m.linear_bias = false;
    read_dims(r, m);
}

// The routed and shared experts as DeepSeek-style configs name them (DeepseekV3Config,
// Glm4MoeConfig): n_routed_experts, top-k, moe_intermediate_size, n_shared_experts of that width,
// the first first_k_dense_replace layers dense.
void read_deepseek_experts(JsonReader& r, ModelSpec& m) {
    using detail::Need;
    set(m.moe.experts, r.size("n_routed_experts", Need::required));
    set(m.moe.top_k, r.size("num_experts_per_tok", Need::required));
    set(m.moe.expert_ffn_hidden, r.size("moe_intermediate_size", Need::required));
    if (const auto shared = r.size("n_shared_experts", Need::required)) {
        m.moe.shared_ffn_hidden = *shared * m.moe.expert_ffn_hidden;
    }
    set(m.moe.first_dense_layers, r.size("first_k_dense_replace", Need::required));
}

// DeepseekV3Config / DeepseekV2Config (transformers configuration_deepseek_v3.py; the model
// repos' configuration_deepseek.py). Layer i is MoE when i >= first_k_dense_replace and
// i % moe_layer_freq == 0 (modeling_deepseek.py DeepseekV3DecoderLayer).
void read_deepseek(JsonReader& r, ModelSpec& m) {
    using detail::Need;
    read_moe_base(r, m);
    if (!r.present("q_lora_rank")) {
        r.error("q_lora_rank",
                "missing required key 'q_lora_rank' (null for a plain q projection)");
    }
    set(m.mla.q_lora_rank, r.size("q_lora_rank", Need::optional));  // null: plain q_proj
    set(m.mla.kv_lora_rank, r.size("kv_lora_rank", Need::required));
    set(m.mla.qk_nope_dim, r.size("qk_nope_head_dim", Need::required));
    set(m.mla.qk_rope_dim, r.size("qk_rope_head_dim", Need::required));
    set(m.mla.v_dim, r.size("v_head_dim", Need::required));
    if (r.flag("attention_bias").value_or(false)) {
        r.error("attention_bias", "'attention_bias' = true: cleave has no biased MLA projections");
    }
    read_deepseek_experts(r, m);
    set(m.moe.layer_freq, r.size("moe_layer_freq", Need::optional));
    if (m.moe.layer_freq > 1 && m.moe.first_dense_layers % m.moe.layer_freq != 0) {
        r.error("moe_layer_freq",
                "'moe_layer_freq' = " + std::to_string(m.moe.layer_freq) +
                    " with 'first_k_dense_replace' not a multiple of it: cleave counts MoE layers "
                    "from the first one");
    }
    // noaux_tc routing keeps one e_score_correction_bias per expert (DeepSeek-V3 MoEGate).
    const std::string method = r.text("topk_method").value_or("");
    m.moe.router_bias = method == "noaux_tc";
    // Group-limited routing (noaux_tc, group_limited_greedy: MoEGate picks the topk_group best of
    // n_group groups, then top_k experts inside them; modeling_deepseek.py).
    if (method == "noaux_tc" || method == "group_limited_greedy") {
        const auto g = r.size("n_group", Need::optional);
        const auto t = r.size("topk_group", Need::optional);
        if (g && t && *g > 1 && *t >= 1 && *t < *g) {
            m.moe.router_groups = *g;
            m.moe.router_group_topk = *t;
        }
    }
    set(m.mtp_layers, r.size("num_nextn_predict_layers", Need::optional));
}

// Qwen3MoeConfig (transformers configuration_qwen3_moe.py): head_dim stated, q/k RMSNorm, no
// shared expert; layer i is sparse when i is not in mlp_only_layers and (i + 1) %
// decoder_sparse_step == 0 (modeling_qwen3_moe.py Qwen3MoeDecoderLayer).
void read_qwen3_moe(JsonReader& r, ModelSpec& m) {
    using detail::Need;
    read_moe_base(r, m);
    m.qk_norm = true;
    set(m.head_size, r.size("head_dim", Need::optional));
    set(m.moe.experts, r.size("num_experts", Need::required));
    set(m.moe.top_k, r.size("num_experts_per_tok", Need::required));
    set(m.moe.expert_ffn_hidden, r.size("moe_intermediate_size", Need::required));
    if (const auto step = r.size("decoder_sparse_step", Need::optional); step && *step > 0) {
        m.moe.layer_freq = *step;
        m.moe.first_dense_layers = *step - 1;  // sparse at i = step-1, 2 step-1, ...
    }
    if (const json* only = r.value("mlp_only_layers");
        only != nullptr && (!only->is_array() || !only->empty())) {
        r.error("mlp_only_layers",
                "'mlp_only_layers' must be an empty list: cleave cannot place dense layers among "
                "the MoE layers");
    }
    if (r.flag("attention_bias").value_or(false)) {
        r.error("attention_bias", "'attention_bias' = true: cleave has no Qwen3 attention biases");
    }
    if (r.flag("use_sliding_window").value_or(false)) {
        r.error("use_sliding_window", "'use_sliding_window' = true is not supported for qwen3_moe");
    }
}

// The per-layer attention kinds of GPT-OSS: "sliding_attention" or "full_attention"; absent, the
// GptOssConfig default alternates, sliding first (configuration_gpt_oss.py).
void read_layer_types(JsonReader& r, ModelSpec& m) {
    const json* types = r.value("layer_types");
    if (types == nullptr) {
        for (int64_t i = 0; i < m.layers && m.layers <= detail::max_count / 1000000; ++i) {
            m.windowed.push_back(i % 2 == 0);
        }
        return;
    }
    if (!types->is_array()) {
        r.error("layer_types", "'layer_types' must be a list of strings");
        return;
    }
    for (const json& t : *types) {
        const std::string kind = t.is_string() ? t.get<std::string>() : "";
        if (kind != "sliding_attention" && kind != "full_attention") {
            r.error("layer_types",
                    "'layer_types' entries must be \"sliding_attention\" or \"full_attention\", "
                    "got " +
                        t.dump());
            return;
        }
        m.windowed.push_back(kind == "sliding_attention");
    }
    if (static_cast<int64_t>(m.windowed.size()) != m.layers) {
        r.error("layer_types",
                "'layer_types' lists " + std::to_string(m.windowed.size()) +
                    " layers, 'num_hidden_layers' = " + std::to_string(m.layers));
        m.windowed.clear();
    }
}

// GptOssConfig (transformers configuration_gpt_oss.py; openai/gpt-oss-120b config.json): biased
// q/k/v/o, one sink logit per head, biased experts (gate_up_proj_bias, down_proj_bias) and router,
// clamped SwiGLU (priced as SwiGLU: the clamp is elementwise).
void read_gpt_oss(JsonReader& r, ModelSpec& m) {
    using detail::Need;
    read_moe_base(r, m);
    set(m.head_size, r.size("head_dim", Need::required));
    m.linear_bias = r.flag("attention_bias").value_or(true);
    if (!m.linear_bias) {
        r.error("attention_bias",
                "'attention_bias' = false: cleave has no GPT-OSS variant without attention biases");
    }
    m.attention_sinks = true;
    m.clamped_glu = true;
    m.moe.router_bias = true;
    set(m.moe.experts, r.size("num_local_experts", Need::required));
    const auto k = r.size("num_experts_per_tok", Need::optional);
    const auto k2 = r.size("experts_per_token", Need::optional);
    if (!k && !k2) {
        r.error("num_experts_per_tok", "missing required key 'num_experts_per_tok'");
    } else if (k && k2 && *k != *k2) {
        r.error("experts_per_token",
                "'experts_per_token' = " + std::to_string(*k2) +
                    " disagrees with 'num_experts_per_tok' = " + std::to_string(*k));
    }
    m.moe.top_k = k ? *k : k2.value_or(0);
    m.moe.expert_ffn_hidden = m.ffn_hidden;
    set(m.sliding_window, r.size("sliding_window", Need::required));
    read_layer_types(r, m);
}

// Qwen3Config (transformers configuration_qwen3.py, modeling_qwen3.py): Llama-style with head_dim
// stated and q_norm / k_norm = RMSNorm(head_dim) shared by the heads. Sliding attention only with
// use_sliding_window: then layer_types, or else every layer i >= max_window_layers, is windowed.
void read_qwen3(JsonReader& r, ModelSpec& m) {
    using detail::Need;
    read_llama_family(r, "qwen3", m);
    m.qk_norm = true;
    set(m.head_size, r.size("head_dim", Need::optional));
    if (!r.flag("use_sliding_window").value_or(false)) {
        return;  // Qwen3Config sets sliding_window = None: every layer attends fully
    }
    set(m.sliding_window, r.size("sliding_window", Need::required));
    if (r.present("layer_types")) {
        read_layer_types(r, m);
        return;
    }
    const int64_t from = r.size("max_window_layers", Need::optional).value_or(m.layers);
    for (int64_t i = 0; i < m.layers && m.layers <= detail::max_count / 1000000; ++i) {
        m.windowed.push_back(i >= from);
    }
}

// Olmo2Config (transformers configuration_olmo2.py, modeling_olmo2.py): Llama-style, but q_norm
// and k_norm are RMSNorm over the whole projection (heads x head_dim and kv_heads x head_dim) where
// ModelSpec::qk_norm counts 2 x head_dim: (heads + kv_heads - 2) x head_dim parameters per layer go
// uncounted (OLMo-2-13B: 9,984 a layer, 399,360 in all, 0.003%). The norms sit after attention and
// after the MLP (post_attention_layernorm, post_feedforward_layernorm) instead of before them: two
// RMSNorm(hidden) a layer either way, so the count is the same.
void read_olmo2(JsonReader& r, ModelSpec& m) {
    read_llama_family(r, "olmo2", m);
    m.qk_norm = true;
}

// Glm4MoeConfig (transformers configuration_glm4_moe.py, modeling_glm4_moe.py): DeepSeek-style MoE
// without MLA. attention_bias biases q/k/v (o_proj has none); use_qk_norm adds RMSNorm(head_dim)
// on q and k; layer i is MoE when i >= first_k_dense_replace; the shared expert is n_shared_experts
// x moe_intermediate_size wide; the router keeps e_score_correction_bias (Glm4MoeTopkRouter).
// partial_rotary_factor only narrows the rotary part of each head: no parameters.
// num_nextn_predict_layers MTP modules are kept apart (ModelSpec::mtp_layers).
void read_glm4_moe(JsonReader& r, ModelSpec& m) {
    using detail::Need;
    read_moe_base(r, m);
    set(m.head_size, r.size("head_dim", Need::optional));
    set(m.qkv_bias, r.flag("attention_bias"));
    set(m.qk_norm, r.flag("use_qk_norm"));
    read_deepseek_experts(r, m);
    m.moe.router_bias = true;
    set(m.mtp_layers, r.size("num_nextn_predict_layers", Need::optional));
}

// Gemma 3's windowed layers: layer_types when stated, else layer i is global when (i + 1) %
// sliding_window_pattern == 0 (Gemma3TextConfig default 6: five local, then one global; saved as
// _sliding_window_pattern by newer transformers).
void read_gemma3_windows(JsonReader& r, ModelSpec& m) {
    using detail::Need;
    if (r.present("layer_types")) {
        read_layer_types(r, m);
        return;
    }
    auto pattern = r.size("sliding_window_pattern", Need::optional);
    if (!pattern) {
        pattern = r.size("_sliding_window_pattern", Need::optional);
    }
    const int64_t n = pattern.value_or(6);
    for (int64_t i = 0; i < m.layers && m.layers <= detail::max_count / 1000000; ++i) {
        m.windowed.push_back(n <= 0 || (i + 1) % n != 0);
    }
}

// Gemma3TextConfig (transformers configuration_gemma3.py, modeling_gemma3.py). Published configs
// state few keys, so absent ones take the class defaults. The MLP is GeGLU (gate, up, down: three
// matrices, priced as MlpKind::swiglu: same shapes, the activation differs). q_norm / k_norm are
// RMSNorm(head_dim). Each layer has four RMSNorm(hidden) (input, post_attention,
// pre_feedforward, post_feedforward: modeling_gemma3.py Gemma3DecoderLayer), the sandwich norms
// (ModelSpec::sandwich_norms). The embedding is scaled by sqrt(hidden): no parameters. For gemma3 the
// SigLIP vision tower and projector are not counted (Gemma 3 report Table 1: 417M).
void read_gemma3_text(JsonReader& r, ModelSpec& m) {
    using detail::Need;
    m.mlp = MlpKind::swiglu;
    m.norm = NormKind::rmsnorm;
    m.positions = PositionKind::rope;
    m.linear_bias = false;
    m.qk_norm = true;
    m.sandwich_norms = true;
    m.tied_embeddings = r.flag("tie_word_embeddings").value_or(m.tied_embeddings);
    m.layers = r.size("num_hidden_layers", Need::optional).value_or(26);
    m.hidden = r.size("hidden_size", Need::optional).value_or(2304);
    m.heads = r.size("num_attention_heads", Need::optional).value_or(8);
    m.kv_heads = r.size("num_key_value_heads", Need::optional).value_or(4);
    m.head_size = r.size("head_dim", Need::optional).value_or(256);
    m.ffn_hidden = r.size("intermediate_size", Need::optional).value_or(9216);
    m.vocab = r.size("vocab_size", Need::optional).value_or(262208);
    m.seq_len = r.size("max_position_embeddings", Need::optional).value_or(131072);
    set(m.qkv_bias, r.flag("attention_bias"));
    m.sliding_window = r.size("sliding_window", Need::optional).value_or(4096);
    read_gemma3_windows(r, m);
}

// NemotronConfig (transformers configuration_nemotron.py, modeling_nemotron.py): squared-ReLU MLP
// with up_proj and down_proj only (two matrices, priced as MlpKind::gelu: same shapes), LayerNorm1P
// (weight + bias), rotary on partial_rotary_factor of each head (no parameters), untied unless
// stated. head_dim (kv_channels in older Minitron configs) may differ from hidden / heads.
void read_nemotron(JsonReader& r, ModelSpec& m) {
    using detail::Need;
    m.mlp = MlpKind::gelu;
    m.squared_relu = true;
    if (const auto act = r.text("hidden_act"); act && *act != "relu2") {
        r.error("hidden_act", "'hidden_act' = '" + *act + "': cleave reads Nemotron's relu2 MLP only");
    }
    m.norm = NormKind::layernorm;
    m.positions = PositionKind::rope;
    read_dims(r, m);
    set(m.head_size, r.size("kv_channels", Need::optional));
    set(m.head_size, r.size("head_dim", Need::optional));
    const bool attention_bias = r.flag("attention_bias").value_or(false);
    if (attention_bias != r.flag("mlp_bias").value_or(false)) {
        r.error("mlp_bias",
                "'mlp_bias' differs from 'attention_bias': cleave biases attention and MLP "
                "together or not at all");
    }
    m.linear_bias = attention_bias;
}

// The layer kinds of a NemotronHConfig: hybrid_override_pattern, one letter a layer (M Mamba-2,
// * attention, - MLP, E MoE; transformers configuration_nemotron_h.py), or the list
// layers_block_type ("mamba", "attention", "mlp", "moe") newer configs write instead.
std::vector<LayerKind> read_layer_kinds(JsonReader& r) {
    struct KindName {
        char letter;
        const char* name;
        LayerKind kind;
    };
    static constexpr KindName names[] = {{'M', "mamba", LayerKind::mamba},
                                         {'*', "attention", LayerKind::attention},
                                         {'-', "mlp", LayerKind::mlp},
                                         {'E', "moe", LayerKind::moe}};
    const auto find = [](auto match) -> const KindName* {
        for (const KindName& k : names) {
            if (match(k)) {
                return &k;
            }
        }
        return nullptr;
    };
    std::vector<LayerKind> kinds;
    const json* p = r.value("hybrid_override_pattern");
    if (p != nullptr && p->is_string()) {
        for (const char c : p->get<std::string>()) {
            const KindName* k = find([c](const KindName& x) { return x.letter == c; });
            if (k == nullptr) {
                r.error("hybrid_override_pattern",
                        std::string("'hybrid_override_pattern' has '") + c +
                            "': cleave reads M (Mamba-2), * (attention), - (MLP) and E (MoE)");
                return {};
            }
            kinds.push_back(k->kind);
        }
        return kinds;
    }
    const json* list = r.value("layers_block_type");
    if (list != nullptr && list->is_array()) {
        for (const json& e : *list) {
            const std::string t = e.is_string() ? e.get<std::string>() : "";
            const KindName* k = find([&t](const KindName& x) { return t == x.name; });
            if (k == nullptr) {
                r.error("layers_block_type",
                        "'layers_block_type' has '" + t +
                            "': cleave reads mamba, attention, mlp and moe");
                return {};
            }
            kinds.push_back(k->kind);
        }
        return kinds;
    }
    r.error("hybrid_override_pattern",
            "missing required key 'hybrid_override_pattern' (or 'layers_block_type'): the kind "
            "of each layer");
    return kinds;
}

// NemotronHConfig (transformers configuration_nemotron_h.py / modeling_nemotron_h.py; Megatron-
// Bridge models/nemotronh/nemotron_h_provider.py @0fbfe7d3e9, v0.4.0): a hybrid of Mamba-2,
// attention, squared-ReLU MLP and MoE layers, each a single block with an RMSNorm before it;
// the MoE layers' experts and shared expert are squared-ReLU MLPs (up + down, priced as
// MlpKind::gelu: same shapes), the router keeps one correction bias per expert (sigmoid scores,
// e_score_correction_bias). No positional embedding in the attention layers (Bridge: "none";
// priced as rope, which has no parameters).
void read_nemotron_h(JsonReader& r, ModelSpec& m) {
    using detail::Need;
    m.mlp = MlpKind::gelu;
    m.squared_relu = true;
    if (const auto act = r.text("mlp_hidden_act"); act && *act != "relu2") {
        r.error("mlp_hidden_act",
                "'mlp_hidden_act' = '" + *act + "': cleave reads Nemotron-H's relu2 MLPs only");
    }
    m.norm = NormKind::rmsnorm;
    m.positions = PositionKind::rope;
    m.linear_bias = false;
    read_dims(r, m);
    set(m.head_size, r.size("head_dim", Need::optional));
    for (const char* key : {"attention_bias", "mlp_bias", "use_bias"}) {
        if (r.flag(key).value_or(false)) {
            r.error(key, std::string("'") + key + "' = true: cleave prices Nemotron-H without "
                         "linear biases, as every published Nemotron-H config has it");
        }
    }
    set(m.mamba.heads, r.size("mamba_num_heads", Need::required));
    set(m.mamba.head_dim, r.size("mamba_head_dim", Need::required));
    set(m.mamba.state, r.size("ssm_state_size", Need::required));
    set(m.mamba.groups, r.size("n_groups", Need::required));
    set(m.mamba.conv_kernel, r.size("conv_kernel", Need::optional));
    set(m.mamba.chunk, r.size("chunk_size", Need::optional));
    if (!r.flag("use_conv_bias").value_or(true)) {
        r.error("use_conv_bias", "'use_conv_bias' = false: cleave counts the conv1d bias");
    }
    m.layer_kinds = read_layer_kinds(r);
    if (!m.layer_kinds.empty() && static_cast<int64_t>(m.layer_kinds.size()) != m.layers) {
        r.error("hybrid_override_pattern",
                "the layer pattern has " + std::to_string(m.layer_kinds.size()) +
                    " layers, 'num_hidden_layers' says " + std::to_string(m.layers));
    }
    const bool moe = std::find(m.layer_kinds.begin(), m.layer_kinds.end(), LayerKind::moe) !=
                     m.layer_kinds.end();
    if (moe) {
        set(m.moe.experts, r.size("n_routed_experts", Need::required));
        set(m.moe.top_k, r.size("num_experts_per_tok", Need::required));
        set(m.moe.expert_ffn_hidden, r.size("moe_intermediate_size", Need::required));
        const int64_t shared = r.size("n_shared_experts", Need::optional).value_or(0);
        if (shared > 0) {
            set(m.moe.shared_ffn_hidden,
                r.size("moe_shared_expert_intermediate_size", Need::required));
        }
        m.moe.router_bias = true;
        // LatentMoE (Nemotron 3 Super): null in Nano's config, 1024 in Super's.
        if (const json* lat = r.value("moe_latent_size"); lat != nullptr && !lat->is_null()) {
            set(m.moe.latent, r.size("moe_latent_size", Need::optional));
        }
    }
    // MTP (Nemotron 3 Super: num_nextn_predict_layers 1, mtp_hybrid_override_pattern "*E", the
    // block's layers; kept apart like DeepSeek-V3's, priced when a job trains them).
    set(m.mtp_layers, r.size("num_nextn_predict_layers", Need::optional));
    if (r.size("mtp_num_layers", Need::optional).value_or(0) > 0) {
        r.error("mtp_num_layers",
                "'mtp_num_layers': cleave reads a Nemotron-H config's MTP from "
                "'num_nextn_predict_layers' and 'mtp_hybrid_override_pattern'");
    }
    if (m.mtp_layers > 0) {
        const json* p = r.value("mtp_hybrid_override_pattern");
        if (p == nullptr || !p->is_string()) {
            r.error("mtp_hybrid_override_pattern",
                    "missing required key 'mtp_hybrid_override_pattern': the layers of the MTP "
                    "block (num_nextn_predict_layers > 0)");
        } else {
            for (const char c : p->get<std::string>()) {
                const LayerKind k = c == 'M'   ? LayerKind::mamba
                                    : c == '*' ? LayerKind::attention
                                    : c == '-' ? LayerKind::mlp
                                               : LayerKind::moe;
                if (c != 'M' && c != '*' && c != '-' && c != 'E') {
                    r.error("mtp_hybrid_override_pattern",
                            std::string("'mtp_hybrid_override_pattern' has '") + c +
                                "': cleave reads M, *, - and E");
                    break;
                }
                if ((k == LayerKind::moe && !moe) || (k == LayerKind::mamba && !m.mamba.enabled())) {
                    r.error("mtp_hybrid_override_pattern",
                            std::string("'mtp_hybrid_override_pattern' has '") + c +
                                "' but the model has no layer of that kind");
                    break;
                }
                m.mtp_kinds.push_back(k);
            }
            const bool priced = m.mtp_kinds.size() == 2 && m.mtp_kinds[0] == LayerKind::attention &&
                                (m.mtp_kinds[1] == LayerKind::moe || m.mtp_kinds[1] == LayerKind::mlp);
            if (!priced && !m.mtp_kinds.empty()) {
                r.error("mtp_hybrid_override_pattern",
                        "'mtp_hybrid_override_pattern' = '" + p->get<std::string>() +
                            "': cleave prices a hybrid MTP block of one attention layer and one "
                            "MoE or MLP layer ('*E', '*-'), a transformer layer's shape");
            }
        }
    }
}

// Qwen3NextConfig (transformers configuration_qwen3_next.py, modeling_qwen3_next.py): every
// decoder layer is a token mixer, gated DeltaNet ("linear_attention") or gated full attention
// ("full_attention": q_proj also emits the output gate, q/k RMSNorm over head_dim, partial
// rotary), then a sparse MoE block with a sigmoid-gated shared expert; layer_types, or absent it
// one full layer every full_attention_interval (default 4). cleave holds it as Megatron's hybrid
// pattern writes it, two blocks a layer, "GEGEGE*E..." (Megatron-Bridge builds the same layers
// in a GPTModel with experimental_attention_variant gated_delta_net and linear_attention_freq,
// models/qwen/qwen3_next_bridge.py @067f987df).
void read_qwen3_next(JsonReader& r, ModelSpec& m) {
    using detail::Need;
    read_moe_base(r, m);
    m.qk_norm = true;
    m.attn_output_gate = true;
    set(m.head_size, r.size("head_dim", Need::optional));
    set(m.gdn.qk_heads, r.size("linear_num_key_heads", Need::required));
    set(m.gdn.v_heads, r.size("linear_num_value_heads", Need::required));
    set(m.gdn.qk_head_dim, r.size("linear_key_head_dim", Need::required));
    set(m.gdn.v_head_dim, r.size("linear_value_head_dim", Need::required));
    set(m.gdn.conv_kernel, r.size("linear_conv_kernel_dim", Need::optional));
    if (m.gdn.qk_heads > 0 && m.gdn.v_heads % m.gdn.qk_heads != 0) {
        r.error("linear_num_value_heads",
                "'linear_num_value_heads' = " + std::to_string(m.gdn.v_heads) +
                    " is not a multiple of 'linear_num_key_heads' = " +
                    std::to_string(m.gdn.qk_heads));
    }
    set(m.moe.experts, r.size("num_experts", Need::required));
    set(m.moe.top_k, r.size("num_experts_per_tok", Need::required));
    set(m.moe.expert_ffn_hidden, r.size("moe_intermediate_size", Need::required));
    if (const auto shared = r.size("shared_expert_intermediate_size", Need::optional);
        shared && *shared > 0) {
        m.moe.shared_ffn_hidden = *shared;
        m.moe.shared_gate = true;  // Qwen3NextSparseMoeBlock.shared_expert_gate: h -> 1
    }
    if (const auto step = r.size("decoder_sparse_step", Need::optional); step && *step != 1) {
        r.error("decoder_sparse_step",
                "'decoder_sparse_step' = " + std::to_string(*step) +
                    ": cleave reads a Qwen3-Next model whose every layer is MoE (1)");
    }
    if (const json* only = r.value("mlp_only_layers");
        only != nullptr && (!only->is_array() || !only->empty())) {
        r.error("mlp_only_layers", "'mlp_only_layers' must be an empty list for qwen3_next");
    }
    for (const char* key : {"attention_bias", "use_sliding_window"}) {
        if (r.flag(key).value_or(false)) {
            r.error(key, std::string("'") + key + "' = true is not supported for qwen3_next");
        }
    }
    // The mixer of each layer.
    std::vector<bool> linear;
    const int64_t n = m.layers;
    if (const json* types = r.value("layer_types"); types != nullptr) {
        if (!types->is_array()) {
            r.error("layer_types", "'layer_types' must be a list of strings");
            return;
        }
        for (const json& t : *types) {
            const std::string kind = t.is_string() ? t.get<std::string>() : "";
            if (kind != "linear_attention" && kind != "full_attention") {
                r.error("layer_types",
                        "'layer_types' entries must be \"linear_attention\" or "
                        "\"full_attention\", got " +
                            t.dump());
                return;
            }
            linear.push_back(kind == "linear_attention");
        }
    } else if (n > 0 && n <= detail::max_count / 1000000) {
        const int64_t every = r.size("full_attention_interval", Need::optional).value_or(4);
        for (int64_t i = 0; i < n; ++i) {
            linear.push_back(every <= 0 || (i + 1) % every != 0);
        }
    }
    if (n > 0 && static_cast<int64_t>(linear.size()) != n) {
        r.error("layer_types",
                "'layer_types' lists " + std::to_string(linear.size()) +
                    " layers, 'num_hidden_layers' says " + std::to_string(n));
        return;
    }
    for (const bool la : linear) {
        m.layer_kinds.push_back(la ? LayerKind::gdn : LayerKind::attention);
        m.layer_kinds.push_back(LayerKind::moe);
    }
    m.layers = 2 * n;  // two blocks a decoder layer
    // MTP when the config states it (mtp_num_hidden_layers, as Qwen3.5's configs write it; the
    // Qwen3-Next config.json states none, and transformers drops mtp.* tensors on load): a
    // full-attention layer with its MoE, kept apart.
    set(m.mtp_layers, r.size("mtp_num_hidden_layers", Need::optional));
    if (m.mtp_layers > 0) {
        m.mtp_kinds = {LayerKind::attention, LayerKind::moe};
    }
}

// Mamba2Config (transformers configuration_mamba2.py, modeling_mamba2.py): a stack of Mamba-2
// blocks alone (Mamba2Block: an RMSNorm, then Mamba2Mixer with its gated RMSNorm), no attention
// and no MLP; the embedding tied unless the config says otherwise. cleave holds it as a hybrid
// model of M layers ("MMMM...", Megatron's --hybrid-layer-pattern), with no attention heads.
void read_mamba2(JsonReader& r, ModelSpec& m) {
    using detail::Need;
    m.norm = NormKind::rmsnorm;
    m.positions = PositionKind::rope;  // no positional parameters
    m.linear_bias = false;
    m.mlp = MlpKind::swiglu;  // unused: no MLP layer
    set(m.layers, r.count("num_hidden_layers", Need::required));
    set(m.hidden, r.count("hidden_size", Need::required));
    set(m.vocab, r.count("vocab_size", Need::required));
    // No context length: Mamba2Config states none, so a job gives --seq (seq_len stays 0).
    m.tied_embeddings = r.flag("tie_word_embeddings").value_or(false);  // Mamba2Config default
    set(m.mamba.heads, r.size("num_heads", Need::required));
    set(m.mamba.head_dim, r.size("head_dim", Need::required));
    set(m.mamba.state, r.size("state_size", Need::required));
    set(m.mamba.groups, r.size("n_groups", Need::optional));
    set(m.mamba.conv_kernel, r.size("conv_kernel", Need::optional));
    set(m.mamba.chunk, r.size("chunk_size", Need::optional));
    if (const auto expand = r.size("expand", Need::optional);
        expand && m.hidden > 0 && m.mamba.d_inner() != *expand * m.hidden) {
        r.error("expand",
                "'expand' = " + std::to_string(*expand) + " gives d_inner " +
                    std::to_string(*expand * m.hidden) + ", but 'num_heads' x 'head_dim' = " +
                    std::to_string(m.mamba.d_inner()) +
                    " (Mamba2Mixer splits in_proj by the heads)");
    }
    if (r.flag("use_bias").value_or(false)) {
        r.error("use_bias", "'use_bias' = true: cleave prices Mamba-2 projections without biases");
    }
    if (!r.flag("use_conv_bias").value_or(true)) {
        r.error("use_conv_bias", "'use_conv_bias' = false: cleave counts the conv1d bias");
    }
    if (!r.flag("rms_norm").value_or(true)) {
        r.error("rms_norm", "'rms_norm' = false: cleave reads Mamba-2 stacks with RMSNorm");
    }
    if (m.mamba.heads > 0 && m.mamba.groups > 0 && m.mamba.heads % m.mamba.groups != 0) {
        r.error("n_groups", "'n_groups' = " + std::to_string(m.mamba.groups) +
                                " does not divide 'num_heads' = " + std::to_string(m.mamba.heads));
    }
    if (m.layers > 0 && m.layers <= detail::max_count / 1000000) {
        m.layer_kinds.assign(static_cast<std::size_t>(m.layers), LayerKind::mamba);
    }
}

// Families whose layers cleave has no price for: an error at the key that holds them.
void refuse_unpriced(JsonReader& r, const std::string& type) {
    r.error("model_type",
            "model_type '" + type +
                "' is Mamba-1 (selective scan, no heads): cleave prices Mamba-2 (mamba2) layers");
}

void read_gpt_neox(JsonReader& r, ModelSpec& m) {
    using detail::Need;
    m.mlp = MlpKind::gelu;
    m.norm = NormKind::layernorm;
    m.positions = PositionKind::rope;  // rotary on rotary_pct of each head; no parameters
    m.linear_bias = true;
    m.tied_embeddings = false;  // GPT-NeoX has a separate embed_out matrix
    set(m.layers, r.count("num_hidden_layers", Need::required));
    set(m.hidden, r.count("hidden_size", Need::required));
    set(m.heads, r.count("num_attention_heads", Need::required));
    m.kv_heads = m.heads;
    set(m.ffn_hidden, r.count("intermediate_size", Need::required));
    set(m.vocab, r.count("vocab_size", Need::required));
    set(m.seq_len, r.count("max_position_embeddings", Need::required));
    set(m.tied_embeddings, r.flag("tie_word_embeddings"));
}

void read_gpt2(JsonReader& r, ModelSpec& m) {
    using detail::Need;
    m.mlp = MlpKind::gelu;
    m.norm = NormKind::layernorm;
    m.positions = PositionKind::learned;
    m.linear_bias = true;
    m.tied_embeddings = true;
    set(m.layers, r.count("n_layer", Need::required));
    set(m.hidden, r.count("n_embd", Need::required));
    set(m.heads, r.count("n_head", Need::required));
    m.kv_heads = m.heads;
    if (m.hidden > 0 && m.hidden <= detail::max_count) {
        m.ffn_hidden = 4 * m.hidden;  // GPT2Config: n_inner = None means 4 * n_embd
    }
    set(m.ffn_hidden, r.count("n_inner", Need::optional));
    set(m.vocab, r.count("vocab_size", Need::required));
    set(m.seq_len, r.count("n_positions", Need::required));
}

// Family from model_type (or, failing that, the first entry of architectures).
std::string family_of(const json& j) {
    if (const auto it = j.find("model_type"); it != j.end() && it->is_string()) {
        return it->get<std::string>();
    }
    if (const auto it = j.find("architectures");
        it != j.end() && it->is_array() && !it->empty() && it->front().is_string()) {
        const std::string a = it->front().get<std::string>();
        const std::pair<const char*, const char*> known[] = {
            {"LlamaFor", "llama"},
            {"MistralFor", "mistral"},
            {"Qwen2For", "qwen2"},
            {"Qwen3For", "qwen3"},
            {"Olmo2For", "olmo2"},
            {"MixtralFor", "mixtral"},
            {"GPTNeoXFor", "gpt_neox"},
            {"DeepseekV3For", "deepseek_v3"},
            {"DeepseekV2For", "deepseek_v2"},
            {"Glm4MoeFor", "glm4_moe"},
            {"Qwen3MoeFor", "qwen3_moe"},
            {"GptOssFor", "gpt_oss"},
            {"Gemma3ForConditionalGeneration", "gemma3"},
            {"Gemma3ForCausalLM", "gemma3_text"},
            {"NemotronFor", "nemotron"},
            {"NemotronHFor", "nemotron_h"},
            {"Qwen3NextFor", "qwen3_next"},
            {"Mamba2For", "mamba2"},
            {"MambaFor", "mamba"},
            {"GPT2", "gpt2"}};
        for (const auto& [prefix, family] : known) {
            if (a.rfind(prefix, 0) == 0) {
                return family;
            }
        }
    }
    return "";
}

void check_head_dim(JsonReader& r, const json& j, const ModelSpec& m) {
    const auto it = j.find("head_dim");
    if (it != j.end() && it->is_number_integer() && m.heads > 0 &&
        (m.hidden % m.heads != 0 || it->get<int64_t>() != m.hidden / m.heads)) {
        r.error("head_dim",
                "'head_dim' = " + std::to_string(it->get<int64_t>()) +
                    " is not hidden_size / num_attention_heads; cleave cannot represent it");
    }
}

// The config.json key a ModelSpec field is read from, for errors found after reading.
std::string hf_key_of(const std::string& field, const std::string& type) {
    const bool gpt2 = type == "gpt2";
    const std::pair<const char*, const char*> keys[] = {
        {"layers", gpt2 ? "n_layer" : "num_hidden_layers"},
        {"hidden", gpt2 ? "n_embd" : "hidden_size"},
        {"heads", gpt2 ? "n_head" : "num_attention_heads"},
        {"kv_heads", "num_key_value_heads"},
        {"ffn_hidden", gpt2 ? "n_inner" : "intermediate_size"},
        {"vocab", "vocab_size"},
        {"seq_len", gpt2 ? "n_positions" : "max_position_embeddings"},
        {"moe.experts",
         type == "deepseek_v3" || type == "deepseek_v2" || type == "kimi_k2" || type == "glm4_moe"
             ? "n_routed_experts"
         : type == "qwen3_moe" || type == "qwen3_next" ? "num_experts"
                               : "num_local_experts"},
        {"moe.top_k", "num_experts_per_tok"},
        {"moe.expert_ffn_hidden",
         type == "mixtral" ? "intermediate_size" : "moe_intermediate_size"},
        {"moe.layer_freq", type == "qwen3_moe" ? "decoder_sparse_step" : "moe_layer_freq"},
        {"moe.first_dense_layers", "first_k_dense_replace"},
        {"moe.shared_ffn_hidden", "n_shared_experts"},
        {"mtp_layers", "num_nextn_predict_layers"}};
    for (const auto& [f, key] : keys) {
        if (field == f) {
            return key;
        }
    }
    return field;  // head_dim, q_lora_rank, v_head_dim, ...: the same name
}

// Reads `type` into `m`; false when cleave knows no such family. Refused families record their
// error and return true.
bool read_family(JsonReader& r,
                 const json& j,
                 std::string_view text,
                 detail::DiagnosticSink& sink,
                 const std::string& type,
                 ModelSpec& m) {
    if (type == "llama" || type == "mistral" || type == "qwen2" || type == "mixtral") {
        read_llama_family(r, type, m);
    } else if (type == "qwen3") {
        read_qwen3(r, m);
    } else if (type == "olmo2") {
        read_olmo2(r, m);
    } else if (type == "deepseek_v3" || type == "deepseek_v2" || type == "kimi_k2") {
        read_deepseek(r, m);  // Kimi-K2: DeepseekV3ForCausalLM with model_type "kimi_k2"
    } else if (type == "glm4_moe") {
        read_glm4_moe(r, m);
    } else if (type == "qwen3_moe") {
        read_qwen3_moe(r, m);
    } else if (type == "gpt_oss") {
        read_gpt_oss(r, m);
    } else if (type == "gemma3_text") {
        read_gemma3_text(r, m);
    } else if (type == "gemma3") {
        // Gemma3Config: the language model is text_config; the top level may tie the embedding.
        const auto it = j.find("text_config");
        if (it == j.end() || !it->is_object()) {
            r.error("text_config", "missing required key 'text_config' (a Gemma3TextConfig)");
            return true;
        }
        m.tied_embeddings = r.flag("tie_word_embeddings").value_or(true);
        JsonReader tr(*it, text, sink);
        read_gemma3_text(tr, m);
    } else if (type == "nemotron") {
        read_nemotron(r, m);
    } else if (type == "nemotron_h") {
        read_nemotron_h(r, m);
    } else if (type == "qwen3_next") {
        read_qwen3_next(r, m);
    } else if (type == "mamba2") {
        read_mamba2(r, m);
    } else if (type == "mamba") {
        refuse_unpriced(r, type);
    } else if (type == "gpt_neox") {
        read_gpt_neox(r, m);
    } else if (type == "gpt2") {
        read_gpt2(r, m);
    } else {
        return false;
    }
    return true;
}

}  // namespace

ModelSpec parse_model_hf_json(std::string_view text, const std::string& source_name) {
    detail::DiagnosticSink sink(source_name);
    json j;
    try {
        j = json::parse(text.begin(), text.end());
    } catch (const json::parse_error& e) {
        const Position p = position_of_offset(text, e.byte > 0 ? e.byte - 1 : 0);
        sink.error_at(p.line, p.column, std::string("invalid JSON: ") + e.what());
        sink.throw_if_any();
    } catch (const json::exception& e) {
        // Not only parse_error: a number too large for a double throws out_of_range (406),
        // found by the fuzzer (tests/fuzz/regressions/crash-abd9e4ff...).
        const Position p = position_of_quoted_token(text, e.what());
        sink.error_at(p.line, p.column, std::string("invalid JSON: ") + e.what());
        sink.throw_if_any();
    }
    if (!j.is_object()) {
        sink.error_at(1, 1, "a Hugging Face config.json must hold one JSON object");
        sink.throw_if_any();
    }
    ModelSpec m;
    m.name = std::filesystem::path(source_name).stem().string();
    if (const auto it = j.find("_name_or_path");
        it != j.end() && it->is_string() && !it->get<std::string>().empty()) {
        m.name = it->get<std::string>();
    }
    JsonReader r(j, text, sink);
    const std::string type = family_of(j);
    if (!read_family(r, j, text, sink, type, m)) {
        r.error("model_type",
                "unsupported model_type '" + type +
                    "' (supported: llama, mistral, qwen2, qwen3, olmo2, mixtral, deepseek_v2, "
                    "deepseek_v3, kimi_k2, glm4_moe, qwen3_moe, gpt_oss, gemma3, gemma3_text, "
                    "nemotron, nemotron_h, qwen3_next, mamba2, gpt_neox, gpt2)");
        sink.throw_if_any();
    }
    if (m.head_size == 0 && !m.mla.enabled()) {
        check_head_dim(r, j, m);
    }
    if (sink.empty()) {
        for (const auto& p : detail::model_problems(m)) {
            const std::string key = hf_key_of(p.field, type);
            r.error(key, p.message + " (config key '" + key + "')");
        }
    }
    sink.throw_if_any();
    return m;
}

}  // namespace cleave
