// cleave model FILE: the derived facts of a model (parameter counts per part, layer and stage).
#include "cli/commands.hpp"
#include "core/errors.hpp"
#include "core/load.hpp"
#include "core/model.hpp"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace cleave::cli {

namespace {

struct ModelOptions {
    std::string file;
    std::string format = "table";
    int64_t pp = 0;  // 0 = no per-stage split
};

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
        b["router"] = m.hidden * m.moe.experts;
        b["expert"] = params_mlp(m, m.moe.expert_ffn_hidden);
        b["moe_layer"] = params_attention(m) + params_layer_norms(m) + m.hidden * m.moe.experts +
                         m.moe.experts * params_mlp(m, m.moe.expert_ffn_hidden);
    }
    return b;
}

nlohmann::json model_json(const ModelSpec& m, int64_t pp) {
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
    j["norm"] = name_of(m.norm);
    j["positions"] = name_of(m.positions);
    j["tied_embeddings"] = m.tied_embeddings;
    j["linear_bias"] = m.linear_bias;
    j["qkv_bias"] = m.qkv_bias;
    j["params_total"] = params_total(m);
    j["params_active"] = params_active(m);
    j["params_per_layer"] = params_per_layer(m);
    j["params_embedding"] = params_embedding(m);
    j["params_head"] = params_head(m);
    j["breakdown"] = breakdown_json(m);
    j["moe"] = nullptr;
    if (m.moe.enabled()) {
        j["moe"] = {{"experts", m.moe.experts},
                    {"top_k", m.moe.top_k},
                    {"expert_ffn_hidden", m.moe.expert_ffn_hidden},
                    {"layer_freq", m.moe.layer_freq},
                    {"first_dense_layers", m.moe.first_dense_layers},
                    {"moe_layers", moe_layer_count(m)}};
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

void print_table(std::ostream& out, const nlohmann::json& j) {
    out << "# cleave model: " << j["name"].get<std::string>() << "\n";
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
                          "norm",
                          "positions",
                          "tied_embeddings",
                          "linear_bias",
                          "qkv_bias"}) {
        row(k, j[k]);
    }
    if (!j["moe"].is_null()) {
        for (const auto& [k, v] : j["moe"].items()) {
            row("moe." + k, v);
        }
    }
    for (const char* k :
         {"params_total", "params_active", "params_per_layer", "params_embedding", "params_head"}) {
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

void run_model(const ModelOptions& o, CliContext& ctx) {
    const ModelSpec m = load_model(o.file);
    if (o.pp > 0 && m.layers % o.pp != 0) {
        throw ConfigError("--pp " + std::to_string(o.pp) +
                          " does not divide layers=" + std::to_string(m.layers));
    }
    const nlohmann::json j = model_json(m, o.pp);
    if (o.format == "json") {
        ctx.out << j.dump(2) << "\n";
    } else {
        print_table(ctx.out, j);
    }
}

}  // namespace

void setup_model(CLI::App& app, CliContext& ctx) {
    auto opts = std::make_shared<ModelOptions>();
    auto* sub = app.add_subcommand("model", "Print a model's derived facts and parameter counts");
    sub->add_option("MODEL", opts->file, "Model: cleave TOML or Hugging Face config.json")
        ->required()
        ->check(CLI::ExistingFile);
    sub->add_option("--format", opts->format, "Output: table or json")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    sub->add_option("--pp", opts->pp, "Also list the parameters of each of this many stages")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub->callback([opts, &ctx] { run_model(*opts, ctx); });
}

}  // namespace cleave::cli
