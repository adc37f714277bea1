#pragma once
// What a stack's communication leaves exposed when it runs behind compute. Each function is one
// formula over times the caller has priced (collectives.cpp, compute.cpp); derivations in
// docs/costmodel.md section "Overlap as the stack does it".

#include "core/units.hpp"

namespace cleave {

/// Communication split into buckets that run behind `compute` as each bucket becomes ready:
/// the bucket that closes the pass (the last gradient bucket, or the first parameter gather
/// that must land before any compute can start) cannot hide; the rest hide while compute lasts.
/// exposed = first + max(0, total - first - compute) with overlap, total without.
/// (PyTorch DDP, Li et al. 2020, VLDB, Sec. 3.2.3; Megatron-Core
/// megatron/core/distributed/param_and_grad_buffer.py: one collective per bucket.)
[[nodiscard]] Seconds
exposed_bucketed(Seconds total, Seconds one_bucket, Seconds compute, bool overlap);

/// FSDP / ZeRO-3 parameter all-gathers and gradient reduce-scatters of one pass over `units`
/// equal units (layers) that share one link. With prefetch (FSDP2 implicit forward prefetch and
/// explicit backward prefetch; torch/distributed/fsdp/_fully_shard) unit i+1's gather runs
/// during unit i's compute, so only the first gather (and, in backward, the last unit's
/// reduce-scatter) is exposed plus whatever the whole pass's traffic exceeds its compute:
/// exposed = (g + r) / units + max(0, g + r - (g + r) / units - compute).
/// Without prefetch every gather stalls (DeepSpeed stage 3 fetching the module about to run) and
/// the reduce-scatter hides: exposed = g + max(0, r - compute).
[[nodiscard]] Seconds fsdp_exposed(
    Seconds gathers, Seconds reduce_scatters, Seconds compute, double units, bool prefetch);

/// Compute lost to communication that runs behind it: NCCL kernels occupy SMs while they run,
/// so the compute they hide behind runs on the rest (Transformer Engine's
/// NVTE_FWD/BWD_LAYERNORM_SM_MARGIN leaves SMs free for exactly this; Megatron-Bridge sets 20):
/// slowdown = (total - exposed) x fraction, fraction = the stack's comm_sm_fraction.
[[nodiscard]] Seconds overlap_slowdown(Seconds total, Seconds exposed, double fraction);

/// A tensor-parallel collective pipelined with the GEMM it feeds or follows (Transformer Engine
/// userbuffers, --tp-comm-overlap: the GEMM is split into chunks and chunk i's all-gather or
/// reduce-scatter runs during chunk i-1's GEMM): exposed = max(0, comm - gemm) with overlap,
/// comm without.
[[nodiscard]] Seconds exposed_behind_gemm(Seconds comm, Seconds gemm, bool overlap);

}  // namespace cleave
