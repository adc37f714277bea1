#include "costmodel/precision.hpp"

#include "costmodel/float8.hpp"

#include <algorithm>
#include <cctype>
#include <string>

namespace cleave {

namespace {

// Block-scale bytes per element of one quantised copy: MXFP8 one E8M0 byte per 32 elements,
// NVFP4 one E4M3 byte per 16 (Transformer Engine docs/features/low_precision_training/mxfp8,
// nvfp4 @d0067d0d); FP8 blockwise one fp32 scale per 1x128 block (its fp8_blockwise_scaling doc).
double scale_bytes_per_element(const JobSpec& job) {
    switch (job.compute) {
    case Dtype::mxfp8:
        return 1.0 / 32.0;
    case Dtype::nvfp4:
        return 1.0 / 16.0;
    case Dtype::fp8:
        return job.fp8_recipe == Fp8Recipe::blockwise ? 4.0 / 128.0 : 0.0;
    default:
        return 0.0;
    }
}

// Quantised copies of a tensor: row-wise for one GEMM, column-wise for the other. Block scales
// run along different axes in the two (MXFP8, NVFP4, blockwise FP8), and Hopper's FP8 GEMMs
// take only the TN layout, so only per-tensor FP8 on Blackwell gets by with one.
double copies(const GpuSpec& gpu, const JobSpec& job) {
    const bool per_tensor = job.compute == Dtype::fp8 && job.fp8_recipe != Fp8Recipe::blockwise;
    return per_tensor && native_fp8_layouts(gpu) ? 1.0 : 2.0;
}

// A pass over the 16-bit tensor for its amax before the cast: per-tensor current scaling
// ("reading the tensor twice", TE fp8_current_scaling doc) and NVFP4's global scale (TE nvfp4
// doc: s_global from the global amax). Delayed scaling takes amax from history, fused into the
// cast; block scales come from the block being cast.
bool amax_pass_of(const JobSpec& job) {
    return job.compute == Dtype::nvfp4 ||
           (job.compute == Dtype::fp8 && job.fp8_recipe == Fp8Recipe::tensorwise);
}

}  // namespace

bool is_quantised(Dtype d) {
    return d == Dtype::fp8 || d == Dtype::mxfp8 || d == Dtype::nvfp4;
}

// Megatron-LM d98e8a64: the output layer is tensor_parallel.ColumnParallelLinear unless the
// MXFP8 output projection is switched on (megatron/core/models/gpt/gpt_model.py), the router a
// torch GEMM, and TE's DotProductAttention runs 16-bit unless fp8_dot_product_attention is set.
Dtype unquantised(Dtype compute) {
    return is_quantised(compute) ? Dtype::bf16 : compute;
}

Dtype runnable_dtype(const GpuSpec& gpu, Dtype d) {
    for (;;) {
        if (!is_quantised(d) || peak_flops(gpu, d).value() > 0.0) {
            return d;
        }
        d = d == Dtype::nvfp4 ? Dtype::mxfp8 : d == Dtype::mxfp8 ? Dtype::fp8 : Dtype::bf16;
    }
}

bool native_fp8_layouts(const GpuSpec& gpu) {
    return gpu.peak_mxfp8.value() > 0.0;
}

double quantise_bytes_per_element(const GpuSpec& gpu, const JobSpec& job) {
    if (!is_quantised(job.compute)) {
        return 0.0;
    }
    if (float8_run(job).active) {
        return float8_cast_bytes_per_element(gpu, job);  // torchao under torchtitan
    }
    const double read = amax_pass_of(job) ? 4.0 : 2.0;
    const double copy = bytes_of(job.compute) + scale_bytes_per_element(job);
    return read + copies(gpu, job) * copy;
}

double weight_copy_bytes_per_param(const GpuSpec& gpu, const JobSpec& job) {
    if (!is_quantised(job.compute) || float8_run(job).active) {
        return 0.0;  // torchao recasts the weight at each use: no copy kept (costmodel/float8.hpp)
    }
    const double n = copies(gpu, job) - (is_quantised(job.weights) ? 1.0 : 0.0);
    return n * (bytes_of(job.compute) + scale_bytes_per_element(job));
}

double gathered_bytes_per_element(const JobSpec& job, double unquantised) {
    // torchtitan's TP gathers float8 inputs under the tensorwise recipe only (TT parallelize
    // Float8ColwiseParallel when not rowwise; float8.md @b5bcd76c6: rowwise communicates in high
    // precision).
    if (const Float8Run f = float8_run(job); f.active) {
        return f.recipe == Float8Recipe::tensorwise ? 1.0 : unquantised;
    }
    return is_quantised(job.compute) ? bytes_of(job.compute) + scale_bytes_per_element(job)
                                     : unquantised;
}

bool per_tensor_amax(const JobSpec& job) {
    if (const Float8Run f = float8_run(job); f.active) {
        return f.recipe == Float8Recipe::tensorwise;
    }
    return amax_pass_of(job);
}

QuantiseBytes layer_quantise_bytes(const GpuSpec& gpu, const JobSpec& job, const LayerGemms& g) {
    const double q = quantise_bytes_per_element(gpu, job);
    const double casts = float8_casts_per_operand(job);  // 1 but torchao's rowwise (2 axes)
    QuantiseBytes b;
    for (const GemmShape* s :
         {&g.qkv, &g.q_up, &g.kv_up, &g.proj, &g.mlp_in, &g.mlp_out, &g.shared, &g.latent_in,
          &g.latent_out}) {
        b.fwd += bytes(q * s->m * s->k * s->count);
        b.bwd += bytes(q * s->m * s->n * s->count);
        b.tensors += q > 0.0 && s->m * s->k > 0.0 ? casts : 0.0;
    }
    return b;
}

Bytes weight_quantise_bytes(const GpuSpec& gpu, const JobSpec& job, double params) {
    return bytes(quantise_bytes_per_element(gpu, job) * params);
}

namespace {

std::string lower(std::string_view s) {
    std::string o(s);
    std::transform(o.begin(), o.end(), o.begin(), [](unsigned char ch) {
        return static_cast<char>(std::tolower(ch));
    });
    return o;
}

}  // namespace

// Megatron-Bridge performance-summary labels: FP8-CS = per-tensor current scaling (Megatron
// fp8_recipe "tensorwise"), FP8-MX = MXFP8; a bare "FP8" is Megatron's default recipe, delayed.
std::optional<PrecisionChoice> precision_of_label(std::string_view label) {
    const std::string s = lower(label);
    auto has = [&](const char* w) { return s.find(w) != std::string::npos; };
    if (has("nvfp4") || has("fp4")) {
        return PrecisionChoice{Dtype::nvfp4, Fp8Recipe::delayed};
    }
    if (has("mxfp8") || has("fp8-mx")) {
        return PrecisionChoice{Dtype::mxfp8, Fp8Recipe::delayed};
    }
    if (has("fp8")) {
        const Fp8Recipe r = has("current") || has("fp8-cs") || has("tensorwise")
                                ? Fp8Recipe::tensorwise
                            : has("block") ? Fp8Recipe::blockwise
                                           : Fp8Recipe::delayed;
        return PrecisionChoice{Dtype::fp8, r};
    }
    if (has("bf16")) {
        return PrecisionChoice{Dtype::bf16, Fp8Recipe::delayed};
    }
    if (has("fp16")) {
        return PrecisionChoice{Dtype::fp16, Fp8Recipe::delayed};
    }
    if (has("fp32")) {
        return PrecisionChoice{Dtype::fp32, Fp8Recipe::delayed};
    }
    return std::nullopt;
}

}  // namespace cleave
