// The shipped software stacks and one stack's values, as JSON (the same key names as the stack
// TOML) and as tables: cleave stack list | show (api/cleave.hpp).
#include "api/cleave.hpp"
#include "core/stack.hpp"

#include <cstdio>
#include <memory>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace cleave::api {

namespace {

const char* dtype_name(Dtype d) {
    return d == Dtype::fp32 ? "fp32" : d == Dtype::bf16 ? "bf16" : "fp16";
}

nlohmann::json curves_json(const SoftwareStack& s) {
    nlohmann::json out = nlohmann::json::array();
    for (const AttentionCurve& c : s.attention_curves) {
        out.push_back({{"gpu", c.gpu},
                       {"head_dim", c.head_dim},
                       {"seq", c.seq},
                       {"fwd_efficiency", c.fwd},
                       {"bwd_efficiency", c.bwd}});
    }
    return out;
}

}  // namespace

nlohmann::json stack_to_json(const SoftwareStack& s) {
    return {{"name", s.name},
            {"display_name", s.display_name},
            {"source", s.source},
            {"framework", to_string(s.framework)},
            {"model_code", to_string(s.model_code)},
            {"year", s.year},
            {"attention",
             {{"impl", to_string(s.attention)},
              {"causal_skip", s.causal_skip},
              {"step_overhead_us", s.attention_step_overhead_us},
              {"curve", curves_json(s)}}},
            {"memory",
             {{"hidden_dropout", s.hidden_dropout},
              {"fused_cross_entropy", s.fused_cross_entropy},
              {"loss", to_string(s.loss)},
              {"loss_chunks", s.loss_chunks},
              {"grad_dtype", dtype_name(s.grad_dtype)},
              {"allocator_overhead", s.allocator_overhead},
              {"expandable_segments", s.expandable_segments},
              {"expandable_residue", s.expandable_residue},
              {"oom_residue", s.oom_residue}}},
            {"data_parallel",
             {{"overlap_grad_reduce", s.overlap_grad_reduce},
              {"overlap_param_gather", s.overlap_param_gather},
              {"bucket_mparams", s.bucket_mparams},
              {"fsdp_prefetch", s.fsdp_prefetch},
              {"reshard_after_forward", s.reshard_after_forward},
              {"comm_sm_fraction", s.comm_sm_fraction}}},
            {"tensor_parallel",
             {{"comm_overlap", s.tp_comm_overlap},
              {"overlap_row_fprop", to_string(s.tp_overlap_row_fprop)},
              {"overlap_row_fprop_quantised", to_string(s.tp_overlap_row_fprop_quantised)},
              {"overlap_pipeline_sm_fraction", s.tp_overlap_sm_fraction},
              {"overlap_pipeline_splits", s.tp_overlap_pipeline_splits},
              {"overlap_bulk_sm_fraction", s.tp_overlap_bulk_sm_fraction}}},
            {"pipeline", {{"p2p_overhead_us", s.p2p_overhead_us}}},
            {"moe",
             {{"dispatcher", to_string(s.moe_dispatcher)},
              {"a2a_overlap", s.moe_a2a_overlap},
              {"grouped_gemm", s.moe_grouped_gemm},
              {"grouped_gemm_streams", s.moe_grouped_gemm_streams},
              {"sync_us", s.moe_sync_us},
              {"probs_in_experts", s.moe_probs_in_experts}}},
            {"export",
             {{"torch_compile", s.torch_compile}, {"recompute_modules", s.recompute_modules}}}};
}

namespace {

void print_rows(std::ostream& out, const std::string& prefix, const nlohmann::json& j) {
    for (const auto& [k, v] : j.items()) {
        const std::string key = prefix.empty() ? k : prefix + "." + k;
        if (v.is_object()) {
            print_rows(out, key, v);
            continue;
        }
        const std::string text = v.is_string() ? v.get<std::string>() : v.dump();
        // The longest key, tensor_parallel.overlap_row_fprop_quantised, is 43 characters.
        out << key << std::string(key.size() < 45 ? 45 - key.size() : 1, ' ') << text << "\n";
    }
}

}  // namespace

void print_stack_table(std::ostream& os, const SoftwareStack& s) {
    const nlohmann::json j = stack_to_json(s);
    os << "# cleave stack show: " << j["name"].get<std::string>() << " ("
            << j["display_name"].get<std::string>() << ")\n";
    os << "# key (as in the stack TOML)  value\n";
    print_rows(os, "", j);
}

nlohmann::json stack_list_json() {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& name : shipped_stacks()) {
        const SoftwareStack s = load_stack(name);
        list.push_back({{"name", s.name},
                        {"framework", to_string(s.framework)},
                        {"year", s.year},
                        {"attention", to_string(s.attention)},
                        {"default", s.name == default_stack_name},
                        {"display_name", s.display_name},
                        {"source", s.source}});
    }
    return list;
}

void print_stack_list(std::ostream& os) {
    const nlohmann::json list = stack_list_json();
    char line[256];
    std::snprintf(line,
                  sizeof line,
                  "# %-20s %-11s %4s %-12s  %s\n",
                  "name",
                  "framework",
                  "year",
                  "attention",
                  "description");
    os << line;
    for (const auto& s : list) {
        std::snprintf(line,
                      sizeof line,
                      "%-22s %-11s %4lld %-12s  %s%s\n",
                      s["name"].get<std::string>().c_str(),
                      s["framework"].get<std::string>().c_str(),
                      static_cast<long long>(s["year"].get<int64_t>()),
                      s["attention"].get<std::string>().c_str(),
                      s["display_name"].get<std::string>().c_str(),
                      s["default"].get<bool>() ? " (default)" : "");
        os << line;
    }
}

nlohmann::json stack_json(const SoftwareStack& s) {
    return {{"name", s.name},
            {"framework", to_string(s.framework)},
            {"model_code", to_string(s.model_code)},
            {"attention", to_string(s.attention)},
            {"loss", to_string(s.loss)},
            {"loss_chunks", s.loss_chunks},
            {"torch_compile", s.torch_compile},
            {"source", s.source}};
}

}  // namespace cleave::api
