// Software-stack TOML (stacks/*.toml) -> SoftwareStack, and finding shipped stacks by name.
// Keys carry their unit as a suffix (STYLE S3.3); every key is checked, unknown keys are errors.
#include "core/stack.hpp"

#include "core/errors.hpp"
#include "core/load_detail.hpp"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <utility>

namespace cleave {

namespace {

namespace fs = std::filesystem;
using detail::Need;
using detail::TableReader;

template <class T>
void set(T& field, const std::optional<T>& v) {
    if (v) {
        field = *v;
    }
}

void read_stack_table(TableReader& r, SoftwareStack& s) {
    set(s.name, r.text("name", Need::required));
    s.display_name = s.name;
    set(s.display_name, r.text("display_name", Need::optional));
    set(s.framework,
        r.choice<StackFramework>("framework",
                                 Need::required,
                                 {{"megatron", StackFramework::megatron},
                                  {"deepspeed", StackFramework::deepspeed},
                                  {"torchtitan", StackFramework::torchtitan},
                                  {"llm-foundry", StackFramework::llm_foundry}}));
    set(s.model_code,
        r.choice<ModelCode>("model_code",
                            Need::optional,
                            {{"framework", ModelCode::framework},
                             {"hf-transformers", ModelCode::hf_transformers}}));
    set(s.year, r.count("year", Need::required));
    if (const auto rel = r.text("release", Need::optional)) {
        if (!valid_release(*rel)) {
            r.bad_value("release", "must be a release as YY.MM (\"26.04\"), got \"" + *rel + "\"");
        }
        s.release = *rel;
    }
}

void read_known_releases(const toml::table& t, TableReader& r, SoftwareStack& s,
                         detail::DiagnosticSink& sink) {
    r.accept("known_releases");
    const toml::node* n = t.get("known_releases");
    if (n == nullptr) {
        return;
    }
    const toml::array* a = n->as_array();
    if (a == nullptr) {
        sink.error(n->source(), "'stack.known_releases' must be a list of releases (YY.MM)");
        return;
    }
    for (const toml::node& x : *a) {
        const auto v = x.value<std::string>();
        if (!v || !valid_release(*v) ||
            (!s.known_releases.empty() && *v <= s.known_releases.back())) {
            sink.error(x.source(), "'stack.known_releases' entries must be YY.MM releases in "
                                   "increasing order");
            return;
        }
        s.known_releases.push_back(*v);
    }
}

bool increasing(const std::vector<double>& v) {
    return std::adjacent_find(v.begin(), v.end(), std::greater_equal<>()) == v.end();
}

void read_curve(TableReader& r, AttentionCurve& c) {
    set(c.gpu, r.text("gpu", Need::required));
    set(c.head_dim, r.quantity("head_dim", Need::required));
    const auto seq = r.numbers("seq", Need::required, false);
    const auto fwd = r.numbers("fwd_efficiency", Need::required, true);
    const auto bwd = r.numbers("bwd_efficiency", Need::required, true);
    if (!seq || !fwd || !bwd) {
        return;
    }
    if (seq->empty() || !increasing(*seq)) {
        r.bad_value("seq", "must hold at least one length, strictly increasing");
        return;
    }
    if (fwd->size() != seq->size() || bwd->size() != seq->size()) {
        r.bad_value(fwd->size() != seq->size() ? "fwd_efficiency" : "bwd_efficiency",
                    "must have one value per " + r.quoted("seq") + " entry (" +
                        std::to_string(seq->size()) + ")");
        return;
    }
    c.seq = *seq;
    c.fwd = *fwd;
    c.bwd = *bwd;
}

void read_attention(TableReader& r, SoftwareStack& s) {
    set(s.attention,
        r.choice<AttentionImpl>(
            "impl",
            Need::required,
            {{"materialized", AttentionImpl::materialized}, {"fused", AttentionImpl::fused}}));
    set(s.causal_skip, r.flag("causal_skip", Need::optional));
    set(s.attention_step_overhead_us, r.quantity("step_overhead_us", Need::optional, true));
    r.accept("curve");  // an array of tables, read by read_curves()
}

void read_curves(const toml::table& attention, SoftwareStack& s, detail::DiagnosticSink& sink) {
    const toml::node* n = attention.get("curve");
    if (n == nullptr) {
        return;
    }
    const toml::array* a = n->as_array();
    if (a == nullptr || !a->is_array_of_tables()) {
        sink.error(n->source(),
                   "'attention.curve' must be an array of tables ([[attention.curve]])");
        return;
    }
    for (const toml::node& e : *a) {
        AttentionCurve c;
        TableReader cr(*e.as_table(), "attention.curve", sink);
        read_curve(cr, c);
        cr.finish();
        s.attention_curves.push_back(std::move(c));
    }
}

void read_strings(const toml::table& t,
                  std::string_view key,
                  const std::string& path,
                  std::vector<std::string>& out,
                  detail::DiagnosticSink& sink) {
    const toml::node* n = t.get(key);
    if (n == nullptr) {
        return;
    }
    const toml::array* a = n->as_array();
    if (a == nullptr) {
        sink.error(n->source(),
                   "'" + path + "." + std::string(key) + "' must be an array of strings");
        return;
    }
    for (const toml::node& e : *a) {
        if (const auto* v = e.as_string()) {
            out.push_back(v->get());
        } else {
            sink.error(e.source(),
                       "'" + path + "." + std::string(key) + "' elements must be strings");
        }
    }
}

// [[float8.release]]: torchtitan's Float8 converter by release, oldest first.
void read_float8(const toml::table& float8, SoftwareStack& s, detail::DiagnosticSink& sink) {
    const toml::node* n = float8.get("release");
    if (n == nullptr) {
        return;
    }
    const toml::array* a = n->as_array();
    if (a == nullptr || !a->is_array_of_tables()) {
        sink.error(n->source(), "'float8.release' must be an array of tables ([[float8.release]])");
        return;
    }
    const std::pair<const char*, Float8Recipe> names[] = {
        {"tensorwise", Float8Recipe::tensorwise},
        {"rowwise", Float8Recipe::rowwise},
        {"rowwise_with_gw_hp", Float8Recipe::rowwise_with_gw_hp}};
    for (const toml::node& e : *a) {
        Float8Release f;
        TableReader r(*e.as_table(), "float8.release", sink);
        if (const auto rel = r.text("release", Need::required)) {
            if (!valid_release(*rel) ||
                (!s.float8_releases.empty() && *rel <= s.float8_releases.back().release)) {
                r.bad_value("release", "must be a release as YY.MM, later than the row before, "
                                       "got \"" + *rel + "\"");
            }
            f.release = *rel;
        }
        set(f.commit, r.text("commit", Need::required));
        r.accept("recipes");
        std::vector<std::string> recipes;
        read_strings(*e.as_table(), "recipes", "float8.release", recipes, sink);
        for (const std::string& name : recipes) {
            const auto* hit = std::find_if(std::begin(names), std::end(names),
                                           [&](const auto& x) { return name == x.first; });
            if (hit == std::end(names)) {
                r.bad_value("recipes", "entries must be \"tensorwise\", \"rowwise\" or "
                                       "\"rowwise_with_gw_hp\", got \"" + name + "\"");
            } else {
                f.recipes.push_back(hit->second);
            }
        }
        if (recipes.empty()) {
            r.bad_value("recipes", "must name at least one recipe, the release's default first");
        }
        set(f.fsdp_all_gather, r.flag("enable_fsdp_float8_all_gather", Need::required));
        set(f.precompute_scale, r.flag("precompute_float8_dynamic_scale_for_fsdp", Need::required));
        set(f.force_recompute_key, r.flag("has_force_recompute_fp8_weight_in_bwd", Need::required));
        set(f.saves_float8_input, r.flag("saves_float8_input", Need::required));
        set(f.saves_float8_weight, r.flag("saves_float8_weight", Need::required));
        r.finish();
        s.float8_releases.push_back(std::move(f));
    }
}

void read_sections(TableReader& top, SoftwareStack& s, detail::DiagnosticSink& sink) {
    if (const toml::table* t = top.table("attention", Need::required)) {
        TableReader r(*t, "attention", sink);
        read_attention(r, s);
        r.finish();
        read_curves(*t, s, sink);
        if (s.attention == AttentionImpl::materialized && !s.attention_curves.empty()) {
            r.bad_value("curve", "is for fused attention only (impl = \"fused\")");
        }
    }
    if (const toml::table* t = top.table("memory", Need::required)) {
        TableReader r(*t, "memory", sink);
        set(s.hidden_dropout, r.flag("hidden_dropout", Need::required));
        set(s.fused_cross_entropy, r.flag("fused_cross_entropy", Need::required));
        set(s.grad_dtype,
            r.choice<Dtype>("grad_dtype",
                            Need::required,
                            {{"fp32", Dtype::fp32}, {"bf16", Dtype::bf16}, {"fp16", Dtype::fp16}}));
        set(s.loss_buffers, r.quantity("loss_buffers", Need::optional));
        set(s.loss_parallel_buffers, r.quantity("loss_parallel_buffers", Need::optional));
        set(s.op_level_sac, r.flag("op_level_sac", Need::optional));
        set(s.loss,
            r.choice<LossImpl>("loss",
                               Need::optional,
                               {{"unfused", LossImpl::megatron_unfused},
                                {"native", LossImpl::megatron_native},
                                {"te", LossImpl::te},
                                {"eager", LossImpl::torch_eager},
                                {"compiled", LossImpl::torch_compiled}}));
        set(s.loss_chunks, r.count("loss_chunks", Need::optional));
        // Fractions of the allocated peak, each below 1.
        for (auto [key, field] : {std::pair{"allocator_overhead", &s.allocator_overhead},
                                  std::pair{"expandable_residue", &s.expandable_residue},
                                  std::pair{"oom_residue", &s.oom_residue}}) {
            if (const auto f = r.quantity(key, Need::optional, true)) {
                if (*f >= 1.0) {
                    r.bad_value(key, "must be below 1 (a fraction of the allocated peak)");
                } else {
                    *field = *f;
                }
            }
        }
        set(s.expandable_segments, r.flag("expandable_segments", Need::optional));
        r.finish();
    }
    if (const toml::table* t = top.table("data_parallel", Need::required)) {
        TableReader r(*t, "data_parallel", sink);
        set(s.overlap_grad_reduce, r.flag("overlap_grad_reduce", Need::required));
        set(s.overlap_param_gather, r.flag("overlap_param_gather", Need::required));
        set(s.bucket_mparams, r.quantity("bucket_mparams", Need::required));
        set(s.fsdp_prefetch, r.flag("fsdp_prefetch", Need::required));
        set(s.reshard_after_forward, r.flag("reshard_after_forward", Need::required));
        if (const auto f = r.quantity("comm_sm_fraction", Need::required, true)) {
            if (*f >= 1.0) {
                r.bad_value("comm_sm_fraction", "must be below 1");
            } else {
                s.comm_sm_fraction = *f;
            }
        }
        r.finish();
    }
    if (const toml::table* t = top.table("tensor_parallel", Need::required)) {
        TableReader r(*t, "tensor_parallel", sink);
        set(s.tp_comm_overlap, r.flag("comm_overlap", Need::required));
        // With comm_overlap only: what the userbuffers overlap costs its GEMMs.
        const Need ub = s.tp_comm_overlap ? Need::required : Need::optional;
        const std::vector<detail::Choice<UbMethod>> methods = {{"pipeline", UbMethod::pipeline},
                                                       {"ring_exchange", UbMethod::ring_exchange}};
        set(s.tp_overlap_row_fprop, r.choice<UbMethod>("overlap_row_fprop", ub, methods));
        set(s.tp_overlap_row_fprop_quantised,
            r.choice<UbMethod>("overlap_row_fprop_quantised", ub, methods));
        const auto sm_share = [&r, ub](std::string_view key, double& field) {
            if (const auto f = r.quantity(key, ub, true)) {
                if (*f >= 1.0) {
                    r.bad_value(key, "must be below 1");
                } else {
                    field = *f;
                }
            }
        };
        sm_share("overlap_pipeline_sm_fraction", s.tp_overlap_sm_fraction);
        sm_share("overlap_bulk_sm_fraction", s.tp_overlap_bulk_sm_fraction);
        set(s.tp_overlap_pipeline_splits, r.count("overlap_pipeline_splits", ub));
        r.finish();
    }
    if (const toml::table* t = top.table("pipeline", Need::required)) {
        TableReader r(*t, "pipeline", sink);
        set(s.p2p_overhead_us, r.quantity("p2p_overhead_us", Need::required, true));
        r.finish();
    }
    if (const toml::table* t = top.table("moe", Need::optional)) {
        TableReader r(*t, "moe", sink);
        set(s.moe_dispatcher,
            r.choice<MoeDispatcher>("dispatcher",
                                    Need::required,
                                    {{"alltoall", MoeDispatcher::alltoall},
                                     {"allgather", MoeDispatcher::allgather},
                                     {"deepep", MoeDispatcher::deepep}}));
        set(s.moe_a2a_overlap, r.flag("a2a_overlap", Need::required));
        set(s.moe_grouped_gemm, r.flag("grouped_gemm", Need::required));
        set(s.moe_grouped_gemm_streams, r.count("grouped_gemm_streams", Need::required, true));
        set(s.moe_sync_us, r.quantity("sync_us", Need::required, true));
        set(s.moe_probs_in_experts, r.flag("probs_in_experts", Need::optional));
        set(s.moe_deepep_num_sms, r.count("deepep_num_sms", Need::optional, true));
        r.finish();
    }
    if (const toml::table* t = top.table("norm", Need::optional)) {
        TableReader r(*t, "norm", sink);
        set(s.norm_tuned_rmsnorm, r.numbers("rmsnorm_tuned_hidden", Need::required, false));
        set(s.norm_tuned_layernorm, r.numbers("layernorm_tuned_hidden", Need::required, false));
        set(s.norm_general_fwd, r.quantity("general_fwd_factor", Need::required));
        set(s.norm_general_bwd, r.quantity("general_bwd_factor", Need::required));
        r.finish();
    }
    if (const toml::table* t = top.table("float8", Need::optional)) {
        TableReader r(*t, "float8", sink);
        r.accept("release");
        r.finish();
        read_float8(*t, s, sink);
    }
    if (const toml::table* t = top.table("export", Need::optional)) {
        TableReader r(*t, "export", sink);
        set(s.torch_compile, r.flag("torch_compile", Need::optional));
        r.accept("recompute_modules");
        r.finish();
        read_strings(*t, "recompute_modules", "export", s.recompute_modules, sink);
    }
}

}  // namespace

const char* to_string(StackFramework f) {
    switch (f) {
    case StackFramework::megatron:
        return "megatron";
    case StackFramework::deepspeed:
        return "deepspeed";
    case StackFramework::torchtitan:
        return "torchtitan";
    case StackFramework::llm_foundry:
        return "llm-foundry";
    }
    return "?";
}

const char* to_string(Float8Recipe r) {
    switch (r) {
    case Float8Recipe::tensorwise:
        return "tensorwise";
    case Float8Recipe::rowwise:
        return "rowwise";
    case Float8Recipe::rowwise_with_gw_hp:
        return "rowwise_with_gw_hp";
    }
    return "?";
}

bool valid_release(const std::string& r) {
    const auto digit = [](char c) { return c >= '0' && c <= '9'; };
    return r.size() == 5 && digit(r[0]) && digit(r[1]) && r[2] == '.' && digit(r[3]) && digit(r[4]);
}

std::string unknown_release_caution(const SoftwareStack& s) {
    const auto& known = s.known_releases;
    const std::string& rel = s.release;
    if (rel.empty() || known.empty() || std::find(known.begin(), known.end(), rel) != known.end()) {
        return "";
    }
    std::string list;
    std::string nearest;
    for (const auto& k : known) {  // oldest first; YY.MM compare as text
        list += (list.empty() ? "" : ", ") + k;
        if (k < rel) {
            nearest = k;
        }
    }
    return "release " + rel + " is not one the stack '" + s.name + "' knows (" + list +
           "): priced as " +
           (nearest.empty() ? known.front() + ", the oldest" : nearest + ", the nearest earlier") +
           "; what differs between the two releases is not in the model (docs/stacks.md)";
}

const char* to_string(UbMethod m) {
    return m == UbMethod::pipeline ? "pipeline" : "ring_exchange";
}

const char* to_string(MoeDispatcher d) {
    switch (d) {
    case MoeDispatcher::alltoall:
        return "alltoall";
    case MoeDispatcher::allgather:
        return "allgather";
    case MoeDispatcher::deepep:
        return "deepep";
    }
    return "?";
}

const char* to_string(LossImpl l) {
    switch (l) {
    case LossImpl::megatron_unfused:
        return "unfused";
    case LossImpl::megatron_native:
        return "native";
    case LossImpl::te:
        return "te";
    case LossImpl::torch_eager:
        return "eager";
    case LossImpl::torch_compiled:
        return "compiled";
    case LossImpl::unset:
        break;
    }
    return "unset";
}

const char* to_string(ModelCode c) {
    return c == ModelCode::hf_transformers ? "hf-transformers" : "framework";
}

const char* to_string(AttentionImpl a) {
    return a == AttentionImpl::fused ? "fused" : "materialized";
}

SoftwareStack parse_stack_toml(std::string_view text, const std::string& source_name) {
    const toml::table root = detail::parse_toml(text, source_name);
    detail::DiagnosticSink sink(source_name);
    TableReader top(root, "", sink);
    SoftwareStack s;
    s.source = source_name;
    if (const toml::table* t = top.table("stack", Need::required)) {
        TableReader r(*t, "stack", sink);
        read_stack_table(r, s);
        read_known_releases(*t, r, s, sink);
        if (!s.release.empty() && !s.known_releases.empty() &&
            std::find(s.known_releases.begin(), s.known_releases.end(), s.release) ==
                s.known_releases.end()) {
            r.bad_value("release", "\"" + s.release + "\" is not in 'known_releases'");
        }
        r.finish();
    }
    read_sections(top, s, sink);
    top.finish();
    sink.throw_if_any();
    return s;
}

std::vector<fs::path> stack_dirs() {
    return detail::data_dirs("CLEAVE_STACKS", CLEAVE_SOURCE_STACKS, CLEAVE_INSTALL_STACKS);
}

std::vector<std::string> shipped_stacks() {
    return detail::toml_stems(stack_dirs());
}

SoftwareStack load_stack(const std::string& name_or_path) {
    if (const auto path = detail::find_toml(name_or_path, stack_dirs())) {
        return parse_stack_toml(detail::read_text_file(*path), path->string());
    }
    throw ConfigError("unknown software stack '" + name_or_path +
                      "': not a file, and not one of the shipped stacks (" +
                      detail::comma_list(shipped_stacks(), "none found") +
                      "); set CLEAVE_STACKS to a folder of stacks");
}

}  // namespace cleave
