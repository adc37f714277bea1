// The derived facts of a model (parameter counts per part, layer and stage): cleave model
// (api/cleave.hpp model_to_json).
#include "api/cleave.hpp"
#include "core/errors.hpp"
#include "core/load.hpp"
#include "core/model.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace cleave::api {

namespace {


const char* name_of(MlpKind k) {
    return k == MlpKind::swiglu ? "swiglu" : "gelu";
}

const char* name_of(NormKind k) {
    return k == NormKind::rmsnorm ? "rmsnorm" : "layernorm";
}

const char* name_of(PositionKind k) {
    return k == PositionKind::rope ? "rope" : "learned";
}

int64_t moe_layer_count(const ModelSpec& m) {
    int64_t n = 0;
    for (int64_t i = 0; i < m.layers; ++i) {
        n += is_moe_layer(m, i) ? 1 : 0;
    }
    return n;
}

nlohmann::json breakdown_json(const ModelSpec& m) {
    nlohmann::json b;
    b["attention"] = params_attention(m);
    b["mlp"] = params_mlp(m, m.ffn_hidden);
    b["norms"] = params_layer_norms(m);
    b["dense_layer"] = params_per_layer(m);
    b["embedding"] = params_embedding(m);
    b["head"] = params_head(m);
    if (m.moe.enabled()) {
        b["router"] = params_router(m);
        b["expert"] = params_expert(m);
        b["shared_expert"] = params_shared_expert(m);
        if (m.moe.latent > 0) {
            b["latent_proj"] = params_latent_proj(m);
        }
        b["moe_layer"] = params_attention(m) + params_layer_norms(m) + params_moe_dense(m) +
                         m.moe.experts * params_expert(m);
    }
    if (is_hybrid(m)) {
        // A hybrid layer is one block and its pre-norm (core params_hybrid_layer).
        b.erase("dense_layer");
        b["norms"] = params_norm(m, m.hidden);
        if (m.mamba.enabled()) {
            b["mamba_layer"] = params_hybrid_layer(m, LayerKind::mamba);
        }
        if (m.gdn.enabled()) {
            b["gdn_layer"] = params_hybrid_layer(m, LayerKind::gdn);
        }
        b["attention_layer"] = params_hybrid_layer(m, LayerKind::attention);
        b["mlp_layer"] = params_hybrid_layer(m, LayerKind::mlp);
        if (m.moe.enabled()) {
            b["moe_layer"] = params_hybrid_layer(m, LayerKind::moe);
        }
    }
    if (m.mtp_layers > 0) {
        b["mtp"] = params_mtp(m);
    }
    return b;
}

// What the counts include, said once (the cards differ: DeepSeek-V3 671B excludes its MTP
// module, OpenAI's gpt-oss active count excludes the input embedding).
std::string convention_of(const ModelSpec& m) {
    std::string c =
        "params_total counts every parameter once, the embedding and the output head included";
    if (m.mtp_layers > 0) {
        c += ", the MTP modules apart (params_mtp; embedding and head shared with the model)";
    }
    if (m.moe.enabled()) {
        c += "; params_active counts top_k routed + shared experts, the embedding included "
             "(params_active_no_embedding leaves the input embedding out)";
    }
    if (is_hybrid(m)) {
        c += "; a hybrid model's layers are one block each (Mamba-2, gated DeltaNet, attention, "
             "MLP or MoE) with its pre-norm, params_per_layer their mean";
    }
    return c;
}

nlohmann::json attention_json(const ModelSpec& m) {
    nlohmann::json a;
    a["v_head_dim"] = v_head_dim(m);
    a["qk_norm"] = m.qk_norm;
    a["attention_sinks"] = m.attention_sinks;
    a["output_gate"] = m.attn_output_gate;
    a["sliding_window"] = m.sliding_window;
    a["windowed_layers"] = windowed_layer_count(m);
    a["mla"] = nullptr;
    if (m.mla.enabled()) {
        a["mla"] = {{"q_lora_rank", m.mla.q_lora_rank},
                    {"kv_lora_rank", m.mla.kv_lora_rank},
                    {"qk_nope_head_dim", m.mla.qk_nope_dim},
                    {"qk_rope_head_dim", m.mla.qk_rope_dim},
                    {"v_head_dim", m.mla.v_dim}};
    }
    return a;
}

nlohmann::json model_json_of(const ModelSpec& m, int64_t pp) {
    nlohmann::json j;
    j["name"] = m.name;
    j["layers"] = m.layers;
    j["hidden"] = m.hidden;
    j["heads"] = m.heads;
    j["kv_heads"] = m.kv_heads;
    j["head_dim"] = head_dim(m);
    j["ffn_hidden"] = m.ffn_hidden;
    j["vocab"] = m.vocab;
    j["seq_len"] = m.seq_len;
    j["mlp"] = name_of(m.mlp);
    j["squared_relu"] = m.squared_relu;  // relu(x)^2 (Nemotron), priced with gelu's shapes
    j["norm"] = name_of(m.norm);
    j["sandwich_norms"] = m.sandwich_norms;  // a norm after each block too (Gemma)
    j["positions"] = name_of(m.positions);
    j["tied_embeddings"] = m.tied_embeddings;
    j["linear_bias"] = m.linear_bias;
    j["qkv_bias"] = m.qkv_bias;
    j["params_total"] = params_total(m);
    j["params_active"] = params_active(m);
    // A hybrid model's layers differ by kind: the mean over its layers (breakdown has each kind).
    j["params_per_layer"] = is_hybrid(m) ? (params_total(m) - params_embedding(m) - params_head(m)) /
                                               std::max<int64_t>(1, m.layers)
                                         : params_per_layer(m);
    j["params_embedding"] = params_embedding(m);
    j["params_head"] = params_head(m);
    j["params_active_no_embedding"] = params_active(m) - m.vocab * m.hidden;
    j["params_mtp"] = params_mtp(m);
    j["mtp_layers"] = m.mtp_layers;
    j["convention"] = convention_of(m);
    j["attention"] = attention_json(m);
    j["breakdown"] = breakdown_json(m);
    j["moe"] = nullptr;
    if (m.moe.enabled()) {
        j["moe"] = {{"experts", m.moe.experts},
                    {"top_k", m.moe.top_k},
                    {"expert_ffn_hidden", m.moe.expert_ffn_hidden},
                    {"layer_freq", m.moe.layer_freq},
                    {"first_dense_layers", m.moe.first_dense_layers},
                    {"shared_ffn_hidden", m.moe.shared_ffn_hidden},
                    {"router_bias", m.moe.router_bias},
                    {"shared_gate", m.moe.shared_gate},
                    {"moe_layers", moe_layer_count(m)}};
        if (m.moe.latent > 0) {
            j["moe"]["latent"] = m.moe.latent;
        }
    }
    j["hybrid"] = nullptr;
    if (is_hybrid(m)) {
        std::string pattern;
        for (const LayerKind k : m.layer_kinds) {
            pattern += layer_kind_letter(k);
        }
        j["hybrid"] = {{"pattern", pattern},
                       {"mamba_layers", kind_count(m, LayerKind::mamba, 0, m.layers)},
                       {"gdn_layers", kind_count(m, LayerKind::gdn, 0, m.layers)},
                       {"attention_layers", kind_count(m, LayerKind::attention, 0, m.layers)},
                       {"mlp_layers", kind_count(m, LayerKind::mlp, 0, m.layers)},
                       {"moe_layers", kind_count(m, LayerKind::moe, 0, m.layers)}};
        if (m.mamba.enabled()) {
            nlohmann::json& h = j["hybrid"];
            h["mamba_heads"] = m.mamba.heads;
            h["mamba_head_dim"] = m.mamba.head_dim;
            h["mamba_d_inner"] = m.mamba.d_inner();
            h["mamba_state"] = m.mamba.state;
            h["mamba_groups"] = m.mamba.groups;
            h["mamba_conv_kernel"] = m.mamba.conv_kernel;
            h["mamba_chunk"] = m.mamba.chunk;
        }
        if (m.gdn.enabled()) {  // Megatron's --linear-* names
            nlohmann::json& h = j["hybrid"];
            h["linear_num_key_heads"] = m.gdn.qk_heads;
            h["linear_num_value_heads"] = m.gdn.v_heads;
            h["linear_key_head_dim"] = m.gdn.qk_head_dim;
            h["linear_value_head_dim"] = m.gdn.v_head_dim;
            h["linear_conv_kernel_dim"] = m.gdn.conv_kernel;
            h["linear_chunk"] = m.gdn.chunk;
        }
        if (!m.mtp_kinds.empty()) {
            std::string mtp;
            for (const LayerKind k : m.mtp_kinds) {
                mtp += layer_kind_letter(k);
            }
            j["hybrid"]["mtp_pattern"] = mtp;
        }
    }
    if (pp > 0) {
        nlohmann::json stages = nlohmann::json::array();
        for (int64_t s = 0; s < pp; ++s) {
            stages.push_back(params_stage(m, pp, s));
        }
        j["pp"] = pp;
        j["params_per_stage"] = stages;
    }
    return j;
}

std::string billions(int64_t n) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3fB", static_cast<double>(n) / 1e9);
    return b;
}

void print_model_json(std::ostream& out, const nlohmann::json& j) {
    out << "# cleave model: " << j["name"].get<std::string>() << "\n";
    out << "# convention: " << j["convention"].get<std::string>() << "\n";
    out << "# field" << std::string(25, ' ') << "value  (params also in billions)\n";
    auto row = [&out](const std::string& key, const nlohmann::json& v) {
        out << key << std::string(key.size() < 32 ? 32 - key.size() : 1, ' ')
            << (v.is_string() ? v.get<std::string>() : v.dump());
        if (v.is_number_integer() && key.rfind("params", 0) == 0) {
            out << "  " << billions(v.get<int64_t>());
        }
        out << "\n";
    };
    for (const char* k : {"layers",
                          "hidden",
                          "heads",
                          "kv_heads",
                          "head_dim",
                          "ffn_hidden",
                          "vocab",
                          "seq_len",
                          "mlp",
                          "squared_relu",
                          "norm",
                          "sandwich_norms",
                          "positions",
                          "tied_embeddings",
                          "linear_bias",
                          "qkv_bias"}) {
        row(k, j[k]);
    }
    for (const auto& [k, v] : j["attention"].items()) {
        if (k == "mla") {
            for (const auto& [mk, mv] : v.items()) {
                row("mla." + mk, mv);
            }
        } else {
            row("attention." + k, v);
        }
    }
    if (!j["moe"].is_null()) {
        for (const auto& [k, v] : j["moe"].items()) {
            row("moe." + k, v);
        }
    }
    if (!j["hybrid"].is_null()) {
        for (const auto& [k, v] : j["hybrid"].items()) {
            row("hybrid." + k, v);
        }
    }
    row("mtp_layers", j["mtp_layers"]);
    for (const char* k : {"params_total",
                          "params_active",
                          "params_active_no_embedding",
                          "params_mtp",
                          "params_per_layer",
                          "params_embedding",
                          "params_head"}) {
        row(k, j[k]);
    }
    for (const auto& [k, v] : j["breakdown"].items()) {
        row("params_breakdown." + k, v);
    }
    if (j.contains("params_per_stage")) {
        const auto& stages = j["params_per_stage"];
        for (size_t s = 0; s < stages.size(); ++s) {
            row("params_stage." + std::to_string(s), stages[s]);
        }
    }
}

void check_stages(const ModelSpec& m, int64_t pp) {
    if (pp > 0 && m.layers % pp != 0) {
        throw ConfigError("--pp " + std::to_string(pp) +
                          " does not divide layers=" + std::to_string(m.layers));
    }
}

}  // namespace

nlohmann::json model_to_json(const ModelSpec& m, int64_t pp) {
    check_stages(m, pp);
    return model_json_of(m, pp);
}

void print_model_table(std::ostream& os, const ModelSpec& m, int64_t pp) {
    print_model_json(os, model_to_json(m, pp));
}

}  // namespace cleave::api
