// The one table of plan rules: each rule's name, reason, predicate and message. check_plan(),
// the planner's pruning (planner/search.cpp) and the exports all read this table.
// Megatron-LM sources cited at commit d98e8a64ddf34856e74b24714e3bedb2f5a39553.
#include "core/plan.hpp"

#include <algorithm>
#include <array>

namespace cleave {

namespace {

bool divides(int64_t a, int64_t b) {
    return a > 0 && b % a == 0;
}

std::string n(const char* name, int64_t v) {
    return std::string(name) + "=" + std::to_string(v);
}

struct Ctx {
    const ModelSpec& m;
    const JobSpec& job;
    const Plan& p;
};

bool sizes_ok(const Plan& p) {
    return p.dp >= 1 && p.tp >= 1 && p.pp >= 1 && p.cp >= 1 && p.ep >= 1 && p.etp >= 0 &&
           p.vpp >= 1 && p.mbs >= 1 && p.first_layers >= 0 && p.last_layers >= 0;
}

/// The map adds up: set ends leave a non-negative remainder the open stages share evenly.
bool split_ok(const Ctx& x) {
    const Plan& p = x.p;
    const int64_t layers = x.m.layers;
    if (p.pp == 1) {
        return p.first_layers == 0 && p.last_layers == 0;
    }
    const int64_t open = p.pp - (p.first_layers > 0 ? 1 : 0) - (p.last_layers > 0 ? 1 : 0);
    const int64_t rest = layers - p.first_layers - p.last_layers;
    if (open == 0) {
        return rest == 0;
    }
    return rest >= 0 && rest % open == 0;
}

bool stages_ok(const Ctx& x) {
    if (!split_ok(x)) {
        return true;  // stage_split reports it
    }
    const StageLayers sl = stage_layers(x.m.layers, x.p);
    return sl.first >= 1 && sl.last >= 1 && (x.p.pp <= 2 || sl.middle >= 1);
}

/// Every virtual chunk builds a layer, but the embedding's (stage 0, chunk 0) and the loss's
/// (last stage, last chunk) may build none: Megatron-LM's --pipeline-model-parallel-layout runs
/// any such map (pipeline_parallel_layer_layout.py); its flags need a stage's layers to split
/// evenly over the chunks (transformer_config.py), which the planner prefers
/// (costmodel/splits.hpp) but a layout does not need.
bool chunks_ok(const Ctx& x) {
    const Plan& p = x.p;
    if (p.vpp <= 1 || !split_ok(x)) {
        return true;
    }
    const StageLayers sl = stage_layers(x.m.layers, p);
    return sl.first >= p.vpp - 1 && sl.last >= p.vpp - 1 && (p.pp <= 2 || sl.middle >= p.vpp);
}

std::string split_message(const Ctx& x) {
    const Plan& p = x.p;
    if (p.pp > x.m.layers) {
        return n("pp", p.pp) + " is more than " + n("layers", x.m.layers);
    }
    if (p.first_layers == 0 && p.last_layers == 0) {
        return n("pp", p.pp) + " does not divide " + n("layers", x.m.layers) +
               " (set --first-stage-layers / --last-stage-layers for uneven stages)";
    }
    return "first " + std::to_string(p.first_layers) + " + last " + std::to_string(p.last_layers) +
           " stage layers leave " + std::to_string(x.m.layers - p.first_layers - p.last_layers) +
           " layers that do not split evenly over the other stages of " + n("pp", p.pp);
}

struct Entry {
    Rule rule;
    RuleInfo info;
    bool (*ok)(const Ctx&);
    std::string (*message)(const Ctx&);
};

// clang-format off
const std::array<Entry, rule_count> rule_table{{
    {Rule::sizes, {"sizes", "every parallel size and the micro-batch size is a count (>= 1)"},
     [](const Ctx& x) { return sizes_ok(x.p); },
     [](const Ctx&) { return std::string("every parallel size and the micro-batch size must be at least 1"); }},
    {Rule::zero_stage, {"zero_stage", "ZeRO has stages 0..3 (Rajbhandari et al. 2020, Sec. 5)"},
     [](const Ctx& x) { return x.p.zero >= 0 && x.p.zero <= 3; },
     [](const Ctx& x) { return n("zero", x.p.zero) + " is not a ZeRO stage (0..3)"; }},
    {Rule::tp_heads, {"tp_heads", "TP splits attention by heads (Shoeybi et al. 2019, Sec. 3)"},
     [](const Ctx& x) { return divides(x.p.tp, x.m.heads); },
     [](const Ctx& x) { return n("tp", x.p.tp) + " does not divide " + n("heads", x.m.heads); }},
    {Rule::tp_kv_heads, {"tp_kv_heads", "TP splits the key/value heads too (Megatron-LM GQA)"},
     [](const Ctx& x) { return divides(x.p.tp, x.m.kv_heads); },
     [](const Ctx& x) { return n("tp", x.p.tp) + " does not divide " + n("kv_heads", x.m.kv_heads); }},
    {Rule::tp_ffn, {"tp_ffn", "TP splits the MLP's first GEMM by columns (Shoeybi et al. 2019)"},
     [](const Ctx& x) { return divides(x.p.tp, x.m.ffn_hidden); },
     [](const Ctx& x) { return n("tp", x.p.tp) + " does not divide " + n("ffn_hidden", x.m.ffn_hidden); }},
    {Rule::stage_layers, {"stage_layers", "every pipeline stage builds at least one transformer layer (Megatron transformer_config.py: num_layers_in_first/last_pipeline_stage > 0)"},
     stages_ok,
     [](const Ctx& x) {
         const StageLayers sl = stage_layers(x.m.layers, x.p);
         return n("pp", x.p.pp) + " leaves a stage without layers (first " + std::to_string(sl.first) +
                ", middle " + std::to_string(sl.middle) + ", last " + std::to_string(sl.last) +
                " of " + n("layers", x.m.layers) + ")";
     }},
    {Rule::stage_split, {"stage_split", "the layers not on a set first/last stage split evenly over the other stages (Megatron transformer_config.py, uneven PP)"},
     split_ok, split_message},
    {Rule::vpp_chunks, {"vpp_chunks", "every virtual chunk builds a layer, but the embedding's and the loss's (Megatron pipeline_parallel_layer_layout.py, transformer_block.py)"},
     chunks_ok,
     [](const Ctx& x) {
         const StageLayers sl = stage_layers(x.m.layers, x.p);
         return n("vpp", x.p.vpp) + " chunks per stage leave a chunk without layers (first " +
                std::to_string(sl.first) + ", middle " + std::to_string(sl.middle) + ", last " +
                std::to_string(sl.last) + "; only the embedding's and the loss's chunk may be empty)";
     }},
    {Rule::recompute_layers, {"recompute_layers", "Megatron transformer_config.py: --recompute-num-layers (1 .. layers per pipeline rank) and --recompute-method belong to full recomputation; selective takes neither"},
     [](const Ctx& x) {
         const Plan& p = x.p;
         if (p.recompute != Recompute::full) {
             return p.recompute_layers == 0 && p.recompute_method == RecomputeMethod::uniform;
         }
         const StageLayers sl = stage_layers(x.m.layers, p);
         const int64_t fewest = std::min(sl.first, p.pp > 2 ? std::min(sl.middle, sl.last) : sl.last);
         return p.recompute_layers >= 0 && p.recompute_layers <= std::max<int64_t>(1, fewest);
     },
     [](const Ctx& x) {
         if (x.p.recompute != Recompute::full) {
             return std::string("--recompute-num-layers / --recompute-method need --recompute full");
         }
         return n("recompute_layers", x.p.recompute_layers) + " is more than the layers of a pipeline stage";
     }},
    {Rule::ep_moe, {"ep_moe", "expert parallelism splits experts; a dense model has none"},
     [](const Ctx& x) { return x.p.ep == 1 || x.m.moe.enabled(); },
     [](const Ctx& x) { return n("ep", x.p.ep) + " needs an MoE model (experts > 0)"; }},
    {Rule::ep_experts, {"ep_experts", "each EP rank holds experts / ep experts (Megatron MoE)"},
     [](const Ctx& x) { return x.p.ep == 1 || !x.m.moe.enabled() || divides(x.p.ep, x.m.moe.experts); },
     [](const Ctx& x) { return n("ep", x.p.ep) + " does not divide " + n("experts", x.m.moe.experts); }},
    {Rule::ep_dp, {"ep_dp", "Megatron-Core folds the expert grid etp x ep x edp over the tp x cp x dp ranks (parallel folding)"},
     [](const Ctx& x) { return divides(x.p.ep * expert_tp(x.p), x.p.tp * x.p.cp * x.p.dp); },
     [](const Ctx& x) {
         if (x.p.etp == 0) {  // etp = tp: the same as ep dividing dp * cp
             return n("ep", x.p.ep) + " does not divide dp*cp=" + std::to_string(x.p.dp * x.p.cp);
         }
         return n("ep", x.p.ep) + " x " + n("etp", x.p.etp) + " does not divide tp*cp*dp=" +
                std::to_string(x.p.tp * x.p.cp * x.p.dp);
     }},
    {Rule::interleave_pp, {"interleave_pp", "the interleaved schedule runs virtual stages across pipeline ranks"},
     [](const Ctx& x) { return x.p.schedule != Schedule::interleaved || x.p.pp > 1; },
     [](const Ctx&) { return std::string("the interleaved schedule needs pp > 1"); }},
    {Rule::interleave_vpp, {"interleave_vpp", "the interleaved schedule needs several chunks per rank"},
     [](const Ctx& x) { return x.p.schedule != Schedule::interleaved || x.p.vpp > 1; },
     [](const Ctx&) { return std::string("the interleaved schedule needs vpp > 1"); }},
    {Rule::interleave_microbatches, {"interleave_microbatches", "Megatron schedules.py runs interleaved micro-batches in groups of N in [pp, m] (--microbatch-group-size-per-virtual-pipeline-stage) and raises when m < pp"},
     [](const Ctx& x) {
         const int64_t m = num_microbatches(x.p, x.job);
         return x.p.schedule != Schedule::interleaved || m <= 0 || m >= x.p.pp;
     },
     [](const Ctx& x) {
         return "interleaved: " + std::to_string(num_microbatches(x.p, x.job)) +
                " micro-batches are fewer than pp=" + std::to_string(x.p.pp) + " (Megatron requires m >= pp)";
     }},
    {Rule::vpp_schedule, {"vpp_schedule", "virtual stages exist only in the interleaved schedule"},
     [](const Ctx& x) { return x.p.schedule == Schedule::interleaved || x.p.vpp == 1; },
     [](const Ctx& x) { return std::string("vpp > 1 needs --schedule interleaved, not ") + to_string(x.p.schedule); }},
    {Rule::dualpipe_shape, {"dualpipe_shape", "DualPipe pairs rank r with rank pp-1-r and feeds half the micro-batches from each end: it asserts an even rank count and an even micro-batch count of at least 2 pp (deepseek-ai/DualPipe dualpipe.py step() @3da1bbe); DualPipeV runs 2 pp stages in a V and asserts at least 2 pp micro-batches (dualpipev.py step()); neither reference offloads activations"},
     [](const Ctx& x) {
         if (!bidirectional(x.p.schedule)) {
             return true;
         }
         const int64_t m = num_microbatches(x.p, x.job);
         const bool v = x.p.schedule == Schedule::dualpipev;
         const bool ranks = v ? x.p.pp >= 2 : x.p.pp >= 2 && x.p.pp % 2 == 0;
         const bool micro = m <= 0 || ((v || m % 2 == 0) && m >= 2 * x.p.pp);
         // DualPipeV's 2 pp stages equal: uneven maps over its V are not priced yet.
         const bool even = !v || (x.p.first_layers == 0 && x.p.last_layers == 0 &&
                                  x.m.layers % (2 * x.p.pp) == 0);
         return ranks && micro && even && x.p.offload_layers == 0;
     },
     [](const Ctx& x) {
         const int64_t m = num_microbatches(x.p, x.job);
         const bool v = x.p.schedule == Schedule::dualpipev;
         if (x.p.pp < 2 || (!v && x.p.pp % 2 != 0)) {
             return std::string(v ? "dualpipev needs pp >= 2, not " : "dualpipe needs an even pp >= 2, not ") +
                    n("pp", x.p.pp);
         }
         if (x.p.offload_layers != 0) {
             return std::string(to_string(x.p.schedule)) +
                    " with --cpu-offloading-num-layers: DualPipe's reference offloads nothing";
         }
         if (v && (x.p.first_layers != 0 || x.p.last_layers != 0 ||
                   x.m.layers % (2 * x.p.pp) != 0)) {
             return "dualpipev runs 2 pp = " + std::to_string(2 * x.p.pp) +
                    " equal stages: layers=" + std::to_string(x.m.layers) +
                    " must divide evenly and no stage map be set (uneven V maps are not priced yet)";
         }
         return std::string(v ? "dualpipev needs at least 2 pp = " : "dualpipe needs an even number of micro-batches, at least 2 pp = ") +
                std::to_string(2 * x.p.pp) + (v ? " micro-batches" : "") + ", not " + std::to_string(m);
     }},
    {Rule::zero_pipeline, {"zero_pipeline", "neither Megatron nor DeepSpeed shards gradients or weights under pipeline parallelism (torchtitan's FSDP2 does: zero 3 with pp)"},
     [](const Ctx& x) {
         return x.p.zero < 2 || x.p.pp == 1 ||
                (x.p.zero == 3 && x.job.stack.framework == StackFramework::torchtitan);
     },
     [](const Ctx& x) {
         return n("zero", x.p.zero) + " cannot be combined with pipeline parallelism (pp > 1) under stack '" +
                x.job.stack.name + "' (torchtitan-fsdp2 runs FSDP with pipelines: --stack torchtitan-fsdp2 --zero 3)";
     }},
    {Rule::gpus, {"gpus", "the plan uses every GPU of the job"},
     [](const Ctx& x) { return plan_gpus(x.p) == x.job.gpus; },
     [](const Ctx& x) { return "dp*tp*pp*cp=" + std::to_string(plan_gpus(x.p)) + " is not " + n("gpus", x.job.gpus); }},
    {Rule::batch, {"batch", "each DP rank runs whole micro-batches of the global batch"},
     [](const Ctx& x) { return divides(x.p.mbs * x.p.dp, x.job.global_batch); },
     [](const Ctx& x) {
         return "mbs*dp=" + std::to_string(x.p.mbs * x.p.dp) + " does not divide the global batch " +
                std::to_string(x.job.global_batch);
     }},
    {Rule::sp_tp, {"sp_tp", "sequence parallelism splits along the TP group (Korthikanti et al. 2022)"},
     [](const Ctx& x) { return !x.p.sp || x.p.tp > 1; },
     [](const Ctx&) { return std::string("sequence parallelism needs tp > 1"); }},
    {Rule::sp_seq, {"sp_seq", "sequence parallelism splits the sequence over tp * cp ranks"},
     [](const Ctx& x) { return !x.p.sp || divides(x.p.tp * x.p.cp, x.job.seq_len); },
     [](const Ctx& x) { return "tp*cp=" + std::to_string(x.p.tp * x.p.cp) + " does not divide " + n("seq", x.job.seq_len); }},
    {Rule::cp_seq, {"cp_seq", "ring attention splits the sequence into 2 cp chunks (Megatron context parallelism)"},
     [](const Ctx& x) { return x.p.cp == 1 || divides(2 * x.p.cp, x.job.seq_len); },
     [](const Ctx& x) {
         return "2*cp=" + std::to_string(2 * x.p.cp) + " does not divide " + n("seq", x.job.seq_len) +
                " (ring attention splits the sequence into 2*cp chunks)";
     }},
    {Rule::tp_mamba, {"tp_mamba", "TP splits a Mamba-2 mixer by heads and its B/C groups (Megatron-Core ssm/mamba_mixer.py @d98e8a64 asserts nheads % tp == 0 and ngroups % tp == 0)"},
     [](const Ctx& x) {
         return !x.m.mamba.enabled() ||
                (divides(x.p.tp, x.m.mamba.heads) && divides(x.p.tp, x.m.mamba.groups));
     },
     [](const Ctx& x) {
         return n("tp", x.p.tp) + " does not divide " +
                (divides(x.p.tp, x.m.mamba.heads) ? n("mamba_groups", x.m.mamba.groups)
                                                  : n("mamba_heads", x.m.mamba.heads));
     }},
    {Rule::tp_gdn, {"tp_gdn", "TP and CP split a gated DeltaNet by heads (Megatron-Core transformer_config.py @d98e8a64 asserts linear_num_key_heads and linear_num_value_heads are multiples of tp x cp)"},
     [](const Ctx& x) {
         const int64_t tc = x.p.tp * x.p.cp;
         return !x.m.gdn.enabled() || (divides(tc, x.m.gdn.qk_heads) && divides(tc, x.m.gdn.v_heads));
     },
     [](const Ctx& x) {
         return n("tp x cp", x.p.tp * x.p.cp) + " does not divide " +
                (divides(x.p.tp * x.p.cp, x.m.gdn.qk_heads) ? n("linear_num_value_heads", x.m.gdn.v_heads)
                                                            : n("linear_num_key_heads", x.m.gdn.qk_heads));
     }},
    {Rule::muon_sharding, {"muon_sharding", "Muon orthogonalises whole weight matrices: Megatron runs it with the DDP or its layer-wise distributed optimizer, raises for Megatron-FSDP and for fp16 (megatron/core/optimizer/__init__.py _get_megatron_emerging_optimizer @d98e8a64), and FSDP2 shards the matrices too"},
     [](const Ctx& x) {
         return x.job.optimizer != Optimizer::muon || (x.p.zero <= 1 && x.job.compute != Dtype::fp16);
     },
     [](const Ctx& x) {
         return x.p.zero > 1 ? n("zero", x.p.zero) + " with --optimizer muon: Muon runs with --zero 0 "
                                                     "or 1 (Megatron's layer-wise distributed optimizer), "
                                                     "not with sharded grads or weights"
                             : std::string("--optimizer muon with fp16: Megatron's emerging "
                                           "optimizers refuse fp16 (use bf16)");
     }},
    {Rule::model_code, {"model_code", "Hugging Face transformers' model code under accelerate + DeepSpeed ZeRO splits the data only (no tensor, pipeline, context or expert parallel layers) and checkpoints whole decoder layers (gradient_checkpointing_enable: torch.utils.checkpoint per layer, no module list) (a stack with model_code = \"hf-transformers\")"},
     [](const Ctx& x) {
         return x.job.stack.model_code != ModelCode::hf_transformers ||
                (x.p.tp == 1 && x.p.pp == 1 && x.p.cp == 1 && x.p.ep == 1 &&
                 x.p.recompute != Recompute::selective &&
                 x.p.recompute_method == RecomputeMethod::uniform && x.p.recompute_layers <= 1);
     },
     [](const Ctx& x) {
         if (x.p.tp > 1 || x.p.pp > 1 || x.p.cp > 1 || x.p.ep > 1) {
             return "stack '" + x.job.stack.name +
                    "' runs transformers' model code, which splits the data only: tp, pp, cp and "
                    "ep must be 1 (got " + n("tp", x.p.tp) + ", " + n("pp", x.p.pp) + ", " +
                    n("cp", x.p.cp) + ", " + n("ep", x.p.ep) +
                    "); a Megatron stack splits the model (--stack megatron-core)";
         }
         return "stack '" + x.job.stack.name +
                "' runs transformers' model code, which checkpoints whole decoder layers: "
                "--recompute none or full (one layer a checkpoint), not selective or a block";
     }},
}};
// clang-format on

}  // namespace

const RuleInfo& rule_info(Rule r) {
    return rule_table[static_cast<std::size_t>(r)].info;
}

bool keeps(Rule r, const ModelSpec& m, const JobSpec& job, const Plan& p) {
    return rule_table[static_cast<std::size_t>(r)].ok(Ctx{m, job, p});
}

std::vector<Violation> plan_violations(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    std::vector<Violation> out;
    const Ctx x{m, job, p};
    for (const Entry& e : rule_table) {
        if (!e.ok(x)) {
            out.push_back({e.rule, e.message(x)});
            if (e.rule == Rule::sizes) {
                return out;  // the rest would divide by zero
            }
        }
    }
    return out;
}

std::vector<std::string> check_plan(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    std::vector<std::string> out;
    for (Violation& v : plan_violations(m, job, p)) {
        out.push_back(std::move(v.message));
    }
    return out;
}

}  // namespace cleave
