#pragma once
// The loss as each stack computes it: the logit-sized buffers alive at the output layer's and
// the cross-entropy's peak, for Megatron's unfused, native-fused and Transformer Engine losses
// and torch's eager, compiled and chunked ones (SoftwareStack::loss, loss_chunks).

#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "core/units.hpp"

namespace cleave {

/// Buffers of the 16-bit logits' size (T V / t x 2 B) alive at the loss's peak under `impl`,
/// `vocab_parallel` when TP shards the vocabulary and the stack computes the loss on the shards
/// (torch loss_parallel). Megatron unfused (tensor_parallel/cross_entropy.py
/// calculate_logits_max: logits.float(), exp / div in place, the fp32 softmax saved) and native
/// (fusions/fused_cross_entropy.py: the same fp32 copy and softmax, fewer kernels) hold the
/// 16-bit logits + their fp32 copy: 3. Transformer Engine (pytorch/cross_entropy.py
/// CrossEntropyFunction: saves the 16-bit input and writes the gradient into it in place): 1.
/// torch eager F.cross_entropy(logits.float()): log_softmax's backward with its fp32 output,
/// incoming and outgoing gradients, 3 x fp32 = 6; vocab-parallel (torch loss_parallel
/// _nll_loss_and_log_softmax_backward, torchtitan _LossParallelCrossEntropy) 4 x fp32 = 8.
/// Compiled (inductor fuses the upcast, log_softmax and nll; the partitioner saves the 16-bit
/// input and a per-token fp32 log-sum-exp, not the fp32 log-probabilities): the logits and
/// their 16-bit gradient, 2; vocab-parallel, the autograd Function's saved fp32 log-probs + the
/// 16-bit gradient: 3. Precondition: impl != unset.
[[nodiscard]] double loss_impl_buffers(LossImpl impl, bool vocab_parallel);

/// Bytes the output layer and the loss of one micro-batch hold on the last stage at the loss's
/// peak under the stack's LossImpl, T the micro-batch's tokens on this GPU, N loss_chunks:
/// n x (T / N) x V / t x 2 B, plus, chunked (torchtitan ChunkedLossWrapper), the fp32 buffer
/// the chunks' hidden-state gradients are gathered into (GradAccumulator): 4 T h B.
/// Llama 3 8B (V 128,256, h 4,096), T = 16,384, t = 1, eager, N = 8:
/// 6 x 2,048 x 128,256 x 2 + 4 x 16,384 x 4,096 = 3,152,019,456 + 268,435,456 B.
/// Precondition: job.stack.loss != unset.
[[nodiscard]] Bytes loss_peak_bytes(const ModelSpec& m, const JobSpec& job, const Plan& p);

/// HBM bytes per logit element the loss's kernels move, forward and backward (priced on the
/// cross_entropy kernel class), ab the 16-bit logits' bytes. Megatron's (unset, unfused, native,
/// te): cast (read ab, write 4), max, exp-sum and the stored softmax (12); backward the softmax
/// read and written in place, the 16-bit gradient written: ab + 16 and 4 + ab. Transformer
/// Engine's own traffic (one read for max / sum, one read and in-place write of the gradient:
/// 3 ab, and 2 ab to scale it) is not priced: tried, it moved every megatron-core runs file's
/// time MAPE up 0.3-0.5 points, and which releases ran it is not data yet. torch eager: forward
/// as Megatron's; backward the nll gradient written dense in fp32 (4), log_softmax's backward
/// reading it twice with its saved fp32 output and writing fp32 (16), the cast (4 + ab):
/// 24 + ab. Compiled (inductor fuses the upcast into a max / sum pass and a loss pass; backward
/// one read of the logits and one 16-bit write): 2 ab and 2 ab. bf16: 18 / 6, 18 / 26, 4 / 4.
struct LossTraffic {
    double fwd = 0.0;
    double bwd = 0.0;

    bool operator==(const LossTraffic&) const = default;
};

[[nodiscard]] LossTraffic loss_bytes_per_logit(LossImpl impl, double ab);

/// Bytes the last pipeline stage keeps of its outputs under torch.distributed.pipelining
/// (torchtitan's PP): forward_one_chunk appends each micro-batch's output to output_chunks for
/// the schedule to merge when the step ends (pytorch@0138610331
/// torch/distributed/pipelining/stage.py), so at the last micro-batch's loss all `microbatches`
/// outputs are alive: the 16-bit logits T V / t each, or the hidden states T h when a chunked
/// loss applies the output layer itself. 0 without PP or outside torchtitan. Llama 3.1 405B,
/// T = 32,768, t = 8, 8 micro-batches: 8 x 32,768 x 16,032 x 2 = 8,405,385,216 B.
[[nodiscard]] Bytes pipeline_kept_outputs_bytes(const ModelSpec& m,
                                                const JobSpec& job,
                                                const Plan& p,
                                                int64_t microbatches);

}  // namespace cleave
