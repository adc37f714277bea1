#pragma once
// torchao Float8 training as torchtitan runs it (--dtype fp8 under a stack with [[float8.release]]
// rows): the recipe and the FSDP keys by release, what each recipe keeps for backward, what the
// FSDP all-gather moves, and the cast kernels. Sources: torchtitan (TT) and torchao (AO) at the
// commits the stack's rows cite; AO torchao/float8/float8_linear.py and config.py @36027d82d.

#include "core/cluster.hpp"
#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "core/units.hpp"

namespace cleave {

/// The job's torchao Float8 as it runs: `active` when job.compute is fp8 and the stack has
/// [[float8.release]] rows; each setting the job's (JobSpec::float8) or else the default of the
/// release row in force (float8_release()).
struct Float8Run {
    bool active = false;
    Float8Recipe recipe = Float8Recipe::tensorwise;
    bool fsdp_all_gather = false;         // float8.enable_fsdp_float8_all_gather
    bool precompute_scale = false;        // float8.precompute_float8_dynamic_scale_for_fsdp
    bool force_recompute_weight = false;  // float8.force_recompute_fp8_weight_in_bwd
    bool saves_float8_input = false;      // Float8Release::saves_float8_input, tensorwise
    bool saves_float8_weight = false;     // Float8Release::saves_float8_weight, tensorwise

    bool operator==(const Float8Run&) const = default;
};

/// The stack's [[float8.release]] row in force for its release: the latest not after
/// s.release; the newest when s.release is "" (the stack's own torchtitan); the oldest for a
/// release before all of them. nullptr when the stack has none.
[[nodiscard]] const Float8Release* float8_release(const SoftwareStack& s);

/// float8_run() for a job that may be one (fp8 under a stack with release rows).
[[nodiscard]] Float8Run float8_run_of_release(const JobSpec& job);

/// Inline for the planner's hot path: most jobs are no torchao Float8 job, and an inactive
/// Float8Run built in place costs nothing (a call returning the struct through memory cost 8 %
/// of the 16,384-GPU DeepSeek plan, perf: store-forwarding stalls on its bytes).
[[nodiscard]] inline Float8Run float8_run(const JobSpec& job) {
    if (job.compute != Dtype::fp8 || job.stack.float8_releases.empty()) {
        return {};
    }
    return float8_run_of_release(job);
}

/// "" when the job's Float8 settings are ones its release accepts, else why not (the recipe not
/// among the release's recipes; the float8 all-gather or precompute with a recipe other than
/// tensorwise, AO config.py __post_init__ "enable_fsdp_float8_all_gather only supports
/// tensorwise scaling granularity"; precompute without the all-gather; force_recompute where the
/// release has no such key).
[[nodiscard]] std::string float8_settings_error(const JobSpec& job);

/// Bytes per element of a Linear's input kept for its weight gradient: 1 where the release's
/// tensorwise matmul saves its float8 input (AO eab345c manual_float8_matmul_with_args_in_float8
/// save_for_backward(input_fp8, weight_fp8_t)), else the activation's bytes (AO >= 12396c648
/// passes the bf16 input to matmul_with_hp_or_float8_args: save_for_backward(input_hp, ...)).
[[nodiscard]] double float8_saved_input_bytes(const JobSpec& job);

/// Bytes per weight element a converted Linear keeps for backward beyond a bf16 Linear: 1 (the
/// unsharded float8 weight_fp8_t, cast before the matmul: AO eab345c .. c6de9b42a^
/// Float8Linear.forward) where the release saves it, unless it is recast in backward
/// (force_recompute_fp8_weight_in_bwd: torch.utils.checkpoint around the cast, until AO
/// 03c850afa) or is the float8 all-gather's own unsharded parameter, which FSDP frees after use;
/// else 0 (from AO c6de9b42a, 2025-07-24, the bf16 weight goes in: FSDP's unsharded parameter).
/// Kept only without activation checkpointing (a checkpointed block keeps none).
[[nodiscard]] double float8_saved_weight_bytes_per_param(const JobSpec& job);

/// Bytes per converted weight element the FSDP all-gather moves and the unsharded block holds:
/// 1 under the float8 all-gather (AO fsdp_utils.py WeightWithDynamicFloat8CastTensor
/// fsdp_pre_all_gather casts the shard to float8 before the gather; its per-tensor scale, 4 B,
/// is not counted), else the weights' bytes (bf16: 2).
[[nodiscard]] double float8_gather_bytes_per_param(const JobSpec& job);

/// The converted Linears' parameters of `layers` dense layers on one GPU after TP: attention and
/// MLP weights (torchtitan converts every nn.Linear but the output layer: TT float8.py @9dec370
/// module_filter_fn fqn != "output"; the embedding is no Linear), / t. Llama 3 8B, one layer,
/// t = 1: 4096 x (4096 + 2 x 1024 + 4096) + 3 x 4096 x 14336 = 218,103,808.
[[nodiscard]] double float8_linear_params(const ModelSpec& m, const Plan& p, double layers);

/// HBM bytes the casts of one activation element move, over forward and backward, per recipe
/// (AO config.py recipes): tensorwise reads the bf16 tensor for its amax and again to cast,
/// writing a float8 copy per layout the GEMMs take (2 on Hopper, whose FP8 GEMMs take one
/// layout: the transposed copy for the weight gradient; 1 on Blackwell): 2 + 2 + 2 x 1 = 6;
/// rowwise casts along each axis with the row's amax in the same pass (two copies, one per
/// GEMM, each read 2 + write 1): 6; rowwise_with_gw_hp casts once (the weight gradient in bf16
/// needs no cast): 3. The fp32 row scales (4 B per row of K >= 1,024) are not counted.
/// 0 when !float8_run(job).active.
[[nodiscard]] double float8_cast_bytes_per_element(const GpuSpec& gpu, const JobSpec& job);

/// Cast kernels per quantised operand per pass: tensorwise 1 (inductor fuses the amax and the
/// cast of both layouts: the count Transformer Engine's per-tensor recipe is priced at), rowwise
/// 2 (one per scaling axis), rowwise_with_gw_hp 1.
[[nodiscard]] double float8_casts_per_operand(const JobSpec& job);

/// HBM bytes of casting `params` converted weights for one micro-batch (torchao keeps no float8
/// weight between micro-batches): the forward's cast and the backward's recast, cast bytes per
/// element each (float8_cast_bytes_per_element); under the float8 all-gather each gather casts
/// only the local shard (params / shards); where the release saves the forward's float8 weight
/// (float8_saved_weight_bytes_per_param > 0) only the forward's. Llama 3 8B layer (218,103,808), tensorwise on
/// Hopper, no all-gather: 2 x 6 x 218,103,808 = 2,617,245,696 B.
[[nodiscard]] Bytes
float8_weight_cast_bytes(const GpuSpec& gpu, const JobSpec& job, double params, double shards);

}  // namespace cleave
