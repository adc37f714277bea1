#pragma once
// A layer's kernel launches on its compute stream and the GPU's gap between two of them: eager
// execution pays GpuSpec::launch_gap for each; CUDA graphs (Megatron-Core --cuda-graph-impl /
// --cuda-graph-scope) replay their scope without it. The gap is measured on DeepSeek's H800 trace
// (cleave trace: 907 kernels on its main compute stream, 903 gaps of at most 10 us summing to
// 1.80 ms, 2.0 us a launch); graphs' own in-graph gaps are taken as none (no measurement in
// ../shared: an upper bound of what capture saves). Host time (the CPU's Python and launch calls)
// is not priced: cleave trace reports it (host waits, us a launch by phase).

#include "core/cluster.hpp"
#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "core/units.hpp"

namespace cleave {

/// Launches of one layer, one micro-batch, one GPU, by block and pass: GEMMs (TE's fused QKV,
/// projection, FC1, FC2, each pass's dgrad and wgrad; torchtitan's separate q, k, v and w1, w3;
/// MLA's down / up projections; MoE's router, shared expert and routed experts, one grouped
/// kernel or one a local expert), the attention core (one a CP ring step and pass), each cast of
/// a quantised GEMM operand, the memory-bound kernels layer_traffic counts, and LoRA's adapters
/// (two GEMMs and two element-wise passes forward, four and two backward).
struct LayerLaunches {
    double attn_fwd = 0.0;    // the attention block (its norm, residual add, RoPE included)
    double attn_bwd = 0.0;
    double ffn_fwd = 0.0;     // the MLP / MoE block
    double ffn_bwd = 0.0;
    double router_fwd = 0.0;  // of ffn in an MoE layer: the router (GEMM, softmax, top-k) and
    double router_bwd = 0.0;  // the permutation's preprocessing, Megatron's moe_router /
                              // moe_preprocess graph scopes
};

struct LaunchInputs {
    double memory_fwd = 0.0;    // memory-bound launches of the layer (layer_traffic), forward
    double memory_bwd = 0.0;
    double casts = 0.0;         // quantised GEMM operands cast, each pass
    double local_experts = 0.0; // MoE: this GPU's routed experts
    bool batched_experts = false;  // the routed experts' GEMMs as one grouped kernel
};

[[nodiscard]] LayerLaunches layer_launches(const ModelSpec& m,
                                           const JobSpec& job,
                                           const Plan& p,
                                           bool moe,
                                           bool has_attn,
                                           bool has_ffn,
                                           const LaunchInputs& in);

/// The launches of `l` no CUDA graph of the job captures, forward or backward: all of them
/// eager; none under full_iteration; else what the scope bits leave (attn: the attention block;
/// mlp: a dense layer's FFN block; moe: an MoE layer's; moe_router / moe_preprocess: its router
/// part).
[[nodiscard]] double uncaptured_launches(const JobSpec& job, const LayerLaunches& l, bool moe, bool fwd);

/// uncaptured_launches x the GPU's launch gap.
[[nodiscard]] Seconds launch_gap_time(const GpuSpec& gpu, const JobSpec& job, const LayerLaunches& l,
                                      bool moe, bool fwd);

}  // namespace cleave
