#include "cli/common.hpp"
#include "core/stack.hpp"

#include "core/errors.hpp"
#include "core/load.hpp"
#include "costmodel/precision.hpp"
#include "costmodel/splits.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include <toml++/toml.h>

namespace cleave::cli {

void add_job_flags(CLI::App& sub, JobFlags& f, bool require_gpus, bool require_cluster,
                   bool require_model) {
    auto* model = sub.add_option("MODEL", f.model, "Model: cleave TOML or Hugging Face config.json")
                      ->check(CLI::ExistingFile);
    if (require_model) {
        model->required();
    }
    auto* cluster =
        sub.add_option("CLUSTER", f.cluster, "Hardware profile: shipped name or TOML path");
    if (require_cluster) {
        cluster->required();
    }
    auto* gpus = sub.add_option("--gpus", f.gpus, "Number of GPUs")->check(CLI::PositiveNumber);
    if (require_gpus) {
        gpus->required();
    }
    sub.add_option("--gbs", f.gbs, "Global batch size in sequences")->check(CLI::PositiveNumber);
    sub.add_option("--seq", f.seq, "Sequence length (default: the model's)")
        ->check(CLI::NonNegativeNumber);
    sub.add_option("--dtype", f.dtype, "Compute dtype of the linear layers' GEMMs")
        ->check(CLI::IsMember({"bf16", "fp16", "fp8", "mxfp8", "nvfp4", "fp32"}))
        ->capture_default_str();
    sub.add_option("--fp8-recipe", f.fp8_recipe, "FP8 scaling recipe (default delayed)")
        ->check(CLI::IsMember({"tensorwise", "delayed", "blockwise"}));
    sub.add_option("--float8-recipe",
                   f.float8_recipe,
                   "torchtitan (torchao) float8.recipe_name under --dtype fp8 (default: the "
                   "stack release's; tensorwise up to 26.03, rowwise from 26.04)")
        ->check(CLI::IsMember({"tensorwise", "rowwise", "rowwise_with_gw_hp"}));
    sub.add_option("--float8-fsdp-all-gather",
                   f.float8_fsdp_all_gather,
                   "torchtitan float8.enable_fsdp_float8_all_gather: FSDP gathers the weights in "
                   "float8 (tensorwise only)")
        ->check(CLI::IsMember({"on", "off"}));
    sub.add_option("--float8-precompute-scale",
                   f.float8_precompute,
                   "torchtitan float8.precompute_float8_dynamic_scale_for_fsdp (with the above)")
        ->check(CLI::IsMember({"on", "off"}));
    sub.add_option("--float8-force-recompute-weight",
                   f.float8_force_recompute,
                   "torchtitan float8.force_recompute_fp8_weight_in_bwd (releases 25.02-25.06)")
        ->check(CLI::IsMember({"on", "off"}));
    sub.add_flag("--fp8-param-gather",
                 f.fp8_param_gather,
                 "FP8 primary weights, all-gathered in FP8 (Megatron --fp8-param-gather)");
    sub.add_flag("--first-last-layers-bf16",
                 f.first_last_bf16,
                 "Keep the first and last layers bf16 under fp8 / mxfp8 / nvfp4 (Megatron)");
    sub.add_option("--num-layers-at-start-in-bf16", f.bf16_layers_start, "With the flag above")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub.add_option("--num-layers-at-end-in-bf16", f.bf16_layers_end, "With the flag above")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub.add_flag("--use-precision-aware-optimizer",
                 f.precision_aware,
                 "Megatron's precision-aware optimizer: the dtypes below may be narrower than fp32");
    sub.add_option("--exp-avg-dtype", f.exp_avg_dtype, "Adam's first moment (Megatron; default fp32)")
        ->check(CLI::IsMember({"fp32", "fp16", "bf16", "fp8"}));
    sub.add_option("--exp-avg-sq-dtype", f.exp_avg_sq_dtype, "Adam's second moment (default fp32)")
        ->check(CLI::IsMember({"fp32", "fp16", "bf16", "fp8"}));
    sub.add_option("--main-grads-dtype", f.main_grads_dtype, "Main gradient buffer (Megatron)")
        ->check(CLI::IsMember({"fp32", "bf16"}));
    sub.add_option("--main-params-dtype", f.main_params_dtype, "Master weights (Megatron)")
        ->check(CLI::IsMember({"fp32", "fp16"}));
    sub.add_option("--optimizer", f.optimizer,
                   "Optimizer (Megatron --optimizer): adam, sgd, or muon (momentum + Newton-Schulz "
                   "on the 2-D weights, Adam for the embedding, output layer, norms and biases)")
        ->check(CLI::IsMember({"adam", "sgd", "muon"}));
    sub.add_option("--muon-num-ns-steps", f.muon_ns_steps, "Muon's Newton-Schulz steps (default 5)")
        ->check(CLI::PositiveNumber);
    sub.add_option("--muon-tp-mode", f.muon_tp_mode,
                   "Muon under TP: blockwise (each shard alone), duplicated (default: the whole "
                   "matrix gathered on every TP rank) or distributed")
        ->check(CLI::IsMember({"blockwise", "duplicated", "distributed"}));
    sub.add_option("--grad-dtype", f.grad_dtype, "Gradient buffer dtype (default fp32 main grads)")
        ->check(CLI::IsMember({"bf16", "fp16", "fp32"}));
    sub.add_option("--job", f.job_file, "Job TOML (flags override it)")->check(CLI::ExistingFile);
    sub.add_flag("--expandable-segments",
                 f.expandable_segments,
                 "The run sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: the fit check "
                 "counts the allocated peak plus the page residue, not the allocator's cache");
    sub.add_option("--loss",
                   f.loss,
                   "The loss as the stack computes it (default: the stack's [memory] loss): "
                   "unfused / native / te (Megatron's; te = Transformer Engine's in-place CE), "
                   "eager / compiled (torch F.cross_entropy on fp32 logits, torch.compile'd)")
        ->check(CLI::IsMember({"unfused", "native", "te", "eager", "compiled"}));
    sub.add_option("--loss-chunks",
                   f.loss_chunks,
                   "torchtitan ChunkedLossWrapper num_chunks: output layer and loss on 1/N of the "
                   "tokens at a time (default: the stack's; 1 = unchunked)")
        ->check(CLI::PositiveNumber);
    sub.add_flag("--cross-entropy-loss-fusion",
                 f.ce_loss_fusion,
                 "Megatron's fused cross entropy (impl from --cross-entropy-fusion-impl)");
    sub.add_option("--cross-entropy-fusion-impl",
                   f.ce_fusion_impl,
                   "Megatron's fused cross entropy: native (Megatron's default) or te")
        ->check(CLI::IsMember({"native", "te"}));
    sub.add_flag("--torch-compile", f.torch_compile, "torchtitan: blocks (and loss) compiled");
    sub.add_flag("--no-torch-compile", f.no_torch_compile, "torchtitan: eager blocks");
    sub.add_option("--memory-headroom",
                   f.memory_headroom,
                   "Memory kept free on top of the profile's reserved memory: GiB, or N% of the "
                   "GPU's memory")
        ->capture_default_str();
    sub.add_option("--moe-capacity",
                   f.moe_capacity,
                   "MoE token-drop capacity factor (Megatron --moe-expert-capacity-factor); "
                   "0 = none, dropless")
        ->capture_default_str();
    sub.add_flag("--moe-pad",
                 f.moe_pad,
                 "Pad every expert's tokens to the capacity (Megatron "
                 "--moe-pad-expert-input-to-capacity): static shapes, no host sync; needs "
                 "--moe-capacity");
    sub.add_option("--mtp-num-layers",
                   f.mtp_num_layers,
                   "Train multi-token prediction (Megatron --mtp-num-layers): N depths, the "
                   "model's MTP modules, or its one module run N times "
                   "(--mtp-use-repeated-layer); 0 = none (default: [job] mtp)")
        ->check(CLI::NonNegativeNumber);
    sub.add_option("--moe-imbalance",
                   f.moe_imbalance,
                   "Busiest expert's tokens over the average (1 = the forced balance of "
                   "published benchmarks)")
        ->capture_default_str();
    sub.add_option("--moe-token-dispatcher-type",
                   f.moe_dispatcher,
                   "MoE token dispatcher (Megatron): alltoall, allgather, or flex (DeepEP / "
                   "HybridEP: one copy per remote node, fanned out over NVLink); default the "
                   "stack's")
        ->check(CLI::IsMember({"alltoall", "allgather", "flex"}));
    sub.add_option("--moe-flex-dispatcher-backend",
                   f.moe_flex_backend,
                   "Flex dispatcher backend (Megatron): deepep or hybridep, both priced as DeepEP's "
                   "node-level dedup; implies --moe-token-dispatcher-type flex")
        ->check(CLI::IsMember({"deepep", "hybridep"}));
    sub.add_flag("--overlap-moe-expert-parallel-comm",
                 f.moe_a2a_overlap,
                 "Hide the EP all-to-all behind the other micro-batch's compute (Megatron "
                 "combined 1F1B; Megatron-Bridge moe_a2a_overlap)");
    sub.add_option("--moe-router-num-groups",
                   f.moe_router_groups,
                   "Group-limited routing (Megatron): experts in this many groups (DeepSeek-V3: 8, "
                   "one per node of its EP group); needs --moe-router-group-topk");
    sub.add_option("--moe-router-group-topk",
                   f.moe_router_group_topk,
                   "Group-limited routing: a token's experts come from its best this-many groups "
                   "(DeepSeek-V3: 4 nodes)");
    sub.add_option("--peft",
                   f.peft,
                   "Fine-tuning: none (train every weight), lora (frozen base, low-rank "
                   "adapters) or dora (LoRA and a trained magnitude per output row); "
                   "Megatron-Bridge PEFT")
        ->check(CLI::IsMember({"none", "lora", "dora"}))
        ->capture_default_str();
    sub.add_option("--lora-dim", f.lora_dim, "LoRA rank (Megatron-Bridge LoRA dim)")
        ->capture_default_str();
    sub.add_option("--lora-alpha",
                   f.lora_alpha,
                   "LoRA / DoRA scale numerator (output x alpha / dim); 0: Megatron-Bridge's "
                   "default, 32 for lora, 64 for dora")
        ->capture_default_str();
    sub.add_option("--lora-target-modules",
                   f.lora_target_modules,
                   "Linears LoRA adapts, comma list of linear_qkv, linear_proj, linear_fc1, "
                   "linear_fc2 (Megatron-Bridge target_modules)")
        ->capture_default_str();
    sub.add_option("--cuda-graph-impl",
                   f.cuda_graph_impl,
                   "CUDA graphs (Megatron-Core --cuda-graph-impl): none, local (Megatron's "
                   "per-layer capture) or transformer_engine; the launch gaps inside the scope "
                   "are not paid")
        ->check(CLI::IsMember({"none", "local", "transformer_engine"}))
        ->capture_default_str();
    sub.add_option("--cuda-graph-scope",
                   f.cuda_graph_scope,
                   "What the graphs capture, comma list of full (each whole layer, the default), "
                   "attn, mlp, moe, moe_router, moe_preprocess, mamba, full_iteration "
                   "(Megatron-Core --cuda-graph-scope)");
    sub.add_flag("--packed-seq",
                 f.packed_seq,
                 "Packed sequences (SFT): each --seq sequence is a pack of samples and attention "
                 "runs per sample (THD, cu_seqlens; Megatron-Bridge offline packing, "
                 "Megatron-LM --sft); needs --packed-seq-mean-len");
    sub.add_option("--packed-seq-mean-len",
                   f.packed_seq_mean_len,
                   "Mean tokens of a sample in a pack (the attention core costs seq x this, not "
                   "seq^2)");
    sub.add_option("--packed-seq-len-std",
                   f.packed_seq_len_std,
                   "Standard deviation of the sample lengths (the core's span is mean + std^2 / "
                   "mean = E[L^2] / E[L]; 0 = equal samples)")
        ->capture_default_str();
    sub.add_option("--calibration",
                   f.calibration,
                   "A calibration overlay (TOML) applied on top of CLUSTER, such as cleave "
                   "calibrate --from-trace writes")
        ->check(CLI::ExistingFile);
    sub.add_option("--stack",
                   f.stack,
                   "Software stack: shipped name (cleave stack list) or TOML path "
                   "(default: [job] stack, else megatron-core)");
    sub.add_option("--release",
                   f.release,
                   "Software release the stack runs, YY.MM as NVIDIA numbers its NeMo containers "
                   "(25.11, 26.04; torchtitan: the year and month of its commit); picks the "
                   "calibration values and torchtitan float8 defaults of it or the nearest "
                   "earlier one (default: the stack's release)")
        ->check([](const std::string& r) {
            return valid_release(r) ? std::string() : "must be YY.MM (e.g. 26.04), got " + r;
        });
}

void add_trace_scope_flag(CLI::App& sub, std::string& scope) {
    sub.add_option("--trace-scope", scope,
                   "What the trace covers: step (one iteration) or layers=N (forward + backward "
                   "of N layers of one micro-batch)")
        ->capture_default_str();
}

void add_train_flags(CLI::App& sub, TrainFlags& f) {
    sub.add_option("--tokens",
                   f.tokens,
                   "Tokens to train on (15T, 300B, 2e12): adds days, GPU-hours, energy, cost");
    sub.add_option("--price-per-gpu-hour",
                   f.price_per_gpu_hour,
                   "USD per GPU-hour (default: the profile's price_per_gpu_hour_usd)")
        ->check(CLI::NonNegativeNumber);
    sub.add_option("--pue", f.pue, "Power usage effectiveness of the facility (1 = GPUs alone)")
        ->check(CLI::Range(1.0, 10.0))
        ->capture_default_str();
    sub.add_option("--failures-per-gpu-hour",
                   f.failures_per_gpu_hour,
                   "Unexpected interruptions per GPU-hour (default: Llama 3's 419 in 54 days on "
                   "16,384 GPUs = 1.97e-5; 0 = none)")
        ->check(CLI::NonNegativeNumber);
    sub.add_option("--checkpoint-interval-h", f.checkpoint_interval_h, "Hours between checkpoints")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub.add_option(
           "--restart-h", f.restart_h, "Hours from an interruption to training again (a guess)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
}

void add_plan_flags(CLI::App& sub, PlanFlags& f) {
    sub.add_option("--tp", f.tp, "Tensor-parallel size")->capture_default_str();
    sub.add_option("--pp", f.pp, "Pipeline-parallel size")->capture_default_str();
    sub.add_option("--dp", f.dp, "Data-parallel size (0 = gpus / (tp*pp*cp))")
        ->capture_default_str();
    sub.add_option("--cp", f.cp, "Context-parallel size")->capture_default_str();
    sub.add_option("--ep", f.ep, "Expert-parallel size")->capture_default_str();
    sub.add_option("--etp", f.etp, "Expert tensor-parallel size (0 = tp, Megatron-Core's default)")
        ->capture_default_str();
    sub.add_option("--mbs", f.mbs, "Micro-batch size (sequences)")->capture_default_str();
    sub.add_option("--vpp", f.vpp, "Virtual stages per pipeline rank")->capture_default_str();
    sub.add_option(
           "--schedule", f.schedule, "Pipeline schedule (default 1f1b, interleaved if vpp>1; dualpipe: DeepSeek-V3's "
           "bidirectional schedule, priced only; dualpipev: its V-shaped half, torchtitan's "
           "DualPipeV)")
        ->check(CLI::IsMember({"1f1b", "gpipe", "interleaved", "dualpipe", "dualpipev"}));
    sub.add_option("--recompute", f.recompute, "Activation recomputation")
        ->check(CLI::IsMember({"none", "selective", "full"}))
        ->capture_default_str();
    sub.add_flag("--sp", f.sp, "Megatron sequence parallelism");
    sub.add_option("--zero", f.zero, "ZeRO stage (1 = distributed optimizer)")
        ->check(CLI::Range(0, 3))
        ->capture_default_str();
    sub.add_option("--first-stage-layers",
                   f.first_stage_layers,
                   "Transformer layers on the first pipeline stage (default: an even share)")
        ->check(CLI::NonNegativeNumber);
    sub.add_option("--last-stage-layers",
                   f.last_stage_layers,
                   "Transformer layers on the last pipeline stage (default: an even share)")
        ->check(CLI::NonNegativeNumber);
    sub.add_option("--recompute-num-layers",
                   f.recompute_num_layers,
                   "Full recomputation: layers per uniform group, or checkpointed per chunk with "
                   "--recompute-method block (Megatron's flags; default 1 uniform)")
        ->check(CLI::NonNegativeNumber);
    sub.add_option("--recompute-modules",
                   f.recompute_modules,
                   "Selective recomputation's modules, Megatron's names, comma-separated: core_attn, "
                   "mlp, layernorm, moe, moe_act, mla_up_proj, shared_experts (implies --recompute "
                   "selective; default core_attn)");
    sub.add_option("--cpu-offloading-num-layers",
                   f.offload_layers,
                   "Megatron --cpu-offloading of activations: layers per stage whose saved "
                   "activations go to host memory (default 0)")
        ->check(CLI::NonNegativeNumber);
    sub.add_option("--recompute-method", f.recompute_method, "Full recomputation: uniform or block")
        ->check(CLI::IsMember({"uniform", "block"}))
        ->capture_default_str();
    sub.add_option("--pipeline-layout",
                   f.pipeline_layout,
                   "Layer map in Megatron's --pipeline-model-parallel-layout notation, e.g. "
                   "\"Et*7|(t*8|)*14t*7L\" (sets --vpp and the stage layers)");
}

}  // namespace cleave::cli
