#pragma once
// LoRA and DoRA fine-tuning's costs: a frozen base (weights only) and low-rank adapters with
// their own grads, optimizer states, activations and thin GEMMs; DoRA's magnitudes, its weight
// norm rebuilt every forward and its rescaled output (Megatron-Bridge peft/, @067f987d).

#include "core/cluster.hpp"
#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "core/units.hpp"
#include "costmodel/collectives.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/flops.hpp"
#include "costmodel/memory.hpp"

namespace cleave {

/// One adapted linear of one layer on one GPU: A (in x dim) and B (dim x out) as GEMMs over the
/// layer's tokens. Megatron-Bridge peft/utils.py ParallelLinearAdapter @067f987d: a column-
/// parallel base (linear_qkv, linear_fc1) gets A as a ColumnParallelLinear (dim split by t,
/// output gathered) and B column-parallel (out / t); a row-parallel base (linear_proj,
/// linear_fc2) gets A row-parallel (in / t, its T x dim output all-reduced) and B column-
/// parallel (out / t, gathered). So every adapter holds dim (in + out) / t parameters a GPU.
struct LoraAdapterGemms {
    GemmShape a;          // tokens x in -> dim (column: dim / t; row: in / t)
    GemmShape b;          // tokens x dim -> out / t
    bool column = false;  // adapts a column-parallel base linear (its input is the norm's output)
};

/// The job's adapters of one dense transformer layer on one GPU (job.lora_targets in Bridge's
/// order; count 0 for a linear not adapted). Empty (all zero) unless job.peft is lora.
struct LoraLayerGemms {
    LoraAdapterGemms linear[4];  // linear_qkv, linear_proj, linear_fc1, linear_fc2
};

[[nodiscard]] LoraLayerGemms
lora_layer_gemms(const ModelSpec& m, const JobSpec& job, const Plan& p);

/// DoRA: the base output of an adapted linear as this GPU holds it, which the magnitude scale
/// multiplies (and keeps for its gradient): tokens x out / t for a column base; tokens x out for
/// a row base, over the sequence shard (tokens / t) under SP.
[[nodiscard]] double dora_output_elements(const LoraAdapterGemms& a, const Plan& p);

/// DoRA: the base weight on this GPU, in x out / t: what _get_weight_norm rebuilds as W + s B A
/// every forward (dora_layers.py @067f987d).
[[nodiscard]] double dora_weight_elements(const LoraAdapterGemms& a, const Plan& p);

/// LoRA parameters of one layer, whole (before TP): dim x (in + out) per adapted linear (Hu et
/// al. 2021, arXiv:2106.09685 Sec. 4: W0 + B A with B in R^{d x r}, A in R^{r x k}). Llama 2 70B
/// (h 8192, 64 heads, 8 KV heads of 128, f 28672 gated) with dim 16 on qkv and proj:
/// 16 (8192 + 10240) + 16 (8192 + 8192) = 557,056; DoRA adds a magnitude per output row,
/// 10240 + 8192: 575,488. 0 when job.peft is none.
[[nodiscard]] double lora_params_per_layer(const ModelSpec& m, const JobSpec& job);

/// Model states of a LoRA stage on one GPU: `frozen` base parameters keep only their weights in
/// the job's weight dtype (requires_grad False: no grad, no main param, no optimizer state, so
/// the distributed optimizer shards nothing of them; ZeRO 3 still shards the weights over
/// `shard`), and `adapters` parameters keep full mixed-precision states as model_states() says.
/// Llama 2 70B on 8 GPUs, tp 8: 68.98e9 / 8 frozen x 2 B + 44.56e6 / 8 adapters x 18 B.
[[nodiscard]] StateBytes
lora_model_states(const JobSpec& job, double frozen, double adapters, int zero, int64_t shard);

/// Activation bytes the adapters of one layer add for one micro-batch on one GPU: each keeps
/// A's output (tokens x dim, B's weight-gradient input; full dim on every rank: gathered for a
/// column adapter, all-reduced for a row one), and a column adapter its whole 16-bit input,
/// tokens x h (gathered under SP: Bridge sets return_layernorm_output_gathered, peft/utils.py
/// get_adapter_attributes_from_linear @067f987d), A's weight-gradient input: the frozen base
/// linear keeps none of it (activation_per_layer: TE saves a GEMM input only for a weight that
/// requires grad). A row adapter's input is the attention output the attention core keeps
/// anyway. DoRA: and the scaled sum (base + adapter output, dora_output_elements) its product
/// keeps for the magnitude's gradient. 0 under full recompute (inside the checkpoint).
[[nodiscard]] Bytes
lora_activation_per_layer(const ModelSpec& m, const JobSpec& job, const Plan& p, Recompute r);

/// Time of one adapter GEMM pass: a thin GEMM (dim 8-64) streams its wide operand, so it runs
/// at the slower of the GEMM curve at its FLOPs and its HBM bytes (gemm_pass_bytes) at the
/// element-wise class's bandwidth, and never below one launch (the profile's kernel_floor).
[[nodiscard]] Seconds
lora_gemm_time(const GpuSpec& gpu, Dtype dt, const GemmShape& g, GemmPass pass);

/// The adapters of one layer, one micro-batch, one GPU: forward A and B GEMMs, the scale by
/// alpha / dim and the add to the base output (5 x out elements moved); backward both GEMMs'
/// dgrad and wgrad, the scale's backward (2 x out) and the sum of the two input gradients
/// (3 x in), each element-wise pass one launch. With t > 1 the adapters' own TP collectives,
/// plain Megatron-Core mappings on the compute stream, so exposed (ParallelLinearAdapter.forward,
/// peft/utils.py @067f987d; S = T x h, s = T x dim, 16-bit):
/// - row adapter (linear_proj, linear_fc2): A's output all-reduced (s) forward; B's output
///   gathered (gather_output, S) forward; under SP scattered back to the sequence shard, whose
///   backward all-gathers S; B's input gradient all-reduced (s) backward.
/// - column adapter (linear_qkv, linear_fc1): A's output gathered (s) forward, B's input gradient
///   all-reduced (s) backward; under SP the input comes gathered from Transformer Engine's norm
///   (return_layernorm_output_gathered) unless userbuffers overlap the norm's all-gather
///   (the stack's tp_comm_overlap), when the adapter gathers S forward and reduce-scatters it
///   backward; without SP A's input gradient is all-reduced (S) backward.
/// DoRA (DoRALinear.forward, dora_layers.py @067f987d) adds per adapted linear: W + s B A
/// rebuilt for its row norms every forward (7 x 16-bit passes a weight element: B A written,
/// scaled, added to W, read by the norm; 4 launches; detached, no backward), the split factor
/// all-gathered before it (A of a column base, B of a row one), and the output times
/// magnitude / norm: 2 passes an output element forward, 5 backward (the input's gradient, the
/// magnitude's product and token sum).
struct LoraTimes {
    Seconds fwd_gemm;
    Seconds bwd_gemm;
    Seconds fwd_memory;
    Seconds bwd_memory;
    Seconds tp_fwd;
    Seconds tp_bwd;
    Bytes tp_bytes;  // sent per GPU, forward + backward
};

[[nodiscard]] LoraTimes lora_layer_times(const ModelSpec& m,
                                         const GpuSpec& gpu,
                                         const JobSpec& job,
                                         const Plan& p,
                                         const PlanLinks& links);

}  // namespace cleave
