#pragma once
// Low-precision training through Transformer Engine (FP8 with a delayed, per-tensor current or
// blockwise scaling recipe; MXFP8; NVFP4): which GEMMs run quantised, the dtype a GPU actually
// runs them in, what quantising their operands costs in HBM traffic, and the quantised weight
// copies kept between micro-batches.

#include "core/cluster.hpp"
#include "core/job.hpp"
#include "core/units.hpp"
#include "costmodel/flops.hpp"

#include <optional>
#include <string_view>

namespace cleave {

/// true for fp8, mxfp8 and nvfp4: the linear layers' GEMMs run quantised.
[[nodiscard]] bool is_quantised(Dtype d);

/// The dtype of the GEMMs that stay 16-bit under quantised training (attention core, MoE router,
/// output layer): bf16 when `compute` is quantised, else `compute` itself.
[[nodiscard]] Dtype unquantised(Dtype compute);

/// The dtype `gpu` runs a GEMM of `d` in: `d` when the profile has a peak for it, else the next
/// wider one it has (nvfp4 -> mxfp8 -> fp8 -> bf16): e.g. fp8 on an A100 runs at bf16.
[[nodiscard]] Dtype runnable_dtype(const GpuSpec& gpu, Dtype d);

/// true when `gpu` runs FP8 GEMMs in every operand layout, so a per-tensor-scaled FP8 tensor
/// serves both its row-wise and column-wise uses without a transposed copy (Blackwell; Hopper
/// needs the transpose). Taken as: the profile has an MXFP8 path, which only Blackwell has
/// (Transformer Engine docs/features/low_precision_training/fp8_current_scaling @d0067d0d).
[[nodiscard]] bool native_fp8_layouts(const GpuSpec& gpu);

/// HBM bytes moved to quantise one 16-bit element for the GEMMs that use it: read 2 B, plus a
/// second read of 2 B where the scale needs the whole tensor's amax first (per-tensor current
/// scaling, NVFP4's global scale), plus each copy written (row-wise and column-wise: 2, or 1 for
/// per-tensor FP8 on native layouts) at its element size and block-scale share. 0 when
/// job.compute is not quantised.
[[nodiscard]] double quantise_bytes_per_element(const GpuSpec& gpu, const JobSpec& job);

/// Bytes per parameter of the quantised weight copies Transformer Engine keeps between
/// micro-batches (row-wise + column-wise, as for an activation); with quantised primary weights
/// (job.weights fp8, Megatron --fp8-param-gather) the row-wise copy is the weight itself. 0 when
/// job.compute is not quantised.
[[nodiscard]] double weight_copy_bytes_per_param(const GpuSpec& gpu, const JobSpec& job);

/// Memory-bound bytes of quantising the operands of one layer's linear GEMMs for one
/// micro-batch: forward the input of each (m x k per GEMM), backward the output gradient of each
/// (m x n per GEMM). The attention core and the router stay 16-bit and quantise nothing.
struct QuantiseBytes {
    Bytes fwd;
    Bytes bwd;
    double tensors = 0.0;  // casts per pass: one per quantised GEMM (each expert group one)

    bool operator==(const QuantiseBytes&) const = default;
};

[[nodiscard]] QuantiseBytes
layer_quantise_bytes(const GpuSpec& gpu, const JobSpec& job, const LayerGemms& g);

/// Bytes per element of a tensor-parallel all-gather of a column-parallel layer's input: the
/// quantised element plus its block-scale share when job.compute is quantised (Transformer Engine
/// gathers the quantised norm output: transformer_engine/pytorch/module/layernorm_linear.py
/// @d0067d0d, gather_along_first_dim(ln_out, tp_group, quantizer=...)), else `unquantised`.
[[nodiscard]] double gathered_bytes_per_element(const JobSpec& job, double unquantised);

/// true when a quantised tensor needs the whole tensor's amax for its scale (per-tensor current
/// scaling, NVFP4's global scale), so a gathered one waits for an amax all-reduce first (TE
/// fp8_current_scaling and nvfp4 docs @d0067d0d, "Amax reduction").
[[nodiscard]] bool per_tensor_amax(const JobSpec& job);

/// The precision a published run's label names ("BF16 mixed", "FP8 per-tensor current scaling
/// (FP8-CS) + BF16", "MXFP8 (FP8-MX, block-scaled) + BF16", "FP8 delayed", "NVFP4", "fp16", ...:
/// public_runs*.csv's precision column), case-insensitive; nullopt when none is named.
struct PrecisionChoice {
    Dtype compute = Dtype::bf16;
    Fp8Recipe fp8_recipe = Fp8Recipe::delayed;

    bool operator==(const PrecisionChoice&) const = default;
};

[[nodiscard]] std::optional<PrecisionChoice> precision_of_label(std::string_view label);

/// Memory-bound bytes of quantising `params` weights once per optimizer step (Transformer Engine
/// caches them over the micro-batches of a step: Megatron passes is_first_microbatch).
[[nodiscard]] Bytes weight_quantise_bytes(const GpuSpec& gpu, const JobSpec& job, double params);

}  // namespace cleave
