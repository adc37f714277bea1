#pragma once
// The training job: how many GPUs, what batch, what precision, what optimizer.

#include "core/cluster.hpp"

#include <cstdint>

namespace cleave {

enum class Optimizer { adam, sgd };

struct JobSpec {
    int64_t gpus = 0;
    int64_t global_batch = 0;     // sequences per iteration
    int64_t seq_len = 0;          // tokens per sequence
    Dtype compute = Dtype::bf16;  // GEMM / activation dtype
    Dtype weights = Dtype::bf16;  // model weights as the forward pass reads them
    Dtype grads = Dtype::fp32;    // gradient buffer (Megatron keeps fp32 main grads for bf16)
    Dtype optimizer_states = Dtype::fp32;  // Adam m and v
    bool master_weights = true;  // an fp32 copy of the weights when `weights` is 16-bit or less
    Optimizer optimizer = Optimizer::adam;
    double train_tokens = 0.0;  // tokens of the whole run ([job] train_tokens); 0 = not given
    /// Memory kept free on top of the profile's reserved memory: a plan fits only when its peak
    /// stage plus this stays within usable memory. 0 in the library; the CLI's --memory-headroom
    /// defaults to 5% of the GPU's memory (cli/common.cpp).
    Bytes memory_headroom;

    bool operator==(const JobSpec&) const = default;
};

/// Bytes per parameter of model states with no sharding: weights + grads + master + optimizer
/// moments. Mixed-precision Adam with 2-byte grads: 2 + 2 + 4 + 4 + 4 = 16 (Rajbhandari et al.
/// 2020, ZeRO, Sec. 3.1); with fp32 main grads 18.
[[nodiscard]] double model_state_bytes_per_param(const JobSpec& job);

/// Adam keeps two moments, SGD (with momentum) one.
[[nodiscard]] int optimizer_moments(Optimizer o);

}  // namespace cleave
