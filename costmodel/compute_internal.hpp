#pragma once
// Helpers the cost model's compute files share (compute.cpp, kernels.cpp, edges.cpp): inline, one
// definition, so the files can be compiled as one unity translation unit. Not a public interface.

#include "costmodel/collectives.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/precision.hpp"

namespace cleave::detail {

// Attention-core GEMMs (Q K^T, softmax V), the router and the output layer stay 16-bit under
// quantised training (costmodel/precision.cpp, unquantised()).
inline Dtype core_dtype(Dtype compute) {
    return unquantised(compute);
}

inline Seconds collective(Collective k, Bytes s, int64_t n, const GroupLink& l) {
    return collective_time(k, s, n, l);
}

// The FLOPs gemm_time reads the curve at: a loop of count GEMMs runs each at the efficiency of
// its own size; one batched kernel at about that of a GEMM of the whole batch's FLOPs.
inline Flops gemm_lookup_size(const GpuSpec& gpu, const GemmShape& g) {
    const Flops f = gemm_flops(g);
    return gpu.batched_gemm_fused || g.count <= 1.0 ? f : f / g.count;
}

// A linear layer's forward GEMM and its backward (data- and weight-gradient GEMMs).
struct PassTimes {
    Seconds fwd;
    Seconds bwd;
};

// A frozen weight (job.peft, costmodel/peft.hpp) has no weight gradient: its backward is the
// data gradient alone (autograd skips dW when requires_grad is False; TE's Linear backward
// likewise skips its wgrad GEMM), a third of the layer's GEMM FLOPs saved.
inline PassTimes linear_passes(const GpuSpec& gpu, Dtype dt, const GemmShape& g, bool frozen = false) {
    return {gemm_time(gpu, dt, g),
            gemm_time(gpu, dt, g, GemmPass::dgrad) +
                (frozen ? Seconds{} : gemm_time(gpu, dt, g, GemmPass::wgrad))};
}

}  // namespace cleave::detail
