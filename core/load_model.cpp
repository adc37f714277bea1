// Model TOML ([model], [model.moe], [model.mla], [model.mamba], [model.gdn]) and the value checks every model loader shares.
#include "core/load.hpp"
#include "core/load_detail.hpp"

#include <algorithm>
#include <filesystem>

namespace cleave {

namespace detail {

namespace {

std::string eq(const char* name, int64_t v) {
    return std::string("'") + name + "' = " + std::to_string(v);
}

void positive(std::vector<ModelProblem>& out, const char* field, int64_t v) {
    if (v <= 0) {
        out.push_back(
            {field, "'" + std::string(field) + "' must be positive, got " + std::to_string(v)});
    }
}

void moe_problems(const ModelSpec& m, std::vector<ModelProblem>& out) {
    const MoeSpec& e = m.moe;
    if (e.experts < 0) {
        out.push_back({"moe.experts", eq("experts", e.experts) + " is negative"});
    }
    if (!e.enabled()) {
        return;
    }
    if (e.top_k < 1 || e.top_k > e.experts) {
        out.push_back(
            {"moe.top_k",
             eq("top_k", e.top_k) + " must be between 1 and " + eq("experts", e.experts)});
    }
    if (e.expert_ffn_hidden <= 0) {
        out.push_back({"moe.expert_ffn_hidden",
                       eq("expert_ffn_hidden", e.expert_ffn_hidden) + " must be positive"});
    }
    if (e.layer_freq < 1) {
        out.push_back({"moe.layer_freq", eq("layer_freq", e.layer_freq) + " must be at least 1"});
    }
    if (m.layers > 0 && (e.first_dense_layers < 0 || e.first_dense_layers >= m.layers)) {
        out.push_back({"moe.first_dense_layers",
                       eq("first_dense_layers", e.first_dense_layers) +
                           " leaves no MoE layer: it must be in [0, " + eq("layers", m.layers) +
                           ")"});
    }
}

void mla_problems(const ModelSpec& m, std::vector<ModelProblem>& out) {
    const MlaSpec& a = m.mla;
    if (!a.enabled()) {
        return;
    }
    for (const auto& [field, v] :
         {std::pair<const char*, int64_t>{"qk_nope_head_dim", a.qk_nope_dim},
          {"qk_rope_head_dim", a.qk_rope_dim},
          {"v_head_dim", a.v_dim}}) {
        positive(out, field, v);
    }
    if (a.q_lora_rank < 0) {
        out.push_back({"q_lora_rank", eq("q_lora_rank", a.q_lora_rank) + " is negative"});
    }
    if (m.kv_heads != m.heads) {
        out.push_back({"kv_heads",
                       eq("kv_heads", m.kv_heads) + " must equal " + eq("heads", m.heads) +
                           " under multi-head latent attention (every head has its own K and V)"});
    }
}

void attention_problems(const ModelSpec& m, std::vector<ModelProblem>& out) {
    if (m.head_size < 0) {
        out.push_back({"head_dim", eq("head_dim", m.head_size) + " is negative"});
    }
    mla_problems(m, out);
    if (m.sliding_window < 0) {
        out.push_back({"sliding_window", eq("sliding_window", m.sliding_window) + " is negative"});
    }
    if (!m.windowed.empty() && static_cast<int64_t>(m.windowed.size()) != m.layers) {
        out.push_back({"layer_types",
                       "the per-layer attention pattern lists " +
                           std::to_string(m.windowed.size()) + " layers, the model has " +
                           eq("layers", m.layers)});
    }
    if (m.mtp_layers < 0) {
        out.push_back({"mtp_layers", eq("mtp_layers", m.mtp_layers) + " is negative"});
    }
    if (m.moe.shared_ffn_hidden < 0) {
        out.push_back({"moe.shared_ffn_hidden",
                       eq("shared_ffn_hidden", m.moe.shared_ffn_hidden) + " is negative"});
    }
}

}  // namespace

std::vector<ModelProblem> model_problems(const ModelSpec& m) {
    std::vector<ModelProblem> out;
    positive(out, "layers", m.layers);
    positive(out, "hidden", m.hidden);
    // A hybrid model without attention (or MLP) layers, a pure Mamba-2 stack, may state none of
    // their sizes (0); a negative one is still an error.
    const auto has = [&m](LayerKind k) {
        return kind_count(m, k, 0, m.layers) > 0 ||
               std::find(m.mtp_kinds.begin(), m.mtp_kinds.end(), k) != m.mtp_kinds.end();
    };
    const bool attends = !is_hybrid(m) || has(LayerKind::attention);
    const bool dense_mlp = !is_hybrid(m) || has(LayerKind::mlp);
    const auto size = [&out](bool needed, const char* field, int64_t v) {
        if (needed || v < 0) {
            positive(out, field, v);
        }
    };
    size(attends, "heads", m.heads);
    size(attends, "kv_heads", m.kv_heads);
    size(dense_mlp, "ffn_hidden", m.ffn_hidden);
    positive(out, "vocab", m.vocab);
    // A model of Mamba-2 layers alone states no context length (Mamba2Config has none): the
    // job's --seq gives it.
    size(attends || m.positions == PositionKind::learned, "seq_len", m.seq_len);
    if (m.heads > 0 && m.hidden > 0 && m.hidden % m.heads != 0 && m.head_size == 0 &&
        !m.mla.enabled()) {
        out.push_back(
            {"heads", eq("heads", m.heads) + " does not divide " + eq("hidden", m.hidden)});
    }
    if (m.kv_heads > 0 && m.heads > 0 && m.heads % m.kv_heads != 0) {
        out.push_back(
            {"kv_heads", eq("kv_heads", m.kv_heads) + " does not divide " + eq("heads", m.heads)});
    }
    moe_problems(m, out);
    attention_problems(m, out);
    // Upper bound of params_total in double: every exact int64 count below it is safe.
    const double h = static_cast<double>(m.hidden);
    const double experts = static_cast<double>(std::max<int64_t>(m.moe.experts, 1));
    const double ffn = static_cast<double>(
        std::max({m.ffn_hidden, m.moe.expert_ffn_hidden, m.moe.shared_ffn_hidden}));
    // Every attention matrix is at most (h + widest head block) x (h + widest head block +
    // latents); eight of them bound the attention block, MLA or not.
    const double widest = static_cast<double>(std::max<int64_t>(m.heads, 0)) *
                          static_cast<double>(std::max({head_dim(m), v_head_dim(m), int64_t{0}}));
    const double latents = static_cast<double>(m.mla.q_lora_rank + m.mla.kv_lora_rank);
    const double attn = 8.0 * (h + widest) * (h + widest + latents + 1.0);
    // A hybrid model's sequence mixers: in and out projections, conv and per-head vectors.
    const auto dd = [](int64_t v) { return static_cast<double>(std::max<int64_t>(v, 0)); };
    const double gdn = (h + dd(m.gdn.conv_kernel) + 4.0) *
                       (2.0 * dd(m.gdn.qk_heads) * dd(m.gdn.qk_head_dim) +
                        3.0 * dd(m.gdn.v_heads) * dd(m.gdn.v_head_dim) + 2.0 * dd(m.gdn.v_heads));
    const double layer = attn + gdn + 3.0 * h * ffn * (experts + 1.0) + 2.0 * h * experts +
                         8.0 * h + 6.0 * ffn;
    const double total =
        static_cast<double>(m.layers + std::max<int64_t>(0, m.mtp_layers)) * layer +
        (2.0 * static_cast<double>(m.vocab) + static_cast<double>(m.seq_len) + 2.0) * h;
    if (!(total <= max_params)) {
        out.push_back({"layers",
                       "the model would have more than 1e15 parameters; cleave's counts would "
                       "overflow"});
    }
    return out;
}

}  // namespace detail

std::vector<std::string> validate(const ModelSpec& m) {
    std::vector<std::string> out;
    for (auto& p : detail::model_problems(m)) {
        out.push_back(std::move(p.message));
    }
    return out;
}

namespace {

using detail::Choice;
using detail::Need;
using detail::TableReader;

void apply_arch(ModelSpec& m, const std::string& arch) {
    const bool gpt = arch == "gpt";
    m.mlp = gpt ? MlpKind::gelu : MlpKind::swiglu;
    m.norm = gpt ? NormKind::layernorm : NormKind::rmsnorm;
    m.positions = gpt ? PositionKind::learned : PositionKind::rope;
    m.tied_embeddings = gpt;
    m.linear_bias = gpt;
}

template <class T>
void set(T& field, const std::optional<T>& v) {
    if (v) {
        field = *v;
    }
}

void read_style(TableReader& r, ModelSpec& m) {
    const auto arch =
        r.choice<std::string>("arch", Need::required, {{"gpt", "gpt"}, {"llama", "llama"}});
    if (arch) {
        apply_arch(m, *arch);
    }
    set(m.mlp,
        r.choice<MlpKind>(
            "mlp", Need::optional, {{"gelu", MlpKind::gelu}, {"swiglu", MlpKind::swiglu}}));
    set(m.norm,
        r.choice<NormKind>("norm",
                           Need::optional,
                           {{"layernorm", NormKind::layernorm}, {"rmsnorm", NormKind::rmsnorm}}));
    set(m.positions,
        r.choice<PositionKind>("positions",
                               Need::optional,
                               {{"learned", PositionKind::learned}, {"rope", PositionKind::rope}}));
    set(m.tied_embeddings, r.flag("tied_embeddings", Need::optional));
    set(m.linear_bias, r.flag("linear_bias", Need::optional));
    set(m.qkv_bias, r.flag("qkv_bias", Need::optional));
    set(m.squared_relu, r.flag("squared_relu", Need::optional));
    if (m.squared_relu && m.mlp == MlpKind::swiglu) {
        r.bad_value("squared_relu", "= true needs an ungated MLP (mlp = \"gelu\" shapes: up + down)");
    }
}

void read_sizes(TableReader& r, ModelSpec& m) {
    set(m.layers, r.count("layers", Need::required));
    set(m.hidden, r.count("hidden", Need::required));
    set(m.heads, r.count("heads", Need::required));
    m.kv_heads = m.heads;
    set(m.kv_heads, r.count("kv_heads", Need::optional));
    set(m.ffn_hidden, r.count("ffn_hidden", Need::required));
    set(m.vocab, r.count("vocab", Need::required));
    set(m.seq_len, r.count("seq_len", Need::required));
}

// Attention as published models state it: head_dim, q/k norms, sinks, a sliding window on every
// layer but each full_attention_every-th (Megatron window_attn_skip_freq), MTP modules.
void read_attention(TableReader& r, ModelSpec& m) {
    set(m.head_size, r.count("head_dim", Need::optional));
    set(m.qk_norm, r.flag("qk_norm", Need::optional));
    set(m.attention_sinks, r.flag("attention_sinks", Need::optional));
    set(m.attn_output_gate, r.flag("attn_output_gate", Need::optional));
    set(m.clamped_glu, r.flag("clamped_glu", Need::optional));
    set(m.sandwich_norms, r.flag("sandwich_norms", Need::optional));
    set(m.mtp_layers, r.count("mtp_layers", Need::optional, true));
    set(m.sliding_window, r.count("sliding_window", Need::optional, true));
    const auto every = r.count("full_attention_every", Need::optional);
    if (m.sliding_window > 0 && m.layers > 0 && m.layers <= detail::max_count / 1000000) {
        const int64_t n = every.value_or(0);  // 0 / absent: every layer windowed
        for (int64_t i = 0; i < m.layers; ++i) {
            m.windowed.push_back(n <= 0 || (i + 1) % n != 0);
        }
    }
}

// [model.mla]: multi-head latent attention; kv_heads = heads.
void read_mla(TableReader& r, ModelSpec& m) {
    set(m.mla.q_lora_rank, r.count("q_lora_rank", Need::optional, true));
    set(m.mla.kv_lora_rank, r.count("kv_lora_rank", Need::required));
    set(m.mla.qk_nope_dim, r.count("qk_nope_head_dim", Need::required));
    set(m.mla.qk_rope_dim, r.count("qk_rope_head_dim", Need::required));
    set(m.mla.v_dim, r.count("v_head_dim", Need::required));
    r.finish();
}

void read_moe(TableReader& r, ModelSpec& m) {
    set(m.moe.experts, r.count("experts", Need::required));
    set(m.moe.top_k, r.count("top_k", Need::required));
    m.moe.expert_ffn_hidden = m.ffn_hidden;
    set(m.moe.expert_ffn_hidden, r.count("expert_ffn_hidden", Need::optional));
    set(m.moe.layer_freq, r.count("layer_freq", Need::optional));
    set(m.moe.first_dense_layers, r.count("first_dense_layers", Need::optional, true));
    set(m.moe.shared_ffn_hidden, r.count("shared_ffn_hidden", Need::optional, true));
    set(m.moe.router_bias, r.flag("router_bias", Need::optional));
    set(m.moe.latent, r.count("latent", Need::optional, true));  // LatentMoE; 0 = none
    set(m.moe.shared_gate, r.flag("shared_gate", Need::optional));
    if (m.moe.shared_gate && m.moe.shared_ffn_hidden == 0) {
        r.bad_value("shared_gate", "= true needs a shared expert ('shared_ffn_hidden' > 0)");
    }
    // Group-limited routing (HF n_group / topk_group): both or neither, 0 < topk < groups.
    set(m.moe.router_groups, r.count("router_groups", Need::optional));
    set(m.moe.router_group_topk, r.count("router_group_topk", Need::optional));
    if ((m.moe.router_groups > 0) != (m.moe.router_group_topk > 0)) {
        r.bad_value(m.moe.router_groups > 0 ? "router_groups" : "router_group_topk",
                    "needs its pair ('router_groups' and 'router_group_topk' go together)");
    } else if (m.moe.router_groups > 0 && m.moe.router_group_topk >= m.moe.router_groups) {
        r.bad_value("router_group_topk", "must be less than 'router_groups'");
    }
    r.finish();
}

// [model.mamba]: the Mamba-2 mixer of a hybrid model (core/model.hpp MambaSpec; the names of
// Megatron-Core's MambaMixer / transformers' NemotronHConfig).
void read_mamba(TableReader& r, ModelSpec& m) {
    set(m.mamba.heads, r.count("heads", Need::required));
    set(m.mamba.head_dim, r.count("head_dim", Need::required));
    set(m.mamba.state, r.count("state", Need::required));
    set(m.mamba.groups, r.count("groups", Need::required));
    set(m.mamba.conv_kernel, r.count("conv_kernel", Need::optional));
    set(m.mamba.chunk, r.count("chunk", Need::optional));
    if (m.mamba.heads > 0 && m.mamba.groups > 0 && m.mamba.heads % m.mamba.groups != 0) {
        r.bad_value("groups",
                    "= " + std::to_string(m.mamba.groups) + " does not divide 'heads' = " +
                        std::to_string(m.mamba.heads) + " (heads share B and C within a group)");
    }
    r.finish();
}

// [model.gdn]: the gated DeltaNet mixer of a hybrid model (core/model.hpp GdnSpec; the names of
// Megatron's --linear-* flags without the prefix).
void read_gdn(TableReader& r, ModelSpec& m) {
    set(m.gdn.qk_heads, r.count("qk_heads", Need::required));
    set(m.gdn.v_heads, r.count("v_heads", Need::required));
    set(m.gdn.qk_head_dim, r.count("qk_head_dim", Need::required));
    set(m.gdn.v_head_dim, r.count("v_head_dim", Need::required));
    set(m.gdn.conv_kernel, r.count("conv_kernel", Need::optional));
    set(m.gdn.chunk, r.count("chunk", Need::optional));
    if (m.gdn.qk_heads > 0 && m.gdn.v_heads % m.gdn.qk_heads != 0) {
        r.bad_value("v_heads",
                    "= " + std::to_string(m.gdn.v_heads) + " is not a multiple of 'qk_heads' = " +
                        std::to_string(m.gdn.qk_heads) +
                        " (transformer_config.py @d98e8a64 asserts it: q and k repeat over the "
                        "value heads)");
    }
    r.finish();
}

// hybrid_layer_pattern: one letter a layer, as Megatron's --hybrid-layer-pattern writes it
// (M Mamba-2, * attention, - MLP, E MoE, G gated DeltaNet). Stage boundaries ('|') belong to the
// plan, not the model, and are refused here.
void read_pattern(TableReader& r, ModelSpec& m, bool has_mamba, bool has_moe, bool has_gdn) {
    const auto text = r.text("hybrid_layer_pattern", Need::optional);
    if (!text) {
        if (has_mamba || has_gdn) {
            r.bad_value("hybrid_layer_pattern",
                        std::string("is missing: [model.") + (has_mamba ? "mamba" : "gdn") +
                            "] is set, so the model needs the kind of each layer (M Mamba-2, * "
                            "attention, - MLP, E MoE, G gated DeltaNet)");
        }
        return;
    }
    std::vector<LayerKind> kinds;
    for (const char c : *text) {
        switch (c) {
        case 'M':
            kinds.push_back(LayerKind::mamba);
            break;
        case '*':
            kinds.push_back(LayerKind::attention);
            break;
        case '-':
            kinds.push_back(LayerKind::mlp);
            break;
        case 'E':
            kinds.push_back(LayerKind::moe);
            break;
        case 'G':
            kinds.push_back(LayerKind::gdn);
            break;
        default:
            r.bad_value("hybrid_layer_pattern",
                        std::string("has '") + c +
                            "': cleave reads M (Mamba-2), * (attention), - (MLP), E (MoE) and G "
                            "(gated DeltaNet)" +
                            (c == '|' ? "; a stage boundary '|' belongs to the plan's layer map"
                                      : ""));
            return;
        }
    }
    if (m.layers > 0 && static_cast<int64_t>(kinds.size()) != m.layers) {
        r.bad_value("hybrid_layer_pattern",
                    "has " + std::to_string(kinds.size()) + " layers, 'layers' = " +
                        std::to_string(m.layers));
        return;
    }
    const auto has = [&](LayerKind k) { return std::find(kinds.begin(), kinds.end(), k) != kinds.end(); };
    if (has(LayerKind::mamba) && !has_mamba) {
        r.bad_value("hybrid_layer_pattern", "has Mamba-2 layers (M) but no [model.mamba] table");
        return;
    }
    if (has(LayerKind::gdn) && !has_gdn) {
        r.bad_value("hybrid_layer_pattern", "has gated DeltaNet layers (G) but no [model.gdn] table");
        return;
    }
    if (has(LayerKind::moe) && !has_moe) {
        r.bad_value("hybrid_layer_pattern", "has MoE layers (E) but no [model.moe] table");
        return;
    }
    m.layer_kinds = std::move(kinds);
}

// Value checks (divisibility, MoE consistency) at the key they are about; skipped for keys that
// already have a diagnostic so each problem is reported once.
void check_values(const ModelSpec& m,
                  TableReader& model,
                  TableReader* moe,
                  detail::DiagnosticSink& sink) {
    for (const auto& p : detail::model_problems(m)) {
        const bool in_moe = p.field.rfind("moe.", 0) == 0;
        TableReader* r = in_moe ? moe : &model;
        const std::string key = in_moe ? p.field.substr(4) : p.field;
        if (r == nullptr || r->failed(key) || (key == "kv_heads" && model.failed("heads"))) {
            continue;
        }
        sink.error(r->where(key), p.message);
    }
}

}  // namespace

ModelSpec parse_model_toml(std::string_view text, const std::string& source_name) {
    const toml::table root = detail::parse_toml(text, source_name);
    detail::DiagnosticSink sink(source_name);
    TableReader top(root, "", sink);
    ModelSpec m;
    m.name = std::filesystem::path(source_name).stem().string();
    if (const toml::table* t = top.table("model", Need::required)) {
        TableReader r(*t, "model", sink);
        set(m.name, r.text("name", Need::optional));
        read_style(r, m);
        read_sizes(r, m);
        read_attention(r, m);
        if (const toml::table* at = r.table("mla", Need::optional)) {
            TableReader mla(*at, "model.mla", sink);
            read_mla(mla, m);
        }
        std::optional<TableReader> moe;
        if (const toml::table* mt = r.table("moe", Need::optional)) {
            moe.emplace(*mt, "model.moe", sink);
            read_moe(*moe, m);
        }
        const toml::table* mamba_table = r.table("mamba", Need::optional);
        if (mamba_table != nullptr) {
            TableReader mr(*mamba_table, "model.mamba", sink);
            read_mamba(mr, m);
        }
        const toml::table* gdn_table = r.table("gdn", Need::optional);
        if (gdn_table != nullptr) {
            TableReader gr(*gdn_table, "model.gdn", sink);
            read_gdn(gr, m);
        }
        read_pattern(r, m, mamba_table != nullptr, moe.has_value(), gdn_table != nullptr);
        r.finish();
        check_values(m, r, moe ? &*moe : nullptr, sink);
    }
    top.finish();
    sink.throw_if_any();
    return m;
}

ModelSpec load_model(const std::filesystem::path& file) {
    const std::string text = detail::read_text_file(file);
    if (file.extension() == ".json") {
        return parse_model_hf_json(text, file.string());
    }
    return parse_model_toml(text, file.string());
}

}  // namespace cleave
