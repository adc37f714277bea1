#pragma once
// Packed sequences (SFT): a sequence of seq_len tokens is a pack of several samples, and the
// attention core runs over each sample alone (THD layout: Transformer Engine's fused attention
// with cu_seqlens; Megatron-Core PackedSeqParams, Megatron-LM --sft, Megatron-Bridge
// dataset.offline_packing_specs @067f987d). The linear layers, the norms, the loss and the
// activations see the pack's tokens as they would see one sequence's: only the core changes.

#include "core/job.hpp"

namespace cleave {

/// True when the job's sequences are packs of samples (job.packed_mean_len > 0).
[[nodiscard]] bool packed(const JobSpec& job);

/// The keys a query of the attention core meets before causal halving, the span its cost
/// scales with: seq_len S unpacked; packed, E[L^2] / E[L] over the samples. Derivation: a pack
/// of S = sum L_i tokens runs the core on each sample alone, c L_i^2 for L_i queries against
/// L_i keys (causal halves every sample as it halves one sequence), so the pack costs
/// c sum L_i^2 = c S (sum L_i^2 / sum L_i) = c S E[L^2] / E[L] against c S^2 unpacked: the
/// core's FLOPs are scaled by span / S. Equal samples of L tokens: span L (S 4096, L 512: the
/// core's FLOPs / 8). With a mean mu and standard deviation sigma, E[L^2] = mu^2 + sigma^2, so
/// span = mu + sigma^2 / mu >= mu: a mean alone under-prices the core when lengths vary.
[[nodiscard]] double attention_span(const JobSpec& job);

/// The fraction of an unpacked sequence's attention-core work a pack does: span / seq_len
/// (1 unpacked).
[[nodiscard]] double packed_attention_scale(const JobSpec& job);

}  // namespace cleave
