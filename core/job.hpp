#pragma once
// The training job: how many GPUs, what batch, what precision, what optimizer.

#include "core/cluster.hpp"
#include "core/stack.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cleave {

/// adam (two moments), sgd (momentum), muon (Jordan et al. 2024; Megatron-LM --optimizer muon,
/// megatron/core/optimizer/emerging_optimizers.py @d98e8a64): a momentum buffer per 2-D weight,
/// orthogonalised by Newton-Schulz iterations each step; the embedding and output layer (and
/// norms / biases) under --muon-scalar-optimizer adam.
enum class Optimizer { adam, sgd, muon };

/// Megatron --muon-tp-mode: blockwise orthogonalises each TP shard alone; duplicated all-gathers
/// the TP-sharded gradient and every TP rank orthogonalises the whole matrix; distributed
/// splits that work over the TP ranks (priced as duplicated's gathers over tp ranks' share).
enum class MuonTpMode { blockwise, duplicated, distributed };

/// Transformer Engine scaling recipe of Dtype::fp8 (Megatron --fp8-recipe; its default is delayed,
/// megatron/core/transformer/transformer_config.py @d98e8a64): delayed = one scale per tensor from
/// an amax history, tensorwise = per-tensor current scaling, blockwise = 1x128 / 128x128 blocks.
/// mxfp8 and nvfp4 carry their own block scaling in the dtype.
enum class Fp8Recipe { delayed, tensorwise, blockwise };

/// The job's torchao Float8 settings under a torchtitan stack (--dtype fp8), by torchtitan's config
/// keys (float8.recipe_name, float8.enable_fsdp_float8_all_gather,
/// float8.precompute_float8_dynamic_scale_for_fsdp, float8.force_recompute_fp8_weight_in_bwd);
/// unset = the default of the stack's release ([[float8.release]], costmodel/float8.hpp).
struct Float8Options {
    std::optional<Float8Recipe> recipe;
    std::optional<bool> fsdp_all_gather;
    std::optional<bool> precompute_scale;
    std::optional<bool> force_recompute_weight;

    bool operator==(const Float8Options&) const = default;
};

/// Parameter-efficient fine-tuning (Megatron-Bridge src/megatron/bridge/peft/): none trains every
/// weight; lora freezes the base model and trains low-rank adapters (Hu et al. 2021,
/// arXiv:2106.09685).
enum class Peft { none, lora, dora };

/// CUDA graphs (Megatron-Core --cuda-graph-impl, Megatron-Bridge model.cuda_graph_impl): none, its
/// own per-layer capture (local) or Transformer Engine's make_graphed_callables.
enum class CudaGraphImpl { none, local, transformer_engine };

/// What the graphs capture (Megatron-Core --cuda-graph-scope / Bridge cuda_graph_scope): bits of
/// JobSpec::cuda_graph_scope. `layer` is Megatron's "full" (each whole layer).
namespace cuda_graph_scope {
inline constexpr uint8_t attn = 1;
inline constexpr uint8_t mlp = 2;
inline constexpr uint8_t moe = 4;
inline constexpr uint8_t moe_router = 8;
inline constexpr uint8_t moe_preprocess = 16;
inline constexpr uint8_t mamba = 32;
inline constexpr uint8_t full_iteration = 64;
inline constexpr uint8_t layer = attn | mlp | moe | moe_router | moe_preprocess | mamba;
}  // namespace cuda_graph_scope

/// The linear layers LoRA adapts, by Megatron-Bridge's target_modules names (bits of
/// JobSpec::lora_targets).
namespace lora_target {
inline constexpr uint8_t linear_qkv = 1;
inline constexpr uint8_t linear_proj = 2;
inline constexpr uint8_t linear_fc1 = 4;
inline constexpr uint8_t linear_fc2 = 8;
inline constexpr uint8_t all = 15;  // Bridge's default list
}  // namespace lora_target

struct JobSpec {
    int64_t gpus = 0;
    int64_t global_batch = 0;     // sequences per iteration
    int64_t seq_len = 0;          // tokens per sequence
    Dtype compute = Dtype::bf16;  // GEMM / activation dtype
    Dtype weights = Dtype::bf16;  // model weights as the forward pass reads them
    Dtype grads = Dtype::fp32;    // gradient buffer (Megatron keeps fp32 main grads for bf16)
    Dtype optimizer_states = Dtype::fp32;  // Adam m (and v unless optimizer_states_sq says)
    /// Adam's second moment v where it differs from m (Megatron --exp-avg-sq-dtype under
    /// --use-precision-aware-optimizer); the job TOML and --exp-avg-dtype alone set both.
    Dtype optimizer_states_sq = Dtype::fp32;
    bool master_weights = true;  // a master copy of the weights when `weights` is 16-bit or less
    /// The master copy's dtype (Megatron --main-params-dtype fp32|fp16, precision-aware; bf16
    /// for Apex DistributedFusedAdam with dtype=bf16, NeMo's distributed_fused_adam).
    Dtype master_dtype = Dtype::fp32;
    Optimizer optimizer = Optimizer::adam;
    int64_t muon_ns_steps = 5;                         // Megatron --muon-num-ns-steps
    MuonTpMode muon_tp_mode = MuonTpMode::duplicated;  // Megatron --muon-tp-mode
    Fp8Recipe fp8_recipe = Fp8Recipe::delayed;  // when compute is Dtype::fp8
    Float8Options float8;  // torchao Float8 under a torchtitan stack (compute Dtype::fp8)
    /// Layers kept bf16 at the start and at the end of the model under quantised training
    /// (Megatron --first-last-layers-bf16 --num-layers-at-{start,end}-in-bf16; megatron/core/
    /// fp8_utils.py is_first_last_bf16_layer @d98e8a64); 0 = every layer quantised.
    int64_t bf16_layers_start = 0;
    int64_t bf16_layers_end = 0;
    /// Train the model's multi-token-prediction modules (ModelSpec::mtp_layers; Megatron
    /// --mtp-num-layers). Off by default: the MTP FLOPs count only when a job enables it.
    bool mtp = false;
    /// Forward passes of each MTP module per step (Megatron-Bridge mtp_use_repeated_layer: the
    /// one shared block run mtp_num_layers times, nemotron_3_super.py @v0.4.0 sets 2 over the
    /// config's num_nextn_predict_layers 1); 1 = one pass per module. Compute and activations
    /// scale with it, parameters do not.
    int64_t mtp_repeats = 1;
    SoftwareStack stack;        // what the job trains with (stacks/*.toml); default: megatron-2021
    double train_tokens = 0.0;  // tokens of the whole run ([job] train_tokens); 0 = not given
    /// Memory kept free on top of the profile's reserved memory: a plan fits only when its peak
    /// stage plus this stays within usable memory. 0 in the library; the CLI's --memory-headroom
    /// defaults to 5% of the GPU's memory (api/inputs.hpp JobOptions::memory_headroom).
    Bytes memory_headroom;
    /// MoE token-drop capacity factor (Megatron --moe-expert-capacity-factor): an expert takes at
    /// most this many times the average tokens; 0 = none (dropless, Megatron's default).
    double moe_capacity = 0.0;
    /// Pad every expert's tokens up to the capacity (Megatron --moe-pad-expert-input-to-capacity,
    /// needs moe_capacity): static shapes, so the dispatcher needs no host wait for the split
    /// sizes; every expert computes and moves capacity x the average tokens.
    bool moe_pad = false;
    /// Tokens of the busiest expert over the average (>= 1); 1 = the forced balance of the
    /// published benchmarks (Megatron --moe-router-force-load-balancing).
    double moe_imbalance = 1.0;
    /// Group-limited routing (Megatron --moe-router-num-groups / --moe-router-group-topk;
    /// DeepSeek-V3's n_group 8 / topk_group 4, "each token sent to at most 4 nodes",
    /// arXiv:2412.19437 Sec. 2.1.2): the experts in groups, a token's experts drawn from its best
    /// group_topk groups. 0 = not limited.
    int64_t moe_router_groups = 0;
    int64_t moe_router_group_topk = 0;
    /// Fine-tuning: Peft::lora freezes the base weights and trains adapters of rank lora_dim on
    /// the lora_targets linears, scaled by lora_alpha / lora_dim (Megatron-Bridge peft/lora.py
    /// LoRA dim 32, alpha 32, target_modules linear_qkv, linear_proj, linear_fc1, linear_fc2
    /// @067f987d); Peft::dora the same adapters and a trained magnitude per output row, the
    /// output rescaled by magnitude / ||W + B A|| (peft/dora.py, dora_layers.py: alpha 64).
    Peft peft = Peft::none;
    /// CUDA graphs: the launch gaps inside the captured scope are not paid (costmodel/launches.hpp).
    CudaGraphImpl cuda_graph_impl = CudaGraphImpl::none;
    uint8_t cuda_graph_scope = 0;
    int64_t lora_dim = 32;
    double lora_alpha = 32.0;
    uint8_t lora_targets = lora_target::all;
    /// Packed sequences (SFT; Megatron-Bridge offline packing, dataset.offline_packing_specs
    /// @067f987d; Megatron-LM --sft): each sequence of seq_len tokens is a pack of samples of
    /// mean packed_mean_len tokens (standard deviation packed_len_std) and attention runs over
    /// each sample alone (THD layout, cu_seqlens). 0 = not packed (costmodel/packing.hpp).
    double packed_mean_len = 0.0;
    double packed_len_std = 0.0;

    bool operator==(const JobSpec&) const = default;
};

/// Bytes per parameter of model states with no sharding: weights + grads + master + optimizer
/// moments. Mixed-precision Adam with 2-byte grads: 2 + 2 + 4 + 4 + 4 = 16 (Rajbhandari et al.
/// 2020, ZeRO, Sec. 3.1); with fp32 main grads 18.
[[nodiscard]] double model_state_bytes_per_param(const JobSpec& job);

/// Adam keeps two moments, SGD (with momentum) and Muon one (Muon's scalar parameters: Adam's).
[[nodiscard]] int optimizer_moments(Optimizer o);

/// Bytes per parameter the optimizer keeps: the master copy (master_dtype, when the weights are
/// 16-bit or narrower) + m in optimizer_states + (Adam) v in optimizer_states_sq. Mixed-precision
/// Adam: 4 + 4 + 4 = 12; Megatron's precision-aware optimizer with bf16 moments: 4 + 2 + 2 = 8,
/// with fp16 main params too 2 + 2 + 2 = 6; Apex DistributedFusedAdam dtype=bf16: 2 + 2 + 2.
/// Muon: the master copy + its momentum buffer (optimizer_states): 4 + 4 = 8 for the 2-D
/// weights; scalar_optimizer_state_bytes() for the rest.
[[nodiscard]] double optimizer_state_bytes(const JobSpec& job);

/// Bytes per parameter the optimizer keeps for the parameters Muon leaves to its scalar
/// optimizer (embedding, output layer, norms, biases: Adam, 12 in mixed precision); under Adam
/// or SGD the same as optimizer_state_bytes().
[[nodiscard]] double scalar_optimizer_state_bytes(const JobSpec& job);

[[nodiscard]] const char* to_string(Optimizer o);   // "adam", "sgd", "muon"
[[nodiscard]] const char* to_string(Peft p);
[[nodiscard]] const char* to_string(CudaGraphImpl i);
/// "none" / "local" / "transformer_engine"; nullopt for another name.
[[nodiscard]] std::optional<CudaGraphImpl> cuda_graph_impl_of(std::string_view name);
/// A comma list of Megatron-Core's cuda_graph_scope names (full = every layer part); throws
/// ConfigError naming `flag` and the unknown name.
[[nodiscard]] uint8_t parse_cuda_graph_scope(const std::string& list, const std::string& flag);
/// One scope name's bits; nullopt for a name that is none.
[[nodiscard]] std::optional<uint8_t> cuda_graph_scope_of(std::string_view name);
/// The scope bits as Megatron-Core names them (full for every layer part, or the list).
[[nodiscard]] std::string cuda_graph_scope_string(uint8_t bits);        // "none", "lora"
/// "linear_qkv,linear_proj,..." in Bridge's order, from lora_target bits.
[[nodiscard]] std::string lora_targets_string(uint8_t targets);
/// lora_target bits of a comma list of Bridge names; throws ConfigError naming
/// --lora-target-modules on an unknown or empty one.
[[nodiscard]] uint8_t parse_lora_targets(const std::string& list);
[[nodiscard]] const char* to_string(MuonTpMode m);  // "blockwise", "duplicated", "distributed"

}  // namespace cleave
