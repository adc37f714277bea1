// Options by name (api/options.hpp): one entry per CLI flag of the job, plan and search, with
// the check the flag has in cli/common.cpp and cli/cmd_plan.cpp.
#include "api/options.hpp"
#include "api/cleave.hpp"

#include "core/errors.hpp"
#include "core/stack.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace cleave::api {

namespace {

using Ref = std::variant<bool*, int64_t*, double*, std::string*, int*>;

struct Entry {
    OptionInfo info;
    std::function<Ref(NamedOptions&)> ref;
    double min = -std::numeric_limits<double>::infinity();
    double max = std::numeric_limits<double>::infinity();
};

constexpr double inf = std::numeric_limits<double>::infinity();

std::vector<std::string> dtypes() {
    return {"bf16", "fp16", "fp8", "mxfp8", "nvfp4", "fp32"};
}

const std::vector<Entry>& entries() {
    using G = OptionGroup;
    static const std::vector<Entry> table = [] {
        std::vector<Entry> t;
        const auto add = [&t](std::string name, G g, std::string type,
                              std::function<Ref(NamedOptions&)> ref, double lo = -inf,
                              double hi = inf, std::vector<std::string> choices = {}) {
            t.push_back({{std::move(name), g, std::move(type), std::move(choices)},
                         std::move(ref), lo, hi});
        };
        // cli/common.cpp add_job_flags
        add("gpus", G::job, "int", [](NamedOptions& o) { return Ref(&o.job.gpus); }, 1);
        add("gbs", G::job, "int", [](NamedOptions& o) { return Ref(&o.job.gbs); }, 1);
        add("seq", G::job, "int", [](NamedOptions& o) { return Ref(&o.job.seq); }, 0);
        add("dtype", G::job, "str", [](NamedOptions& o) { return Ref(&o.job.dtype); }, -inf, inf,
            dtypes());
        add("fp8-recipe", G::job, "str", [](NamedOptions& o) { return Ref(&o.job.fp8_recipe); },
            -inf, inf, {"tensorwise", "delayed", "blockwise"});
        add("float8-recipe", G::job, "str",
            [](NamedOptions& o) { return Ref(&o.job.float8_recipe); }, -inf, inf,
            {"tensorwise", "rowwise", "rowwise_with_gw_hp"});
        add("float8-fsdp-all-gather", G::job, "str",
            [](NamedOptions& o) { return Ref(&o.job.float8_fsdp_all_gather); }, -inf, inf,
            {"on", "off"});
        add("float8-precompute-scale", G::job, "str",
            [](NamedOptions& o) { return Ref(&o.job.float8_precompute); }, -inf, inf,
            {"on", "off"});
        add("float8-force-recompute-weight", G::job, "str",
            [](NamedOptions& o) { return Ref(&o.job.float8_force_recompute); }, -inf, inf,
            {"on", "off"});
        add("fp8-param-gather", G::job, "bool",
            [](NamedOptions& o) { return Ref(&o.job.fp8_param_gather); });
        add("first-last-layers-bf16", G::job, "bool",
            [](NamedOptions& o) { return Ref(&o.job.first_last_bf16); });
        add("num-layers-at-start-in-bf16", G::job, "int",
            [](NamedOptions& o) { return Ref(&o.job.bf16_layers_start); }, 0);
        add("num-layers-at-end-in-bf16", G::job, "int",
            [](NamedOptions& o) { return Ref(&o.job.bf16_layers_end); }, 0);
        add("use-precision-aware-optimizer", G::job, "bool",
            [](NamedOptions& o) { return Ref(&o.job.precision_aware); });
        add("exp-avg-dtype", G::job, "str", [](NamedOptions& o) { return Ref(&o.job.exp_avg_dtype); },
            -inf, inf, {"fp32", "fp16", "bf16", "fp8"});
        add("exp-avg-sq-dtype", G::job, "str",
            [](NamedOptions& o) { return Ref(&o.job.exp_avg_sq_dtype); }, -inf, inf,
            {"fp32", "fp16", "bf16", "fp8"});
        add("main-grads-dtype", G::job, "str",
            [](NamedOptions& o) { return Ref(&o.job.main_grads_dtype); }, -inf, inf,
            {"fp32", "bf16"});
        add("main-params-dtype", G::job, "str",
            [](NamedOptions& o) { return Ref(&o.job.main_params_dtype); }, -inf, inf,
            {"fp32", "fp16"});
        add("optimizer", G::job, "str", [](NamedOptions& o) { return Ref(&o.job.optimizer); },
            -inf, inf, {"adam", "sgd", "muon"});
        add("muon-num-ns-steps", G::job, "int",
            [](NamedOptions& o) { return Ref(&o.job.muon_ns_steps); }, 1);
        add("muon-tp-mode", G::job, "str", [](NamedOptions& o) { return Ref(&o.job.muon_tp_mode); },
            -inf, inf, {"blockwise", "duplicated", "distributed"});
        add("grad-dtype", G::job, "str", [](NamedOptions& o) { return Ref(&o.job.grad_dtype); },
            -inf, inf, {"bf16", "fp16", "fp32"});
        add("job", G::job, "str", [](NamedOptions& o) { return Ref(&o.job.job_file); });
        add("expandable-segments", G::job, "bool",
            [](NamedOptions& o) { return Ref(&o.job.expandable_segments); });
        add("loss", G::job, "str", [](NamedOptions& o) { return Ref(&o.job.loss); }, -inf, inf,
            {"unfused", "native", "te", "eager", "compiled"});
        add("loss-chunks", G::job, "int", [](NamedOptions& o) { return Ref(&o.job.loss_chunks); },
            1);
        add("cross-entropy-loss-fusion", G::job, "bool",
            [](NamedOptions& o) { return Ref(&o.job.ce_loss_fusion); });
        add("cross-entropy-fusion-impl", G::job, "str",
            [](NamedOptions& o) { return Ref(&o.job.ce_fusion_impl); }, -inf, inf,
            {"native", "te"});
        add("torch-compile", G::job, "bool",
            [](NamedOptions& o) { return Ref(&o.job.torch_compile); });
        add("no-torch-compile", G::job, "bool",
            [](NamedOptions& o) { return Ref(&o.job.no_torch_compile); });
        add("memory-headroom", G::job, "str",
            [](NamedOptions& o) { return Ref(&o.job.memory_headroom); });
        add("moe-capacity", G::job, "float", [](NamedOptions& o) { return Ref(&o.job.moe_capacity); });
        add("moe-pad", G::job, "bool", [](NamedOptions& o) { return Ref(&o.job.moe_pad); });
        add("mtp-num-layers", G::job, "int",
            [](NamedOptions& o) { return Ref(&o.job.mtp_num_layers); }, 0);
        add("moe-imbalance", G::job, "float",
            [](NamedOptions& o) { return Ref(&o.job.moe_imbalance); });
        add("moe-token-dispatcher-type", G::job, "str",
            [](NamedOptions& o) { return Ref(&o.job.moe_dispatcher); }, -inf, inf,
            {"alltoall", "allgather", "flex"});
        add("moe-flex-dispatcher-backend", G::job, "str",
            [](NamedOptions& o) { return Ref(&o.job.moe_flex_backend); }, -inf, inf,
            {"deepep", "hybridep"});
        add("overlap-moe-expert-parallel-comm", G::job, "bool",
            [](NamedOptions& o) { return Ref(&o.job.moe_a2a_overlap); });
        add("moe-router-num-groups", G::job, "int",
            [](NamedOptions& o) { return Ref(&o.job.moe_router_groups); });
        add("moe-router-group-topk", G::job, "int",
            [](NamedOptions& o) { return Ref(&o.job.moe_router_group_topk); });
        add("peft", G::job, "str", [](NamedOptions& o) { return Ref(&o.job.peft); }, -inf, inf,
            {"none", "lora", "dora"});
        add("lora-dim", G::job, "int", [](NamedOptions& o) { return Ref(&o.job.lora_dim); });
        add("lora-alpha", G::job, "float", [](NamedOptions& o) { return Ref(&o.job.lora_alpha); });
        add("lora-target-modules", G::job, "str",
            [](NamedOptions& o) { return Ref(&o.job.lora_target_modules); });
        add("packed-seq", G::job, "bool", [](NamedOptions& o) { return Ref(&o.job.packed_seq); });
        add("cuda-graph-impl", G::job, "str",
            [](NamedOptions& o) { return Ref(&o.job.cuda_graph_impl); }, -inf, inf,
            {"none", "local", "transformer_engine"});
        add("cuda-graph-scope", G::job, "str",
            [](NamedOptions& o) { return Ref(&o.job.cuda_graph_scope); });
        add("packed-seq-mean-len", G::job, "float",
            [](NamedOptions& o) { return Ref(&o.job.packed_seq_mean_len); });
        add("packed-seq-len-std", G::job, "float",
            [](NamedOptions& o) { return Ref(&o.job.packed_seq_len_std); });
        add("stack", G::job, "str", [](NamedOptions& o) { return Ref(&o.job.stack); });
        add("release", G::job, "str", [](NamedOptions& o) { return Ref(&o.job.release); });
        add("calibration", G::job, "str", [](NamedOptions& o) { return Ref(&o.job.calibration); });
        // add_train_flags
        add("tokens", G::train, "str", [](NamedOptions& o) { return Ref(&o.job.train.tokens); });
        add("price-per-gpu-hour", G::train, "float",
            [](NamedOptions& o) { return Ref(&o.job.train.price_per_gpu_hour); }, 0);
        add("pue", G::train, "float", [](NamedOptions& o) { return Ref(&o.job.train.pue); }, 1.0,
            10.0);
        add("failures-per-gpu-hour", G::train, "float",
            [](NamedOptions& o) { return Ref(&o.job.train.failures_per_gpu_hour); }, 0);
        add("checkpoint-interval-h", G::train, "float",
            [](NamedOptions& o) { return Ref(&o.job.train.checkpoint_interval_h); }, 0);
        add("restart-h", G::train, "float",
            [](NamedOptions& o) { return Ref(&o.job.train.restart_h); }, 0);
        // add_plan_flags
        add("tp", G::plan, "int", [](NamedOptions& o) { return Ref(&o.plan.tp); }, 1);
        add("pp", G::plan, "int", [](NamedOptions& o) { return Ref(&o.plan.pp); }, 1);
        add("dp", G::plan, "int", [](NamedOptions& o) { return Ref(&o.plan.dp); }, 0);
        add("cp", G::plan, "int", [](NamedOptions& o) { return Ref(&o.plan.cp); }, 1);
        add("ep", G::plan, "int", [](NamedOptions& o) { return Ref(&o.plan.ep); }, 1);
        add("etp", G::plan, "int", [](NamedOptions& o) { return Ref(&o.plan.etp); }, 0);
        add("mbs", G::plan, "int", [](NamedOptions& o) { return Ref(&o.plan.mbs); }, 1);
        add("vpp", G::plan, "int", [](NamedOptions& o) { return Ref(&o.plan.vpp); }, 1);
        add("schedule", G::plan, "str", [](NamedOptions& o) { return Ref(&o.plan.schedule); }, -inf,
            inf, {"1f1b", "gpipe", "interleaved", "dualpipe", "dualpipev"});
        add("recompute", G::plan, "str", [](NamedOptions& o) { return Ref(&o.plan.recompute); },
            -inf, inf, {"none", "selective", "full"});
        add("sp", G::plan, "bool", [](NamedOptions& o) { return Ref(&o.plan.sp); });
        add("zero", G::plan, "int", [](NamedOptions& o) { return Ref(&o.plan.zero); }, 0, 3);
        add("first-stage-layers", G::plan, "int",
            [](NamedOptions& o) { return Ref(&o.plan.first_stage_layers); }, 0);
        add("last-stage-layers", G::plan, "int",
            [](NamedOptions& o) { return Ref(&o.plan.last_stage_layers); }, 0);
        add("recompute-num-layers", G::plan, "int",
            [](NamedOptions& o) { return Ref(&o.plan.recompute_num_layers); }, 0);
        add("recompute-modules", G::plan, "str",
            [](NamedOptions& o) { return Ref(&o.plan.recompute_modules); });
        add("cpu-offloading-num-layers", G::plan, "int",
            [](NamedOptions& o) { return Ref(&o.plan.offload_layers); }, 0);
        add("recompute-method", G::plan, "str",
            [](NamedOptions& o) { return Ref(&o.plan.recompute_method); }, -inf, inf,
            {"uniform", "block"});
        add("pipeline-layout", G::plan, "str",
            [](NamedOptions& o) { return Ref(&o.plan.pipeline_layout); });
        // cli/cmd_plan.cpp's search flags
        add("top", G::search, "int", [](NamedOptions& o) { return Ref(&o.search.top_k); }, 1);
        add("target-tokens-per-s", G::search, "float",
            [](NamedOptions& o) { return Ref(&o.search.target_tokens_per_s); }, 0);
        add("allow-tp-cross-node", G::search, "bool",
            [](NamedOptions& o) { return Ref(&o.search.allow_tp_cross_node); });
        add("max-tp", G::search, "int", [](NamedOptions& o) { return Ref(&o.search.max_tp); }, 0);
        add("max-pp", G::search, "int", [](NamedOptions& o) { return Ref(&o.search.max_pp); }, 0);
        add("max-cp", G::search, "int", [](NamedOptions& o) { return Ref(&o.search.max_cp); }, 0);
        add("max-ep", G::search, "int", [](NamedOptions& o) { return Ref(&o.search.max_ep); }, 0);
        add("heuristics", G::search, "bool",
            [](NamedOptions& o) { return Ref(&o.search.heuristics); });
        add("simulate", G::search, "bool", [](NamedOptions& o) { return Ref(&o.simulate); });
        return t;
    }();
    return table;
}

std::string normalised(std::string_view name) {
    std::string s(name);
    std::replace(s.begin(), s.end(), '_', '-');
    return s;
}

std::string value_text(const OptionValue& v) {
    return std::visit(
        [](const auto& x) -> std::string {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::string>) {
                return "'" + x + "'";
            } else if constexpr (std::is_same_v<T, bool>) {
                return x ? "True" : "False";
            } else {
                return std::to_string(x);
            }
        },
        v);
}

}  // namespace

const std::vector<OptionInfo>& option_table() {
    static const std::vector<OptionInfo> infos = [] {
        std::vector<OptionInfo> out;
        for (const Entry& e : entries()) {
            out.push_back(e.info);
        }
        out.push_back({"objective", OptionGroup::search, "str", {"time", "memory", "gpus", "cost"}});
        return out;
    }();
    return infos;
}

bool NamedOptions::gave(std::string_view name) const {
    return std::find(given_plan.begin(), given_plan.end(), normalised(name)) != given_plan.end();
}

void set_option(NamedOptions& o, std::string_view raw, const OptionValue& v) {
    const std::string name = normalised(raw);
    const auto bad = [&](const std::string& why) {
        throw ConfigError(std::string(raw) + "=" + value_text(v) + ": " + why);
    };
    if (name == "objective") {
        const auto* s = std::get_if<std::string>(&v);
        if (s == nullptr) {
            bad("expected a string (time, memory, gpus or cost)");
        }
        o.search.objective = parse_objective(*s);
        return;
    }
    const auto it = std::find_if(entries().begin(), entries().end(),
                                 [&](const Entry& e) { return e.info.name == name; });
    if (it == entries().end()) {
        throw ConfigError(std::string(raw) +
                          ": no such option (the keywords are cleave's flag names with '_' for "
                          "'-': gpus, gbs, tp, recompute, ...)");
    }
    const Entry& e = *it;
    const Ref ref = e.ref(o);
    const auto number = [&]() -> double {
        if (const auto* i = std::get_if<int64_t>(&v)) {
            return static_cast<double>(*i);
        }
        if (const auto* d = std::get_if<double>(&v)) {
            return *d;
        }
        bad("expected a number");
        return 0.0;
    };
    if (auto* b = std::get_if<bool*>(&ref)) {
        const auto* x = std::get_if<bool>(&v);
        if (x == nullptr) {
            bad("expected True or False");
        }
        **b = *x;
    } else if (auto* s = std::get_if<std::string*>(&ref)) {
        const auto* x = std::get_if<std::string>(&v);
        if (x == nullptr) {
            bad("expected a string");
        }
        if (!e.info.choices.empty() &&
            std::find(e.info.choices.begin(), e.info.choices.end(), *x) == e.info.choices.end()) {
            std::string list;
            for (const std::string& c : e.info.choices) {
                list += (list.empty() ? "" : ", ") + c;
            }
            bad("not one of " + list);
        }
        if (name == "release" && !valid_release(*x)) {
            bad("must be YY.MM (e.g. 26.04)");
        }
        **s = *x;
    } else if (auto* d = std::get_if<double*>(&ref)) {
        const double x = number();
        if (!std::isfinite(x) || x < e.min || x > e.max) {
            bad("out of range");
        }
        **d = x;
    } else {
        const auto* x = std::get_if<int64_t>(&v);
        if (x == nullptr || std::holds_alternative<bool>(v)) {
            bad("expected an integer");
        }
        if (static_cast<double>(*x) < e.min || static_cast<double>(*x) > e.max) {
            bad("out of range");
        }
        if (auto* i = std::get_if<int64_t*>(&ref)) {
            **i = *x;
        } else {
            *std::get<int*>(ref) = static_cast<int>(*x);
        }
    }
    if (e.info.group == OptionGroup::plan && !o.gave(name)) {
        o.given_plan.push_back(name);
    }
}

}  // namespace cleave::api
