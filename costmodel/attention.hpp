#pragma once
// The attention core as the stack's kernel runs it. Materialised attention (Megatron-LM 2021) is
// two batched GEMMs plus scale-mask-softmax and dropout over the s x s scores (compute.cpp);
// fused attention (FlashAttention-2/3, cuDNN fused SDPA) keeps the scores on chip, so its time is
// its FLOPs at the kernel's own measured efficiency and no score touches HBM or memory.

#include "core/cluster.hpp"
#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "core/stack.hpp"
#include "core/units.hpp"

#include <optional>

namespace cleave {

/// A fused kernel's forward and backward efficiency (achieved / dense 16-bit peak).
struct AttentionEfficiency {
    double fwd = 0.0;
    double bwd = 0.0;

    bool operator==(const AttentionEfficiency&) const = default;
};

/// The efficiency of the stack's fused kernel on `gpu` at head dim `head_dim` for calls over
/// `seq` keys: the curve whose `gpu` is a substring of gpu.name (case-insensitive) with the
/// head dim nearest in log distance, linear in log(seq) between points, clamped at the ends.
/// nullopt when the stack has no curve for this GPU.
[[nodiscard]] std::optional<AttentionEfficiency> fused_attention_efficiency(
    const SoftwareStack& stack, const GpuSpec& gpu, double head_dim, double seq);

/// Fused attention of one layer, one micro-batch, one GPU.
struct FusedAttentionCost {
    Flops fwd_flops;  // as the kernel papers count them: 4 b (a/t) (s/cp) s d, halved if causal
    Seconds fwd;
    Seconds bwd;  // 2.5 x the forward FLOPs (dS, dQ, dK, dV and the recomputed S = Q K^T)

    bool operator==(const FusedAttentionCost&) const = default;
};

/// fwd = F / (peak x eff_fwd(s/cp)) + cp x overhead, bwd = 2.5 F / (peak x eff_bwd(s/cp)) + cp x
/// overhead, with F = 2 b (a/t) (s/cp) s (d_qk + d_v) x (1/2 when the kernel skips masked tiles)
/// (= 4 b (a/t) (s/cp) s d for d_qk = d_v; MLA: d_qk = nope + rope) (FA2 paper,
/// Dao 2023, Sec. 4.1 FLOP count; backward 2.5x forward, same section). A CP rank runs cp ring
/// steps of (s/cp) x (s/cp) blocks, so the kernel's efficiency is read at s/cp keys and each step
/// pays the stack's per-call overhead. `fallback_fwd` (the GEMM-curve price of the two core
/// GEMMs) is used, x 1/2 when causal, where the stack has no curve for the GPU. Sliding-window
/// layers (GPT-OSS) see w - w (w - 1) / (2 s) keys per query with masked-tile skipping (w
/// without), read at min(s/cp, w) keys; the result is the average over the model's layer pattern
/// (one representative layer per kind). Packed sequences replace s by the span L of
/// attention_span() for the keys and the call (F x L / s, efficiency read at L / cp).
[[nodiscard]] FusedAttentionCost fused_attention_cost(const ModelSpec& m,
                                                      const GpuSpec& gpu,
                                                      const JobSpec& job,
                                                      const Plan& p,
                                                      Seconds fallback_fwd);

/// Bytes fused attention keeps per layer for backward beyond Q, K, V and the output: the fp32
/// log-sum-exp of every query row, 4 b (a/t) (s/cp) (FA2 paper Alg. 1 line 13).
[[nodiscard]] double
fused_attention_saved_bytes(const ModelSpec& m, const JobSpec& job, const Plan& p);

}  // namespace cleave
