#pragma once
// The job and plan a user describes (the CLI's job and plan flags, Python's keywords), and turning
// them into the library's value types: api/cleave.hpp is the header to read first.

#include "core/cluster.hpp"
#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "costmodel/train_cost.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace cleave::api {

/// Time and cost to train (--tokens and friends; costmodel/train_cost.hpp). Negative = not given.
struct TrainOptions {
    std::string tokens;                 // "15T", "300B", "2.5e12"; "" = [job] train_tokens
    double price_per_gpu_hour = -1.0;   // USD; < 0 = the profile's price_per_gpu_hour_usd
    double pue = 1.0;                   // facility power / IT power
    double failures_per_gpu_hour = -1;  // < 0 = Llama 3's 419 in 54 days on 16,384 GPUs
    double checkpoint_interval_h = 1.0;
    double restart_h = 0.25;
};

struct JobOptions {
    std::string model;    // model TOML or HF config.json
    std::string cluster;  // profile name or TOML path
    int64_t gpus = 0;
    int64_t gbs = 0;
    int64_t seq = 0;  // 0 = the model's seq_len
    std::string dtype = "bf16";
    std::string grad_dtype;         // "" = Megatron's default (fp32 main grads)
    // Megatron's precision-aware optimizer (--use-precision-aware-optimizer and its dtypes).
    bool precision_aware = false;
    std::string exp_avg_dtype, exp_avg_sq_dtype, main_grads_dtype, main_params_dtype;
    std::string optimizer;      // Megatron --optimizer adam|sgd|muon ("" = the job file's, else adam)
    int64_t muon_ns_steps = 0;  // --muon-num-ns-steps (0 = the job file's, else 5)
    std::string muon_tp_mode;   // --muon-tp-mode ("" = the job file's, else duplicated)
    std::string job_file;           // optional job TOML; flags override its values
    std::string fp8_recipe;         // "" = the job file's, else Megatron's default (delayed)
    bool fp8_param_gather = false;  // fp8 primary weights, all-gathered in fp8
    /// torchao Float8 under a torchtitan stack (costmodel/float8.hpp), torchtitan's float8.* keys:
    /// --float8-recipe tensorwise|rowwise|rowwise_with_gw_hp, the others on|off; "" = the
    /// default of the stack's release.
    std::string float8_recipe, float8_fsdp_all_gather, float8_precompute, float8_force_recompute;
    bool first_last_bf16 = false;   // Megatron --first-last-layers-bf16
    int64_t bf16_layers_start = 1;  // --num-layers-at-start-in-bf16 (Megatron's default 1)
    int64_t bf16_layers_end = 1;    // --num-layers-at-end-in-bf16
    /// mxfp8 / nvfp4 on a GPU without them: false = a ConfigError, true = priced at the next
    /// wider precision the GPU has (cleave compare, which says so).
    bool precision_fallback = false;
    std::string stack;  // software stack name or TOML; "" = [job] stack, else megatron-core
    std::string calibration;  // --calibration OVERLAY.toml on top of the profile ("" = none)
    std::string release;  // --release YY.MM: the stack's software release ("" = the stack's own)
    std::string memory_headroom = "5%";  // GiB ("4") or percent of GPU memory ("5%")
    double moe_capacity = 0.0;           // --moe-capacity: 0 = none (dropless)
    std::string moe_dispatcher;          // --moe-token-dispatcher-type: "" = the stack's
    std::string moe_flex_backend;        // --moe-flex-dispatcher-backend (implies flex)
    bool moe_a2a_overlap = false;        // --overlap-moe-expert-parallel-comm
    int64_t moe_router_groups = 0;       // --moe-router-num-groups
    int64_t moe_router_group_topk = 0;   // --moe-router-group-topk
    bool moe_pad = false;                // --moe-pad (needs --moe-capacity)
    int64_t mtp_num_layers = -1;         // --mtp-num-layers: MTP depths trained (-1 = [job] mtp)
    bool expandable_segments = false;    // --expandable-segments (PYTORCH_CUDA_ALLOC_CONF)
    std::string loss;               // --loss unfused|native|te|eager|compiled ("" = the stack's)
    int64_t loss_chunks = 0;        // --loss-chunks N: ChunkedLossWrapper (0 = the stack's)
    bool ce_loss_fusion = false;    // Megatron --cross-entropy-loss-fusion
    std::string ce_fusion_impl;     // Megatron --cross-entropy-fusion-impl native|te ("" = native)
    bool torch_compile = false;     // --torch-compile: torchtitan blocks (and loss) compiled
    bool no_torch_compile = false;  // --no-torch-compile: eager
    double moe_imbalance = 1.0;          // --moe-imbalance: busiest expert's tokens / average
    // Fine-tuning, Megatron-Bridge's LoRA names and defaults (peft/lora.py @067f987d).
    std::string peft = "none";  // --peft none|lora|dora
    int64_t lora_dim = 32;      // --lora-dim (Bridge `dim`)
    double lora_alpha = 0.0;    // --lora-alpha; 0: the method's (32 LoRA, 64 DoRA: dora.py)
    std::string lora_target_modules = "linear_qkv,linear_proj,linear_fc1,linear_fc2";
    // Packed sequences (SFT): --seq tokens a pack, attention per sample (costmodel/packing.hpp).
    bool packed_seq = false;           // --packed-seq
    double packed_seq_mean_len = 0.0;  // --packed-seq-mean-len: mean sample tokens
    double packed_seq_len_std = 0.0;   // --packed-seq-len-std: their standard deviation
    // CUDA graphs (Megatron-Core --cuda-graph-impl / --cuda-graph-scope; costmodel/launches.hpp).
    std::string cuda_graph_impl = "none";  // none | local | transformer_engine
    std::string cuda_graph_scope;          // comma list; "" = full (each whole layer)
    TrainOptions train;                    // the CLI registers these with add_train_flags()
};

struct PlanOptions {
    int64_t tp = 1;
    int64_t pp = 1;
    int64_t dp = 0;  // 0 = gpus / (tp * pp * cp)
    int64_t cp = 1;
    int64_t ep = 1;
    int64_t etp = 0;  // 0 = tp (Megatron-Core's default)
    int64_t mbs = 1;
    int64_t vpp = 1;
    std::string schedule = "";  // "" = interleaved when vpp > 1, else 1f1b
    std::string recompute = "none";
    bool sp = false;
    int zero = 0;
    int64_t first_stage_layers = 0;  // 0 = the middle stages' share
    int64_t last_stage_layers = 0;
    std::string pipeline_layout;       // Megatron's --pipeline-model-parallel-layout notation
    int64_t recompute_num_layers = 0;  // 0 = 1 (uniform)
    std::string recompute_method = "uniform";
    std::string recompute_modules;  // Megatron --recompute-modules (implies selective)
    int64_t offload_layers = 0;     // Megatron --cpu-offloading-num-layers
};

/// "15T" -> 1.5e13 (suffixes K M B/G T P, powers of 1000; plain numbers as they are). Throws
/// ConfigError naming --tokens on anything else.
[[nodiscard]] double parse_token_count(const std::string& s);

struct Inputs {
    ModelSpec model;
    ClusterSpec cluster;
    JobSpec job;
    TrainCostOptions train;  // train.tokens == 0: no time-and-cost estimate
};

/// --memory-headroom "X" (GiB) or "N%" (of the GPU's memory) in bytes; throws ConfigError naming
/// the flag on anything else.
[[nodiscard]] Bytes parse_headroom(const std::string& s, const GpuSpec& gpu);

/// Loads model, cluster (none when f.cluster is empty) and job; throws ConfigError naming the
/// file and key on bad input.
/// `default_stack`: the stack priced when neither --stack nor [job] stack names one.
[[nodiscard]] Inputs load_inputs(const JobOptions& f,
                                 std::string_view default_stack = default_stack_name);
/// The same with the model and cluster already loaded (f.model and f.cluster are not read).
[[nodiscard]] Inputs load_inputs(const JobOptions& f,
                                 ModelSpec model,
                                 ClusterSpec cluster,
                                 std::string_view default_stack = default_stack_name);

/// The plan the flags describe for `job` (dp derived when 0). Throws ConfigError when
/// check_plan() finds a broken constraint, listing every one.
[[nodiscard]] Plan make_plan(const PlanOptions& f, const Inputs& in);

/// The micro-batch of a packed job: 1 (one pack); any other `mbs` throws ConfigError naming
/// --mbs and the equivalent --gbs / --seq (Megatron-Bridge's own advice, training/config.py
/// @067f987d).
[[nodiscard]] int64_t packed_micro_batch(int64_t mbs);

[[nodiscard]] Dtype parse_dtype(const std::string& s);  // throws ConfigError

/// v with `decimals` digits after the point ("%.*f").
[[nodiscard]] std::string fixed(double v, int decimals);

/// The current time in UTC as "2026-11-30T04:15:03Z" (a profile's provenance).
[[nodiscard]] std::string utc_now();

}  // namespace cleave::api
