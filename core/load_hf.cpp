// Hugging Face config.json -> ModelSpec (Llama, Mistral, Qwen2, Mixtral, GPT-NeoX, GPT-2).
// Key names follow the transformers configuration classes (LlamaConfig, MistralConfig,
// Qwen2Config, MixtralConfig, GPTNeoXConfig, GPT2Config).
#include "core/load.hpp"
#include "core/load_detail.hpp"

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
        const std::pair<const char*, const char*> known[] = {{"LlamaFor", "llama"},
                                                             {"MistralFor", "mistral"},
                                                             {"Qwen2For", "qwen2"},
                                                             {"MixtralFor", "mixtral"},
                                                             {"GPTNeoXFor", "gpt_neox"},
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
    if (type == "llama" || type == "mistral" || type == "qwen2" || type == "mixtral") {
        read_llama_family(r, type, m);
    } else if (type == "gpt_neox") {
        read_gpt_neox(r, m);
    } else if (type == "gpt2") {
        read_gpt2(r, m);
    } else {
        r.error("model_type",
                "unsupported model_type '" + type +
                    "' (supported: llama, mistral, qwen2, mixtral, gpt_neox, gpt2)");
        sink.throw_if_any();
    }
    check_head_dim(r, j, m);
    if (sink.empty()) {
        for (const auto& p : detail::model_problems(m)) {
            sink.error_at(1, 1, p.message);
        }
    }
    sink.throw_if_any();
    return m;
}

}  // namespace cleave
