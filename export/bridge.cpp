// Megatron-Bridge ConfigContainer overrides for a plan (`cleave plan --format bridge`).
#include "core/errors.hpp"
#include "core/schedule.hpp"
#include "costmodel/compute.hpp"
#include "export/detail.hpp"
#include "export/export.hpp"

#include <algorithm>
#include <string>

namespace cleave {

using namespace exporters;

namespace {

/// The mixed-precision recipe Megatron-Bridge names for the job's precision
/// (src/megatron/bridge/training/mixed_precision.py @067f987df03b, registered recipe functions).
std::string bridge_precision(const JobSpec& job) {
    switch (job.compute) {
    case Dtype::fp16:
        return "fp16_mixed";
    case Dtype::fp8:
        switch (job.fp8_recipe) {
        case Fp8Recipe::delayed:
            return "bf16_with_fp8_delayed_scaling_mixed";
        case Fp8Recipe::tensorwise:
            return "bf16_with_fp8_current_scaling_mixed";
        case Fp8Recipe::blockwise:
            return "bf16_with_fp8_subchannel_scaling_mixed";
        }
        return "bf16_with_fp8_current_scaling_mixed";
    case Dtype::mxfp8:
        return "bf16_with_mxfp8_mixed";
    case Dtype::nvfp4:
        return "bf16_with_nvfp4_mixed";
    default:
        return "bf16_mixed";
    }
}

}  // namespace

/// `cleave plan --format bridge`: the plan as Megatron-Bridge ConfigContainer overrides
/// (KEY=VALUE, Hydra style) for scripts/training/run_recipe.py at NVIDIA-NeMo/Megatron-Bridge
/// @067f987df03b: train.* and dataset.seq_length as its docstring maps them, model.* the
/// Megatron-Core TransformerConfig fields its recipes set (recipes/, scripts/performance/utils/
/// overrides.py), ddp.* the DistributedDataParallelConfig, comm_overlap.* the CommOverlapConfig,
/// mixed_precision a registered recipe name. The recipe itself (--recipe / --model) names the
/// model; the layer map is written as the same TransformerConfig fields Megatron-LM's flags set.
void write_bridge(std::ostream& os, const ModelSpec& model, const JobSpec& job, const RankedPlan& best) {
    const Plan& p = best.plan;
        const ModelSpec& m = model;
    os << "# Megatron-Bridge ConfigContainer overrides (scripts/training/run_recipe.py KEY=VALUE) for "
       << to_string(p) << "\n";
    os << "# predicted " << f("%.3f", best.estimate.iteration_time.value()) << " s per iteration, "
       << f("%.0f", best.estimate.tokens_per_s) << " tokens/s; world size " << plan_gpus(p)
       << " = tp " << p.tp << " x pp " << p.pp << " x cp " << p.cp << " x dp " << p.dp << "\n";
    os << "# pass them after --recipe <model recipe> --mode pretrain\n";
    Args a;
    const auto kv = [&a](const std::string& k, const std::string& v) { a.push_back(k + "=" + v); };
    const auto b = [](bool x) { return std::string(x ? "true" : "false"); };
    kv("train.global_batch_size", std::to_string(job.global_batch));
    kv("train.micro_batch_size", std::to_string(p.mbs));
    kv("dataset.seq_length", std::to_string(job.seq_len));
    kv("model.tensor_model_parallel_size", std::to_string(p.tp));
    kv("model.pipeline_model_parallel_size", std::to_string(p.pp));
    const bool interleaved = p.schedule == Schedule::interleaved && p.vpp > 1;
    kv("model.virtual_pipeline_model_parallel_size", interleaved ? std::to_string(p.vpp) : "null");
    kv("model.context_parallel_size", std::to_string(p.cp));
    if (m.moe.enabled()) {
        kv("model.expert_model_parallel_size", std::to_string(p.ep));
        kv("model.expert_tensor_parallel_size", std::to_string(expert_tp(p)));
    }
    kv("model.sequence_parallel", b(p.sp));
    // The layer map, translated from Megatron-LM's flags (megatron_layout_args) to the
    // TransformerConfig fields those flags set.
    Args layout;
    megatron_layout_args(layout, m, p);
    for (const std::string& f : layout) {
        const auto sp = f.find(' ');
        const std::string flag = f.substr(0, sp);
        const std::string val = sp == std::string::npos ? "" : f.substr(sp + 1);
        if (flag == "--account-for-embedding-in-pipeline-split") {
            kv("model.account_for_embedding_in_pipeline_split", "true");
        } else if (flag == "--account-for-loss-in-pipeline-split") {
            kv("model.account_for_loss_in_pipeline_split", "true");
        } else if (flag == "--decoder-first-pipeline-num-layers") {
            kv("model.num_layers_in_first_pipeline_stage", val);
        } else if (flag == "--decoder-last-pipeline-num-layers") {
            kv("model.num_layers_in_last_pipeline_stage", val);
        } else if (flag == "--pipeline-model-parallel-layout") {
            kv("model.pipeline_model_parallel_layout", "'" + val + "'");
        } else if (flag == "--hybrid-layer-pattern") {
            kv("model.hybrid_layer_pattern", val);  // already quoted
        }  // --num-layers-per-virtual-pipeline-stage / --num-virtual-stages-per-pipeline-rank:
           // virtual_pipeline_model_parallel_size above
    }
    switch (p.recompute) {
    case Recompute::none:
        kv("model.recompute_granularity", "null");
        break;
    case Recompute::selective: {
        kv("model.recompute_granularity", "selective");
        const uint16_t mods =
            p.recompute_modules != 0 ? p.recompute_modules : recompute_module::core_attn;
        kv("model.recompute_modules", "[" + recompute_modules_string(mods) + "]");
        break;
    }
    case Recompute::full:
        kv("model.recompute_granularity", "full");
        kv("model.recompute_method", p.recompute_method == RecomputeMethod::block ? "block" : "uniform");
        kv("model.recompute_num_layers", std::to_string(std::max<int64_t>(1, p.recompute_layers)));
        break;
    }
    if (p.offload_layers > 0) {
        // As Bridge's perf scripts set activation offload (overrides.py
        // _set_recompute_overrides): activations only, not the weights.
        kv("model.cpu_offloading", "true");
        kv("model.cpu_offloading_weights", "false");
        kv("model.cpu_offloading_num_layers", std::to_string(p.offload_layers));
    }
    if (p.zero >= 2) {
        // ZeRO-2/3 as Megatron-FSDP (scripts/performance/utils/overrides.py set_megatron_fsdp).
        kv("ddp.use_megatron_fsdp", "true");
        kv("ddp.data_parallel_sharding_strategy",
           p.zero >= 3 ? "optim_grads_params" : "optim_grads");
    } else {
        kv("ddp.use_distributed_optimizer", b(p.zero == 1));
    }
    kv("ddp.grad_reduce_in_fp32", b(job.grads == Dtype::fp32));
    if (m.moe.enabled()) {
        const SoftwareStack& st = job.stack;
        const bool flex = st.moe_dispatcher == MoeDispatcher::deepep;
        kv("model.moe_token_dispatcher_type", flex ? "flex" : to_string(st.moe_dispatcher));
        if (flex) {
            kv("model.moe_flex_dispatcher_backend", "deepep");
        }
        if (st.moe_a2a_overlap) {
            // As Bridge's moe_a2a_overlap does it (overrides.py _set_moe_a2a_overlap_overrides);
            // a recipe without a CommOverlapConfig needs one (comm_overlap=null there).
            kv("comm_overlap.overlap_moe_expert_parallel_comm", "true");
            kv("comm_overlap.delay_wgrad_compute", "true");
            kv("model.moe_shared_expert_overlap", "false");
        }
        if (const auto [groups, topk] = router_groups(m, job); groups > 0) {
            kv("model.moe_router_num_groups", std::to_string(groups));
            kv("model.moe_router_group_topk", std::to_string(topk));
        }
    }
    kv("mixed_precision", bridge_precision(job));
    if (job.optimizer != Optimizer::adam) {
        // ConfigContainer.optimizer is Megatron-Core's OptimizerConfig (optimizer_config.py
        // @d98e8a64: optimizer, muon_num_ns_steps, muon_tp_mode, muon_scalar_optimizer).
        kv("optimizer.optimizer", to_string(job.optimizer));
        if (job.optimizer == Optimizer::muon) {
            kv("optimizer.muon_num_ns_steps", std::to_string(job.muon_ns_steps));
            kv("optimizer.muon_tp_mode", to_string(job.muon_tp_mode));
            kv("optimizer.muon_scalar_optimizer", "adam");
        }
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
        os << a[i] << (i + 1 < a.size() ? " \\\n" : "\n");
    }
}

}  // namespace cleave
