// Megatron-Bridge ConfigContainer overrides for a plan (`cleave plan --format bridge`).
#include "core/errors.hpp"
#include "core/schedule.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/packing.hpp"
#include "export/detail.hpp"
#include "export/export.hpp"

#include <algorithm>
#include <numeric>
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

/// What the named mixed-precision recipe sets that the price may not have assumed
/// (src/megatron/bridge/training/mixed_precision.py @067f987df: the FP8 / MXFP8 recipes turn
/// fp8_param_gather on; current scaling keeps 1 + 1, subchannel 2 + 2 layers bf16).
struct RecipeDefaults {
    bool fp8_param_gather = false;
    int64_t bf16_start = 0, bf16_end = 0;
};

RecipeDefaults recipe_defaults(const JobSpec& job) {
    switch (job.compute) {
    case Dtype::fp8:
        if (job.fp8_recipe == Fp8Recipe::tensorwise) {
            return {true, 1, 1};
        }
        if (job.fp8_recipe == Fp8Recipe::blockwise) {
            return {true, 2, 2};
        }
        return {true, 0, 0};
    case Dtype::mxfp8:
        return {true, 0, 0};
    default:
        return {};
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
    // run_recipe.py --mode lora (dora) loads the recipe with peft_scheme="lora" ("dora";
    // ConfigContainer.peft a peft/lora.py LoRA or peft/dora.py DoRA, @067f987d); its dim, alpha
    // and target_modules are overridden below.
    // A packed full fine-tune is --mode sft (run_recipe.py PublicMode @067f987d).
    os << "# pass them after --recipe <model recipe> --mode "
       << (job.peft != Peft::none ? to_string(job.peft) : packed(job) ? "sft" : "pretrain") << "\n";
    Args a;
    std::vector<std::string> notes;  // what KEY=VALUE cannot set, printed after the overrides
    const auto kv = [&a](const std::string& k, const std::string& v) { a.push_back(k + "=" + v); };
    const auto b = [](bool x) { return std::string(x ? "true" : "false"); };
    kv("train.global_batch_size", std::to_string(job.global_batch));
    kv("train.micro_batch_size", std::to_string(p.mbs));
    kv("dataset.seq_length", std::to_string(job.seq_len));
    if (packed(job)) {
        // Offline packing (data/packing/config.py PackedSequenceSpecs @067f987d): packs of
        // seq_length tokens; every sample padded to lcm(2 cp if cp > 1, cp tp under SP with
        // tp > 1), the alignment docs/training/packed-sequences.md derives and
        // scripts/training/recipe_runner.py sync_offline_packing_alignment sets.
        const int64_t cp_mult = p.cp > 1 ? 2 * p.cp : 1;
        const int64_t sp_mult = p.sp && p.tp > 1 ? p.cp * p.tp : 1;
        kv("dataset.enable_offline_packing", "true");
        kv("dataset.offline_packing_specs.packed_sequence_size", std::to_string(job.seq_len));
        kv("dataset.offline_packing_specs.pad_seq_to_mult", std::to_string(std::lcm(cp_mult, sp_mult)));
    }
    if ((packed(job) || job.peft != Peft::none) && p.cp > 1) {
        // Fine-tuning with CP > 1: ConfigContainer.validate asserts per-token loss and no
        // averaging in the collective (training/config.py @067f987d: NaN loss on ranks whose
        // tokens are all masked).
        kv("model.calculate_per_token_loss", "true");
        kv("ddp.average_in_collective", "false");
    }
    if (job.cuda_graph_impl != CudaGraphImpl::none) {
        // TransformerConfig cuda_graph_impl / cuda_graph_scope (a list; empty = each whole layer).
        const std::string scope = cuda_graph_scope_string(job.cuda_graph_scope);
        kv("model.cuda_graph_impl", to_string(job.cuda_graph_impl));
        kv("model.cuda_graph_scope", "[" + (scope == "full" ? std::string() : scope) + "]");
    }
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
        } else if (flag == "--hybrid-layer-pattern" && m.gdn.enabled()) {
            // Bridge builds Qwen3-Next as a GPTModel (qwen3_next_bridge.py @067f987df:
            // experimental_attention_variant gated_delta_net, linear_attention_freq), whose
            // layers are decoder layers of two of cleave's blocks (mixer, MoE): the stages as a
            // pipeline layout of decoder layers, when every boundary falls between two.
            std::string decoder;
            bool whole = true;
            const int64_t v = interleaved ? p.vpp : 1;
            for (int64_t c = 0; c < v; ++c) {
                for (int64_t st = 0; st < p.pp; ++st) {
                    const int64_t first = chunk_first_layer(m.layers, p, st, c);
                    const int64_t n = chunk_layers(m.layers, p, st, c);
                    whole = whole && first % 2 == 0 && n % 2 == 0;
                    decoder += (decoder.empty() ? "E" : "|") + std::string("t*") + std::to_string(n / 2);
                }
            }
            if (p.pp == 1) {
                // one stage: no layout
            } else if (whole) {
                kv("model.pipeline_model_parallel_layout", "'" + decoder + "L'");
            } else {
                notes.push_back("a stage boundary of this plan falls inside a decoder layer (between "
                                "its token mixer and its MoE): Megatron-LM's hybrid pattern runs it "
                                "(--format megatron), Megatron-Bridge's GPT recipe for this model "
                                "cannot; no layout written");
            }
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
    // What the price assumed of the stack, as Megatron-LM's export writes it (megatron.cpp
    // megatron_stack_args): DP overlap, dropout, the fused cross entropy, and no gradient
    // accumulation fusion under Megatron-FSDP.
    const SoftwareStack& s = job.stack;
    kv("ddp.overlap_grad_reduce", b(s.overlap_grad_reduce && p.dp * p.cp > 1));
    kv("ddp.overlap_param_gather", b(s.overlap_param_gather && p.zero >= 1 && p.dp * p.cp > 1));
    if (p.zero >= 2) {
        kv("model.gradient_accumulation_fusion", "false");
    }
    if (!s.hidden_dropout) {
        kv("model.hidden_dropout", "0.0");
        kv("model.attention_dropout", "0.0");
    }
    // Bridge recipes still set te (ModelParallelConfig only warns); native as priced.
    const bool te = s.loss == LossImpl::te || (s.loss == LossImpl::unset && s.fused_cross_entropy);
    if (te || s.loss == LossImpl::megatron_native) {
        kv("model.cross_entropy_loss_fusion", "true");
        kv("model.cross_entropy_fusion_impl", te ? "te" : "native");
    } else if (s.loss == LossImpl::megatron_unfused) {
        kv("model.cross_entropy_loss_fusion", "false");
    }
    // A recipe may have no CommOverlapConfig (comm_overlap=None), so TP overlap is written only
    // when the price assumed it; without it, the recipe's must be off.
    const bool tp_overlap = s.tp_comm_overlap && p.sp && p.tp > 1;
    if (tp_overlap) {
        kv("comm_overlap.tp_comm_overlap", "true");
    } else if (p.tp > 1) {
        notes.push_back("priced without TP communication overlap: a recipe with a "
                        "CommOverlapConfig needs comm_overlap.tp_comm_overlap=false");
    }
    if (s.attention != AttentionImpl::fused) {
        notes.push_back("priced with unfused attention (stack " + s.name +
                        "): set the recipe's model.attention_backend to AttnBackend.unfused (an "
                        "enum, which KEY=VALUE overrides leave a string)");
    }
    if (const OptimizerDtypes d = optimizer_dtypes(job); d.precision_aware) {
        // OptimizerConfig's torch.dtype fields take short names (bf16; omegaconf_utils.py
        // _apply_overrides and utils/activation_map.py str_to_dtype @067f987df).
        kv("optimizer.use_precision_aware_optimizer", "true");
        kv("optimizer.exp_avg_dtype", d.exp_avg);
        kv("optimizer.exp_avg_sq_dtype", d.exp_avg_sq);
        kv("optimizer.main_params_dtype", d.main_params);
    }
    if (optimizer_dtypes(job).master_inexpressible) {
        notes.push_back("priced with bf16 master weights (Apex DistributedFusedAdam); "
                        "optimizer.main_params_dtype takes fp32 or fp16: memory will be higher");
    }
    if (m.moe.enabled()) {
        const SoftwareStack& st = s;
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
    // The recipe is a name that ConfigContainer resolves after the overrides (config.py
    // runtime_config_update @067f987df: get_mixed_precision_config), so its fields cannot be
    // overridden here: say where it differs from what was priced.
    const RecipeDefaults rd = recipe_defaults(job);
    const bool fp8_params = job.weights == Dtype::fp8;
    if (rd.fp8_param_gather != fp8_params) {
        notes.push_back("mixed_precision " + bridge_precision(job) + " sets fp8_param_gather=" +
                        b(rd.fp8_param_gather) + "; the price assumed " + b(fp8_params) +
                        " (set it in the recipe's MixedPrecisionConfig)");
    }
    if (rd.bf16_start != job.bf16_layers_start || rd.bf16_end != job.bf16_layers_end) {
        notes.push_back("mixed_precision " + bridge_precision(job) + " keeps " +
                        std::to_string(rd.bf16_start) + " + " + std::to_string(rd.bf16_end) +
                        " layers bf16; the price assumed " +
                        std::to_string(job.bf16_layers_start) + " + " +
                        std::to_string(job.bf16_layers_end) +
                        " (first_last_layers_bf16, num_layers_at_{start,end}_in_bf16)");
    }
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
    if (job.peft != Peft::none) {
        kv("peft.dim", std::to_string(job.lora_dim));
        kv("peft.alpha", f("%g", job.lora_alpha));
        kv("peft.target_modules", "[" + lora_targets_string(job.lora_targets) + "]");
        // As the price assumed (no cached quantised copies of the frozen weights) and as
        // Bridge's LoRA perf recipes set it (perf_recipes/llama/b200/llama3.py @067f987d).
        kv("model.disable_parameter_transpose_cache", "true");
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
        os << a[i] << (i + 1 < a.size() ? " \\\n" : "\n");
    }
    for (const std::string& n : notes) {
        os << "# note: " << n << "\n";
    }
}

}  // namespace cleave
