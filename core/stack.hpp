#pragma once
// The software stack a job trains with, as data (stacks/*.toml): which attention kernel runs,
// what the framework overlaps, which fused kernels it uses, and the flags an export must carry.
// The cost model reads it from JobSpec::stack; a default-constructed SoftwareStack prices the way
// cleave priced before stacks existed (Megatron-LM as the 2020-2022 public A100 runs ran it).

#include "core/cluster.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace cleave {

/// The framework a stack's exports are written for.
enum class StackFramework : uint8_t { megatron, deepspeed, torchtitan, llm_foundry };

/// "megatron", "deepspeed", "torchtitan", "llm-foundry".
[[nodiscard]] const char* to_string(StackFramework f);

/// Whose model code runs the layers: the framework's own (Megatron-Core / Transformer Engine
/// fused kernels; torchtitan's model code, priced by its framework), or Hugging Face
/// transformers' modeling code (RMSNorm, RoPE and SwiGLU as separate PyTorch ops,
/// costmodel/eager.hpp), as HF accelerate / Trainer jobs over DeepSpeed run it.
enum class ModelCode : uint8_t { framework, hf_transformers };

/// "framework", "hf-transformers".
[[nodiscard]] const char* to_string(ModelCode c);

/// How the attention core runs: materialised (Q K^T, softmax, dropout and the product with V as
/// separate kernels, the s x s scores in HBM) or fused (FlashAttention / cuDNN fused SDPA: the
/// scores stay on chip, only the per-row softmax statistics are kept for backward).
enum class AttentionImpl : uint8_t { materialized, fused };

[[nodiscard]] const char* to_string(AttentionImpl a);

/// A fused attention kernel's measured speed on one GPU family at one head dimension, as a
/// fraction of the GPU's dense 16-bit peak, against the sequence length of one call (keys per
/// query block: a CP ring step sees s / cp). FLOPs counted as the kernel papers count them:
/// forward 4 s^2 d per head (halved when causal), backward 2.5 x forward.
struct AttentionCurve {
    std::string gpu;          // matched case-insensitively as a substring of GpuSpec::name
    double head_dim = 0.0;    // the curve of the nearest head dim (log distance) is used
    std::vector<double> seq;  // sequence lengths, increasing
    std::vector<double> fwd;  // forward efficiency at each length, in (0, 1]
    std::vector<double> bwd;  // backward efficiency at each length, in (0, 1]

    bool operator==(const AttentionCurve&) const = default;
};

/// How an MoE layer moves its routed tokens to the experts (Megatron-Core
/// --moe-token-dispatcher-type, megatron/core/transformer/moe/token_dispatcher.py @d98e8a64):
/// alltoall (MoEAlltoAllTokenDispatcher: one all-to-all over the EP group, each token copy to
/// its expert's rank), allgather (MoEAllGatherTokenDispatcher: every token all-gathered over the
/// EP x ETP group, outputs reduce-scattered back), deepep (flex dispatcher with DeepEP /
/// HybridEP: a token bound for several experts on one remote NVLink domain crosses the network
/// once and fans out over NVLink there).
enum class MoeDispatcher : uint8_t { alltoall, allgather, deepep };

[[nodiscard]] const char* to_string(MoeDispatcher d);

/// True for a release written YY.MM (two digits, a dot, two digits: "25.11").
[[nodiscard]] bool valid_release(const std::string& r);

/// Transformer Engine userbuffers overlap methods (transformer_engine/pytorch/module/base.py
/// initialize_ub): split the GEMM into chunks pipelined with a reduce-scatter on num_sm SMs, or
/// into tp chunks passed around the ring by the copy engines.
enum class UbMethod : uint8_t { pipeline, ring_exchange };
[[nodiscard]] const char* to_string(UbMethod m);

/// How the stack computes the cross-entropy loss over the output layer's logits
/// (costmodel/loss.hpp prices each): unset = the older keys (fused_cross_entropy, loss_buffers);
/// Megatron's unfused VocabParallelCrossEntropy, its native fusion (--cross-entropy-loss-fusion
/// --cross-entropy-fusion-impl native) and Transformer Engine's (... te); torch's
/// F.cross_entropy(logits.float()) eager or under torch.compile (torchtitan).
enum class LossImpl : uint8_t {
    unset,
    megatron_unfused,
    megatron_native,
    te,
    torch_eager,
    torch_compiled
};

/// "unset", "unfused", "native", "te", "eager", "compiled".
[[nodiscard]] const char* to_string(LossImpl l);

/// torchao Float8 training recipes (pytorch/ao torchao/float8/config.py Float8LinearRecipeName
/// @36027d82d): tensorwise (one dynamic scale per tensor, cuBLAS), rowwise (a scale per row of
/// every operand, e4m3 throughout), rowwise_with_gw_hp (rowwise, the weight gradient in bf16).
enum class Float8Recipe : uint8_t { tensorwise, rowwise, rowwise_with_gw_hp };

/// "tensorwise", "rowwise", "rowwise_with_gw_hp" (torchtitan float8.recipe_name).
[[nodiscard]] const char* to_string(Float8Recipe r);

/// What torchtitan's Float8 converter (torchao) does and defaults to from one release on
/// ([[float8.release]] of a torchtitan stack; costmodel/float8.hpp prices it).
struct Float8Release {
    std::string release;                // YY.MM from which the row holds
    std::string commit;                 // the torchtitan commit the row was read at
    std::vector<Float8Recipe> recipes;  // the recipes the release accepts, its default first
    bool fsdp_all_gather = false;       // enable_fsdp_float8_all_gather default (tensorwise only)
    bool precompute_scale = false;      // precompute_float8_dynamic_scale_for_fsdp default
    bool force_recompute_key = false;   // the release has force_recompute_fp8_weight_in_bwd
    /// torchao's tensorwise path saves for backward the float8 input (1 B per element; false:
    /// the bf16 input) and the float8 weight it cast (1 B per weight, unsharded; false: the
    /// high-precision weight, FSDP's unsharded parameter).
    bool saves_float8_input = false;
    bool saves_float8_weight = false;

    bool operator==(const Float8Release&) const = default;
};

struct SoftwareStack {
    std::string name = "megatron-2021";
    std::string display_name;
    std::string source;  // the file it was read from ("" = built in)
    StackFramework framework = StackFramework::megatron;
    ModelCode model_code = ModelCode::framework;  // [stack] model_code
    int64_t year = 2021;
    /// The software release the stack's values stand for, as NVIDIA numbers its containers
    /// ("25.11", "26.04" = NeMo container YY.MM; Megatron-Bridge 0.2 / 0.4); "" = not stated.
    /// Releases compare as text (YY.MM). What a release changes that cleave prices is data in the
    /// calibration overlays (hwprofiles/calibration/, [[moe.from_release]]); --release sets it.
    std::string release;
    /// The releases the stack has data for (its own and the calibration overlays' fits), oldest
    /// first; a job's release outside them is priced as the nearest earlier one, with a caution.
    std::vector<std::string> known_releases;

    // Attention.
    AttentionImpl attention = AttentionImpl::materialized;
    bool causal_skip = false;  // the kernel skips fully masked blocks (half the FLOPs, causal)
    std::vector<AttentionCurve> attention_curves;  // fused only; none = the GEMM curve
    double attention_step_overhead_us = 0.0;       // per kernel call (a CP ring step, fwd or bwd)

    // Fused kernels and recipe defaults that change memory.
    bool hidden_dropout = true;        // dropout masks stored after attention and MLP
    bool fused_cross_entropy = false;  // no fp32 copy of the logits (TE / Triton fused CE)
    Dtype grad_dtype = Dtype::fp32;  // main-grad buffer the recipe keeps (CLI default for JobSpec)
    /// Buffers of the size of one micro-batch's 16-bit logits (T V / t x 2 B) live at the loss's
    /// peak; 0 = from fused_cross_entropy (1 fused, 3 unfused: the logits + their fp32 copy).
    /// Eager F.cross_entropy(logits.float()) peaks in log_softmax's backward at 6 (memory.hpp).
    double loss_buffers = 0.0;
    /// The same with tensor parallelism, where the stack computes the loss on vocab-sharded
    /// logits (torch loss_parallel); 0 = loss_buffers.
    double loss_parallel_buffers = 0.0;
    /// The loss as the stack computes it ([memory] loss); unset = the two keys above.
    LossImpl loss = LossImpl::unset;
    /// torchtitan's ChunkedLossWrapper num_chunks: the output layer and the loss run on 1/N of
    /// the tokens at a time, each chunk's backward right after its forward; 1 = unchunked.
    int64_t loss_chunks = 1;
    /// What `selective` recomputation means: Megatron's module list (keep the GEMM inputs, drop
    /// the attention scores), or torchtitan's op-level policy (every layer checkpointed, the
    /// outputs of every other matmul and of attention saved; memory.hpp).
    bool op_level_sac = false;
    /// Peak bytes the caching allocator reserves over those it hands out, as a fraction of the
    /// allocated peak (max_memory_reserved / max_memory_allocated - 1): 0.11, the figure every
    /// shipped stack carries with its source (stacks/*.toml).
    double allocator_overhead = 0.11;
    /// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: before it reports OOM the allocator
    /// unmaps every free page of its segments (c10/cuda/CUDACachingAllocator.cpp release_blocks
    /// -> unmap_block), so what a run needs is the allocated peak plus the pages free blocks
    /// only partly cover, not the reserve it keeps when memory is ample (allocator_overhead).
    bool expandable_segments = false;
    /// That residue as a fraction of the allocated peak (a guess; see stacks/*.toml).
    double expandable_residue = 0.02;
    /// What the default allocator cannot give back before it reports OOM, as a fraction of the
    /// allocated peak: when cudaMalloc fails it frees every cached segment that holds no live
    /// block and retries (c10/cuda/CUDACachingAllocator.cpp header, "free all cached blocks that
    /// are not split and retry"), so what stays reserved at the limit is the free part of the
    /// segments that still hold a tensor, not the reserve of a run with memory to spare
    /// (allocator_overhead). 0.024, measured at an OOM (stacks/*.toml).
    double oom_residue = 0.024;

    // Data-parallel overlap.
    bool overlap_grad_reduce = true;    // DP grad reduce per bucket behind the backward
    bool overlap_param_gather = false;  // ZeRO-1/2 param all-gather per bucket behind the fwd
    double bucket_mparams = 40.0;       // DDP bucket, millions of parameters (at least)
    bool fsdp_prefetch = false;         // ZeRO-3: gathers prefetched in forward AND backward
    bool reshard_after_forward = true;  // ZeRO-3: weights re-gathered for backward
    double comm_sm_fraction = 0.0;      // share of the SMs hidden DP/FSDP traffic takes

    // Tensor-parallel overlap (Transformer Engine userbuffers; with sequence parallelism only).
    bool tp_comm_overlap = false;
    /// How the row-parallel forward GEMMs (projection, MLP out) overlap their reduce-scatter:
    /// with 16-bit GEMMs and with quantised ones (Transformer Engine userbuffers methods).
    UbMethod tp_overlap_row_fprop = UbMethod::pipeline;
    UbMethod tp_overlap_row_fprop_quantised = UbMethod::pipeline;
    /// Share of the SMs a "pipeline" communicator keeps from its GEMM for the GEMM's whole run
    /// (num_sm with set_sm_margin).
    double tp_overlap_sm_fraction = 0.0;
    /// Chunks a "pipeline" overlap splits its GEMM into (TE num_splits; ring-exchange: tp).
    int64_t tp_overlap_pipeline_splits = 1;
    /// Share of the SMs a "bulk" communicator (the column-parallel dgrad and wgrad) holds while
    /// its collective runs (num_sm without set_sm_margin).
    double tp_overlap_bulk_sm_fraction = 0.0;

    // Pipeline: per send/recv of one virtual stage (kernel launch + NCCL p2p setup).
    double p2p_overhead_us = 0.0;

    // Mixture of experts ([moe]; absent: alltoall, nothing overlapped, no host sync).
    MoeDispatcher moe_dispatcher = MoeDispatcher::alltoall;
    bool moe_a2a_overlap = false;  // EP all-to-all hidden behind the other micro-batch's compute
    bool moe_grouped_gemm = true;  // local experts as one grouped GEMM call (else a loop)
    /// The grouped GEMM's concurrent streams: Transformer Engine runs a group as one cuBLAS GEMM
    /// per expert over this many streams; 0 = one fused grouped kernel for the whole group.
    int64_t moe_grouped_gemm_streams = 0;
    double moe_sync_us = 0.0;  // per MoE layer forward: host waits for the device (D2H)
    /// SMs the DeepEP dispatcher's kernels hold while they run (Megatron --moe-deepep-num-sms);
    /// where they run beside compute, compute kernels get the rest; 0 = none held.
    int64_t moe_deepep_num_sms = 0;
    /// The router's probabilities multiply inside the experts (Megatron-Core >= 0.13: the
    /// weighted activation), so the combine keeps no expert outputs for their gradient; false:
    /// unpermute / the combine scales the expert outputs and keeps them (memory.hpp).
    bool moe_probs_in_experts = false;
    // Normalization kernels ([norm]; absent: every norm streams at the profile's norm rate).
    /// Row widths (hidden sizes) with a tuned RMSNorm / LayerNorm kernel (Transformer Engine
    /// registers tuned kernels for a list of sizes; any other runs its general kernel); empty =
    /// every width tuned.
    std::vector<double> norm_tuned_rmsnorm;
    std::vector<double> norm_tuned_layernorm;
    /// The general kernel's time over the tuned kernel's, forward and backward (1 = as fast).
    double norm_general_fwd = 1.0;
    double norm_general_bwd = 1.0;

    /// torch.compile of each transformer block (torchtitan --compile.enable; [export]
    /// torch_compile): the partitioner saves only what backward reads, so op-level SAC's dead
    /// saved outputs go (memory.hpp op_sac_saved_bytes_per_token).
    bool torch_compile = false;

    /// torchtitan's Float8 converter by release, oldest first ([[float8.release]]); empty = the
    /// stack has none (--dtype fp8 priced as Transformer Engine's, job.fp8_recipe).
    std::vector<Float8Release> float8_releases;

    // Keys that change only what an export writes.
    std::vector<std::string> recompute_modules;  // Megatron --recompute-modules for selective

    bool operator==(const SoftwareStack&) const = default;
};

/// The caution for a stack whose release (SoftwareStack::release) is not one of its
/// known_releases: which it is priced as (the nearest earlier known, else the oldest) and that
/// what differs between the two is not modelled; "" when the release is known or either is unset.
[[nodiscard]] std::string unknown_release_caution(const SoftwareStack& s);

/// Parses a stack TOML; throws ConfigError with file:line:col and key for every problem.
[[nodiscard]] SoftwareStack parse_stack_toml(std::string_view text, const std::string& source_name);

/// A stack: a path to a TOML file, or the name of a shipped one (stack_dirs()).
[[nodiscard]] SoftwareStack load_stack(const std::string& name_or_path);

/// Directories searched for shipped stacks: $CLEAVE_STACKS, the source tree's stacks/, and
/// <prefix>/share/cleave/stacks.
[[nodiscard]] std::vector<std::filesystem::path> stack_dirs();

/// Names of the shipped stacks, sorted.
[[nodiscard]] std::vector<std::string> shipped_stacks();

/// The stack the CLI prices with when none is named.
inline constexpr std::string_view default_stack_name = "megatron-core";

}  // namespace cleave
