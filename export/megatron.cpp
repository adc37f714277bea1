// Megatron-LM arguments for a plan (`cleave plan --format megatron`).
#include "core/errors.hpp"
#include "core/schedule.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/packing.hpp"
#include "costmodel/precision.hpp"
#include "export/detail.hpp"
#include "export/export.hpp"

#include <algorithm>
#include <string>

namespace cleave {

namespace exporters {

/// The layer map in Megatron-LM's own flags (megatron/training/arguments.py and
/// transformer_config.py at d98e8a64ddf34856e74b24714e3bedb2f5a39553): even stages need none
/// (interleaved: --num-layers-per-virtual-pipeline-stage); one layer short on the first / last
/// stage is --account-for-embedding/loss-in-pipeline-split; first / last counts that split over
/// the virtual chunks are --decoder-first/last-pipeline-num-layers; anything else is written as
/// --pipeline-model-parallel-layout.
void megatron_layout_args(Args& os, const ModelSpec& m, const Plan& p, int64_t mtp_depths) {
    const bool interleaved = p.schedule == Schedule::interleaved && p.vpp > 1;
    if (is_hybrid(m)) {
        // A hybrid model's layers and its stages in one flag: --hybrid-layer-pattern, one letter a
        // layer (M * - E G), '|' between pipeline stages (virtual ones in model order); Megatron does
        // not combine it with --pipeline-model-parallel-layout.
        std::string pattern;
        const int64_t v = interleaved ? p.vpp : 1;
        for (int64_t k = 0; k < p.pp * v; ++k) {
            const int64_t s = k % p.pp;
            const int64_t c = k / p.pp;
            const int64_t first = chunk_first_layer(m.layers, p, s, c);
            if (k > 0) {
                pattern += '|';
            }
            for (int64_t i = first; i < first + chunk_layers(m.layers, p, s, c); ++i) {
                pattern += layer_kind_letter(m.layer_kinds[static_cast<std::size_t>(i)]);
            }
        }
        for (int64_t k = 0; k < mtp_depths && !m.mtp_kinds.empty(); ++k) {
            pattern += '/';
            for (const LayerKind kind : m.mtp_kinds) {
                pattern += layer_kind_letter(kind);
            }
        }
        arg(os, "--hybrid-layer-pattern", "'" + pattern + "'");
        return;
    }
    if (!uneven_stages(m.layers, p) && (!interleaved || m.layers % (p.pp * p.vpp) == 0)) {
        if (interleaved) {
            arg(os,
                "--num-layers-per-virtual-pipeline-stage",
                std::to_string(m.layers / (p.pp * p.vpp)));
        }
        return;
    }
    const StageLayers sl = stage_layers(m.layers, p);
    const int64_t v = interleaved ? p.vpp : 1;
    const int64_t per_rank = p.pp > 2 ? sl.middle : std::max(sl.first, sl.last);
    const bool emb = sl.first == per_rank - 1;
    const bool loss = sl.last == per_rank - 1;
    const bool by_account =
        (emb || sl.first == per_rank) && (loss || sl.last == per_rank) && per_rank % v == 0;
    const bool by_ends = sl.first % v == 0 && sl.last % v == 0 && sl.middle % v == 0;
    if (by_account) {
        if (emb) {
            arg(os, "--account-for-embedding-in-pipeline-split");
        }
        if (loss) {
            arg(os, "--account-for-loss-in-pipeline-split");
        }
    } else if (by_ends) {
        arg(os, "--decoder-first-pipeline-num-layers", std::to_string(sl.first));
        arg(os, "--decoder-last-pipeline-num-layers", std::to_string(sl.last));
    } else {
        arg(os, "--pipeline-model-parallel-layout", to_layout(m.layers, p));
        return;  // the layout carries the virtual stages
    }
    if (interleaved) {
        arg(os, "--num-virtual-stages-per-pipeline-rank", std::to_string(p.vpp));
    }
}


OptimizerDtypes optimizer_dtypes(const JobSpec& job) {
    OptimizerDtypes d;
    d.exp_avg = to_string(job.optimizer_states);
    d.exp_avg_sq = to_string(job.optimizer == Optimizer::adam ? job.optimizer_states_sq
                                                              : job.optimizer_states);
    d.master_inexpressible = job.master_weights && job.master_dtype == Dtype::bf16;
    d.main_params = job.master_dtype == Dtype::fp16 ? "fp16" : "fp32";
    d.precision_aware = job.optimizer_states != Dtype::fp32 ||
                        (job.optimizer == Optimizer::adam && job.optimizer_states_sq != Dtype::fp32) ||
                        (job.master_weights && job.master_dtype == Dtype::fp16);
    return d;
}

}  // namespace exporters

using namespace exporters;

namespace {

void megatron_model_args(Args& os, const ModelSpec& m, const JobSpec& job) {
    arg(os, "--num-layers", std::to_string(m.layers));
    arg(os, "--hidden-size", std::to_string(m.hidden));
    arg(os, "--num-attention-heads", std::to_string(m.heads));
    if (m.kv_heads != m.heads) {
        arg(os, "--group-query-attention");
        arg(os, "--num-query-groups", std::to_string(m.kv_heads));
    }
    arg(os, "--ffn-hidden-size", std::to_string(m.ffn_hidden));
    arg(os, "--seq-length", std::to_string(job.seq_len));
    arg(os, "--max-position-embeddings", std::to_string(std::max(job.seq_len, m.seq_len)));
    if (m.mlp == MlpKind::swiglu) {
        arg(os, "--swiglu");
    }
    if (m.squared_relu) {
        arg(os, "--squared-relu");  // Nemotron's relu(x)^2 (arguments.py @d98e8a64)
    }
    if (m.norm == NormKind::rmsnorm) {
        arg(os, "--normalization", "RMSNorm");
    }
    if (m.positions == PositionKind::rope) {
        arg(os, "--position-embedding-type", "rope");
    }
    if (!m.tied_embeddings) {
        arg(os, "--untie-embeddings-and-output-weights");
    }
    if (!m.linear_bias) {
        arg(os, "--disable-bias-linear");
    }
    if (m.head_size > 0 && !m.mla.enabled() && m.head_size * m.heads != m.hidden) {
        arg(os, "--kv-channels", std::to_string(m.head_size));
    }
    if (m.qk_norm) {
        arg(os, "--qk-layernorm");
    }
    if (m.attn_output_gate) {  // gated attention (transformer_config.py attention_output_gate)
        arg(os, "--attention-output-gate");
    }
    if (is_hybrid(m) && m.mamba.enabled()) {
        // The Mamba-2 mixer's shape (Megatron-LM arguments.py @d98e8a64); the layer pattern is
        // the layout (megatron_layout_args).
        arg(os, "--mamba-num-heads", std::to_string(m.mamba.heads));
        arg(os, "--mamba-head-dim", std::to_string(m.mamba.head_dim));
        arg(os, "--mamba-state-dim", std::to_string(m.mamba.state));
        arg(os, "--mamba-num-groups", std::to_string(m.mamba.groups));
    }
    if (is_hybrid(m) && m.gdn.enabled()) {
        // The gated DeltaNet's shape (transformer_config.py linear_* @d98e8a64, the flags of
        // tests/functional_tests/test_cases/gpt/gpt3_mcore_te_tp2_pp1_gdn); its layers are the
        // pattern's G letters.
        arg(os, "--linear-conv-kernel-dim", std::to_string(m.gdn.conv_kernel));
        arg(os, "--linear-key-head-dim", std::to_string(m.gdn.qk_head_dim));
        arg(os, "--linear-value-head-dim", std::to_string(m.gdn.v_head_dim));
        arg(os, "--linear-num-key-heads", std::to_string(m.gdn.qk_heads));
        arg(os, "--linear-num-value-heads", std::to_string(m.gdn.v_heads));
    }
    if (m.moe.enabled()) {
        arg(os, "--num-experts", std::to_string(m.moe.experts));
        arg(os, "--moe-router-topk", std::to_string(m.moe.top_k));
        arg(os, "--moe-ffn-hidden-size", std::to_string(m.moe.expert_ffn_hidden));
        if (m.moe.shared_ffn_hidden > 0) {
            arg(os, "--moe-shared-expert-intermediate-size", std::to_string(m.moe.shared_ffn_hidden));
            if (m.moe.shared_gate) {
                arg(os, "--moe-shared-expert-gate");
            }
        }
        if (m.moe.latent > 0) {  // LatentMoE (transformer_config.py moe_latent_size @d98e8a64)
            arg(os, "--moe-latent-size", std::to_string(m.moe.latent));
        }
        if (m.moe.layer_freq != 1) {
            arg(os, "--moe-layer-freq", std::to_string(m.moe.layer_freq));
        }
        // The stack's [moe] table (Megatron-Core transformer_config.py @d98e8a64, whose fields
        // arguments.py turns into flags): deepep is the flex
        // dispatcher with the DeepEP backend.
        const SoftwareStack& st = job.stack;
        const bool flex = st.moe_dispatcher == MoeDispatcher::deepep;
        arg(os, "--moe-token-dispatcher-type", flex ? "flex" : to_string(st.moe_dispatcher));
        if (flex) {
            arg(os, "--moe-flex-dispatcher-backend", "deepep");
        }
        if (st.moe_grouped_gemm) {
            arg(os, "--moe-grouped-gemm");
        }
        if (st.moe_a2a_overlap) {
            arg(os, "--overlap-moe-expert-parallel-comm");
        }
        if (const auto [groups, topk] = router_groups(m, job); groups > 0) {
            arg(os, "--moe-router-num-groups", std::to_string(groups));
            arg(os, "--moe-router-group-topk", std::to_string(topk));
        }
        if (job.moe_capacity > 0.0) {
            std::ostringstream c;
            c << job.moe_capacity;
            arg(os, "--moe-expert-capacity-factor", c.str());
            if (job.moe_pad) {
                arg(os, "--moe-pad-expert-input-to-capacity");
            }
        }
    }
}


/// Megatron's default micro-batch group is pp; another one (m not a multiple of pp) is a flag.
void megatron_group_args(Args& os, const JobSpec& job, const Plan& p) {
    const int64_t m = num_microbatches(p, job);
    if (p.schedule == Schedule::interleaved && p.vpp > 1 && interleave_group(p.pp, m) != p.pp) {
        arg(os,
            "--microbatch-group-size-per-virtual-pipeline-stage",
            std::to_string(interleave_group(p.pp, m)));
    }
}

void megatron_plan_args(Args& os, const ModelSpec& m, const JobSpec& job, const Plan& p) {
    arg(os, "--tensor-model-parallel-size", std::to_string(p.tp));
    arg(os, "--pipeline-model-parallel-size", std::to_string(p.pp));
    arg(os, "--context-parallel-size", std::to_string(p.cp));
    if (m.moe.enabled()) {
        arg(os, "--expert-model-parallel-size", std::to_string(p.ep));
        // Megatron-Core arguments.py: --expert-tensor-parallel-size (default: tp).
        arg(os, "--expert-tensor-parallel-size", std::to_string(expert_tp(p)));
    }
    const int64_t mtp_depths = job.mtp ? m.mtp_layers * std::max<int64_t>(1, job.mtp_repeats) : 0;
    megatron_layout_args(os, m, p, mtp_depths);
    if (mtp_depths > 0) {
        // Megatron --mtp-num-layers (transformer_config.py mtp_num_layers); one module run at
        // every depth is mtp_use_repeated_layer.
        arg(os, "--mtp-num-layers", std::to_string(mtp_depths));
        if (job.mtp_repeats > 1) {
            arg(os, "--mtp-use-repeated-layer");
        }
    }
    megatron_group_args(os, job, p);
    arg(os, "--micro-batch-size", std::to_string(p.mbs));
    arg(os, "--global-batch-size", std::to_string(job.global_batch));
    if (packed(job)) {
        // Megatron-LM --sft (arguments.py _add_sft_args @d98e8a64): SFTDataset packs a jsonl
        // line's conversations into one --seq-length pack with cu_seqlens, so attention runs per
        // conversation (THD; pretrain_gpt.py get_batch has_cu_seqlens), each padded to 2 x cp
        // under CP (training/datasets/sft_dataset.py). --reset-attention-mask (a dense mask) is
        // the unpacked path: SFTDataset asserts it off.
        arg(os, "--sft");
    }
    if (p.sp) {
        arg(os, "--sequence-parallel");
    }
    if (p.recompute == Recompute::selective) {
        arg(os, "--recompute-granularity", "selective");
        if (p.recompute_modules != 0) {
            arg(os, "--recompute-modules", recompute_modules_string(p.recompute_modules));
        }
    } else if (p.recompute == Recompute::full) {
        arg(os, "--recompute-granularity", "full");
        arg(os,
            "--recompute-method",
            p.recompute_method == RecomputeMethod::block ? "block" : "uniform");
        arg(os, "--recompute-num-layers", std::to_string(std::max<int64_t>(1, p.recompute_layers)));
    }
    if (p.offload_layers > 0) {
        arg(os, "--cpu-offloading");
        arg(os, "--cpu-offloading-num-layers", std::to_string(p.offload_layers));
    }
    if (p.zero >= 1) {
        arg(os, "--use-distributed-optimizer");
    }
    if (p.zero >= 2) {
        arg(os, "--use-megatron-fsdp");
        arg(os,
            "--data-parallel-sharding-strategy",
            p.zero == 2 ? "optim_grads" : "optim_grads_params");
        arg(os, "--no-gradient-accumulation-fusion");
    }
}

/// Megatron-LM's spelling of the quantised precisions (megatron/core/transformer/
/// transformer_config.py @d98e8a64: fp8 -> --fp8-format e4m3|hybrid, fp8_recipe -> --fp8-recipe
/// tensorwise|delayed|mxfp8|blockwise, fp4 -> --fp4-format e2m1, fp4_recipe -> --fp4-recipe nvfp4).
/// Hybrid (E4M3 forward, E5M2 gradients) for per-tensor FP8; E4M3 throughout for the block
/// recipes, as Transformer Engine's MXFP8 and blockwise recipes use (their docs @d0067d0d).
void megatron_precision_args(Args& args, const JobSpec& job) {
    switch (job.compute) {
    case Dtype::fp8:
        arg(args, "--fp8-format", job.fp8_recipe == Fp8Recipe::blockwise ? "e4m3" : "hybrid");
        arg(args, "--fp8-recipe", to_string(job.fp8_recipe));
        break;
    case Dtype::mxfp8:
        arg(args, "--fp8-format", "e4m3");
        arg(args, "--fp8-recipe", "mxfp8");
        break;
    case Dtype::nvfp4:
        arg(args, "--fp4-format", "e2m1");
        arg(args, "--fp4-recipe", "nvfp4");
        break;
    default:
        return;
    }
    if (job.weights == Dtype::fp8) {
        arg(args, "--fp8-param-gather");
    }
    if (job.bf16_layers_start + job.bf16_layers_end > 0) {
        arg(args, "--first-last-layers-bf16");
        arg(args, "--num-layers-at-start-in-bf16", std::to_string(job.bf16_layers_start));
        arg(args, "--num-layers-at-end-in-bf16", std::to_string(job.bf16_layers_end));
    }
}

// The flags of what the price assumed of the stack (stacks/*.toml): an export that dropped one
// would launch a job slower or larger than predicted. Names: NVIDIA/Megatron-LM@d98e8a64
// megatron/training/arguments.py and the dataclass fields it turns into flags
// (megatron/core/model_parallel_config.py, transformer/transformer_config.py).
void megatron_stack_args(Args& os, const JobSpec& job, const Plan& p) {
    const SoftwareStack& s = job.stack;
    if (s.attention == AttentionImpl::fused) {
        arg(os, "--attention-backend", "fused");
    } else {
        arg(os, "--attention-backend", "unfused");
    }
    if (!s.hidden_dropout) {
        arg(os, "--hidden-dropout", "0.0");
        arg(os, "--attention-dropout", "0.0");
    }
    // The loss the price assumed. Megatron-LM refuses the TE impl with the fusion from
    // 168cb15d70 (2026-06-03, training/arguments.py), so a release from 26.06 gets native, which
    // holds 3 logits' worth where te holds 1 (costmodel/loss.hpp): --cross-entropy-loss-fusion
    // prices it.
    const bool te = s.loss == LossImpl::te || (s.loss == LossImpl::unset && s.fused_cross_entropy);
    if (te || s.loss == LossImpl::megatron_native) {
        arg(os, "--cross-entropy-loss-fusion");
        arg(os, "--cross-entropy-fusion-impl", te && s.release < "26.06" ? "te" : "native");
    }
    if (job.grads == Dtype::bf16 && job.compute == Dtype::bf16) {
        arg(os, "--grad-reduce-in-bf16");
    }
    if (s.overlap_grad_reduce && p.dp * p.cp > 1) {
        arg(os, "--overlap-grad-reduce");
    }
    if (s.overlap_param_gather && p.zero >= 1 && p.dp * p.cp > 1) {
        arg(os, "--overlap-param-gather");
    }
    if (s.tp_comm_overlap && p.sp && p.tp > 1) {
        arg(os, "--tp-comm-overlap");
    }
    // The optimizer states as priced: narrower moments or master weights need the
    // precision-aware optimizer (an export without it would launch with fp32 states).
    if (const OptimizerDtypes d = optimizer_dtypes(job); d.precision_aware) {
        arg(os, "--use-precision-aware-optimizer");
        arg(os, "--exp-avg-dtype", d.exp_avg);
        arg(os, "--exp-avg-sq-dtype", d.exp_avg_sq);
        arg(os, "--main-params-dtype", d.main_params);
    }
    if (p.recompute == Recompute::selective && p.recompute_modules == 0 &&
        !s.recompute_modules.empty()) {
        std::string mods;
        for (const auto& m : s.recompute_modules) {
            mods += (mods.empty() ? "" : " ") + m;
        }
        arg(os, "--recompute-modules", mods);
    }
}

}  // namespace

/// An export is written for the stack's own framework; for another it would drop what the
/// price assumed, so it stops (exit 2) and says which --stack would fit.
void require_framework(const JobSpec& job, StackFramework want, const char* format) {
    if (job.stack.framework != want) {
        throw ConfigError(std::string("--format ") + format + ": the plan was priced for stack '" +
                          job.stack.name + "' (framework " + to_string(job.stack.framework) +
                          "), not " + to_string(want) + "; choose a " + to_string(want) +
                          " stack with --stack (cleave stack list) or another --format");
    }
}

void write_megatron(std::ostream& os, const ModelSpec& model, const JobSpec& job, const RankedPlan& best) {
    const Plan& p = best.plan;
        os << "# Megatron-LM arguments (megatron/training/arguments.py) for " << to_string(p) << "\n";
    os << "# predicted " << f("%.3f", best.estimate.iteration_time.value()) << " s per iteration, "
       << f("%.0f", best.estimate.tokens_per_s) << " tokens/s; world size " << plan_gpus(p)
       << " = tp " << p.tp << " x pp " << p.pp << " x cp " << p.cp << " x dp " << p.dp << "\n";
    os << "# vocabulary " << model.vocab
       << " comes from the tokenizer (--vocab-size with --tokenizer-type NullTokenizer)\n";
    if (p.schedule == Schedule::gpipe) {
        os << "# Megatron-LM has no GPipe schedule; its default 1F1B has the same bubble\n";
    }
    // Megatron-LM @d98e8a64 arguments.py:2880 --tp-comm-overlap-cfg (a YAML of userbuffers
    // settings, initialize.py:211); without it TE's initialize_ub defaults apply.
    if (job.stack.tp_comm_overlap && p.sp && p.tp > 1) {
        os << "# --tp-comm-overlap was priced with NVIDIA's tuned userbuffers presets (row-parallel "
              "forward "
           << to_string(is_quantised(job.compute) ? job.stack.tp_overlap_row_fprop_quantised
                                                  : job.stack.tp_overlap_row_fprop)
           << "; Megatron-Bridge training/comm_overlap.py userbuffers_*): pass one with "
              "--tp-comm-overlap-cfg <yaml>, or Transformer Engine's defaults give 16 SMs to every "
              "pipeline and bulk communicator and the step runs slower than predicted\n";
    }
    if (job.peft != Peft::none) {
        os << "# " << (job.peft == Peft::dora ? "DoRA" : "LoRA") << " dim " << job.lora_dim << ", alpha " << f("%g", job.lora_alpha) << " on "
           << lora_targets_string(job.lora_targets)
           << " was priced: Megatron-LM's arguments.py (@d98e8a64) has no PEFT flags; the "
              "adapters are Megatron-Bridge's (cleave plan --format bridge writes peft.dim, peft.alpha, "
              "peft.target_modules), these flags set the layout around them\n";
    }
    if (packed(job)) {
        os << "# packed sequences were priced with samples of mean " << f("%g", job.packed_mean_len)
           << " tokens (std " << f("%g", job.packed_len_std)
           << "): --sft reads packs from --data-path jsonl lines of conversations "
              "(--sft-tokenizer-prompt-format), one micro-batch a pack\n";
    }
    if (model.sandwich_norms) {
        os << "# the norms after each block (Gemma 2 / 3) have no Megatron-LM flag: Megatron-Bridge's "
              "Gemma providers build them (models/gemma/gemma3_provider.py, the linear layers' "
              "post_layernorm)\n";
    }
    if (p.zero >= 2) {
        os << "# ZeRO-" << p.zero
           << " is Megatron-FSDP; older releases spell it --use-custom-fsdp\n";
    }
    if (optimizer_dtypes(job).master_inexpressible) {
        os << "# priced with bf16 master weights (Apex DistributedFusedAdam); Megatron's "
              "--main-params-dtype takes fp32 or fp16: memory will be higher than predicted\n";
    }
    Args args;
    megatron_model_args(args, model, job);
    megatron_plan_args(args, model, job, p);
    megatron_stack_args(args, job, p);
    if (job.compute == Dtype::fp16) {
        arg(args, "--fp16");
    } else if (job.compute != Dtype::fp32) {
        arg(args, "--bf16");  // fp32 is Megatron's default and has no flag
    }
    megatron_precision_args(args, job);
    if (job.cuda_graph_impl != CudaGraphImpl::none) {
        // Megatron-LM arguments.py: --cuda-graph-impl, --cuda-graph-scope (nargs '+'; none given
        // = each whole layer), as priced (costmodel/launches.hpp).
        arg(args, "--cuda-graph-impl", to_string(job.cuda_graph_impl));
        const std::string scope = cuda_graph_scope_string(job.cuda_graph_scope);
        if (scope != "full") {
            std::string spaced = scope;
            std::replace(spaced.begin(), spaced.end(), ',', ' ');
            arg(args, "--cuda-graph-scope", spaced);
        }
    }
    if (job.optimizer != Optimizer::adam) {
        // Megatron-LM arguments.py @d98e8a64: --optimizer adam|sgd|muon; Muon's Newton-Schulz
        // steps and TP mode as priced, Adam for the scalar parameters (its default).
        arg(args, "--optimizer", to_string(job.optimizer));
        if (job.optimizer == Optimizer::muon) {
            arg(args, "--muon-num-ns-steps", std::to_string(job.muon_ns_steps));
            arg(args, "--muon-tp-mode", to_string(job.muon_tp_mode));
            arg(args, "--muon-scalar-optimizer", "adam");
        }
    }
    for (std::size_t i = 0; i < args.size(); ++i) {
        os << args[i] << (i + 1 < args.size() ? " \\\n" : "\n");
    }
}

}  // namespace cleave
