#pragma once
// Memory per GPU: model states per ZeRO stage and dtype, activations per layer (Korthikanti et
// al. 2022) for every recompute x SP combination, logits, communication buffers.

#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "core/units.hpp"
#include "costmodel/flops.hpp"

#include <cstdint>

namespace cleave {

struct StateBytes {
    Bytes weights;
    Bytes grads;
    Bytes optimizer;  // fp32 master copy (when weights are narrower) + optimizer moments

    bool operator==(const StateBytes&) const = default;
};

/// Model states of `params` parameters held by one GPU before sharding, sharded over `shard`
/// data-parallel ranks per ZeRO stage (Rajbhandari et al. 2020, Sec. 5): stage 1 (Megatron's
/// distributed optimizer) shards the optimizer states, 2 also the grads, 3 also the weights.
/// Mixed-precision Adam, 2-byte grads, zero 0: 2 + 2 + 12 = 16 B/param; zero 1: 4 + 12/d;
/// zero 2: 2 + 14/d; zero 3: 16/d.
[[nodiscard]] StateBytes model_states(const JobSpec& job, double params, int zero, int64_t shard);

/// What model_states() reads of the job: bytes per parameter of its weights, grads and
/// optimizer states (optimizer_state_bytes), for callers that price many plans of one job.
struct StateBytesPerParam {
    double weights = 0.0;
    double grads = 0.0;
    double optimizer = 0.0;
};

[[nodiscard]] StateBytesPerParam state_bytes_per_param(const JobSpec& job);

/// model_states() with the job's bytes per parameter worked out once.
[[nodiscard]] inline StateBytes
model_states(const StateBytesPerParam& b, double params, int zero, int64_t shard) {
    const auto n = static_cast<double>(shard > 1 ? shard : 1);
    StateBytes s;
    s.weights = bytes(params * b.weights / (zero >= 3 ? n : 1.0));
    s.grads = bytes(params * b.grads / (zero >= 2 ? n : 1.0));
    s.optimizer = bytes(params * b.optimizer / (zero >= 1 ? n : 1.0));
    return s;
}

/// Activation bytes one layer stores for one micro-batch on one GPU (Korthikanti et al. 2022,
/// Table 2, generalised): s b h (34 + 5 a s / h) with no parallelism; TP: s b h (10 + 24/t +
/// 5 a s/(h t)); TP + SP: s b h (34 + 5 a s / h) / t; selective drops the 5 a s / h term; full
/// recompute keeps only the layer input 2 s b h (/t with SP). GQA shrinks K and V, SwiGLU stores
/// gate, up and product (6 s b f instead of 4 s b f), MoE stores top_k routed copies; CP divides s.
/// A hybrid model's single-block layer (`shape` attention or ffn) keeps one norm's region and
/// only its block's terms. torchtitan's eager RMSNorm keeps its fp32 upcast and pre-weight
/// output, 4 + ab bytes per element of each norm input (compiled: ab). A frozen base
/// (job.peft) keeps no linear's input (no weight gradient to compute). Without checkpointing,
/// torchao's saved float8 weights where its release keeps them (float8_saved_weight_bytes_per_param).
[[nodiscard]] Bytes activation_per_layer(const ModelSpec& m,
                                         const JobSpec& job,
                                         const Plan& p,
                                         bool moe,
                                         Recompute r,
                                         LayerShape shape = LayerShape::full);

/// Activation bytes one Mamba-2 layer keeps for one micro-batch on one GPU (Megatron-Core's
/// memory-efficient path: mamba_ssm MambaSplitConv1dScanCombinedFn saves the in_proj output
/// zxbcdt and the scan output out_x, the conv and the states are recomputed in backward; the
/// gated RMSNorm keeps its input; out_proj keeps its input, quantised under FP8; the pre-norm
/// its input and in_proj its input like a transformer layer's norm): per token
/// ab h / sp + qb h / sp + ab (2 d_inner + 2 G N + H) / t + 2 ab d_inner / t + qb d_inner / t
/// + 4 B per group of the norm's rstd. Full recompute keeps the layer input.
[[nodiscard]] Bytes
mamba_activation_per_layer(const ModelSpec& m, const JobSpec& job, const Plan& p, Recompute r);

/// Activation bytes one gated DeltaNet layer keeps for one micro-batch on one GPU (gdn.py
/// @d98e8a64 and flash-linear-attention's ChunkGatedDeltaRuleFunction, which saves q, k, v, g,
/// beta and A and recomputes W, U and the states in backward): per token ab h / sp + qb h / sp
/// (the pre-norm's and in_proj's inputs) + ab in_proj_dim / t (in_proj's output: the conv's input
/// and the gate z) + ab (2qk + v) / t (the conv output) + ab 2qk / t (q and k L2-normed) + ab
/// 2 Hv d_k / t when Hv > Hk (repeated to the value heads) + (4 + ab) Hv / t (g in fp32, beta) +
/// ab Hv C / t (A) + 2 ab v / t (o, the gated norm's output) + 4 Hv / t (its rstd) + qb v / t
/// (out_proj's input). Full recompute keeps the layer input.
[[nodiscard]] Bytes
gdn_activation_per_layer(const ModelSpec& m, const JobSpec& job, const Plan& p, Recompute r);

/// Bytes of one layer's MLP / MoE activations that Megatron's selective recompute modules
/// (Plan::recompute_modules) free, for one micro-batch on one GPU (transformer_config.py
/// recompute_modules @d98e8a64; what each keeps, shared/reference/memory-overheads.md F31):
/// dense layer: mlp frees the MLP's (2 or 3) f / t per token (its input, the norm output, is
/// kept by the layer anyway); MoE layer: moe frees the routed and shared experts' activations
/// and the routed copies of the input, moe_act one f_e per routed copy (the activation's output
/// before the down projection), shared_experts the shared expert's (2 or 3) f_s / t. layernorm
/// frees nothing here: Transformer Engine fuses the input norms into the next Linear, and the
/// MoE router's gate keeps the pre-MLP norm output for its backward (Moonlight-16B measured
/// [layernorm, moe_act] within 0.01 GiB of [moe_act], public_memory.csv rows 44-45).
/// mla_up_proj (the attention's Q, K, V) is taken off in activation_per_layer().
/// Moonlight-16B (tok 4096, t 2, top-6 of f_e 1408), moe_act: 2 x 4096 x 6 x 1408 / 2 = 34.6 MB.
[[nodiscard]] double module_recompute_saving(const ModelSpec& m, const JobSpec& job, const Plan& p,
                                             bool moe);

/// Attention activation elements per token one layer keeps for backward on one GPU: Q, K and V
/// as the kernel reads them and the output-projection input, / t (a d_qk + a_kv (d_qk + d_v) +
/// a d_v); MLA adds its latents, kept whole on every TP rank: 2 q_lora + 2 kv_lora + rope.
[[nodiscard]] double attention_activation_elements(const ModelSpec& m, const Plan& p);

/// Bytes of K and V per token on one GPU as the attention kernel sees them (MLA: after the
/// up-projection, the rope key part broadcast to every head): a_kv (d_qk + d_v) / t x the
/// activation bytes. The CP ring passes this per token of its chunk.
[[nodiscard]] double kv_bytes_per_token(const ModelSpec& m, const JobSpec& job, const Plan& p);

/// Output layer + loss of one micro-batch on the last stage at the loss's peak: n buffers of
/// the 16-bit logits' size, T V / t x 2 B each (loss_buffer_count). Unfused (Megatron's
/// VocabParallelCrossEntropy): the logits + their fp32 copy, n = 3; fused (TE / Triton): 1.
/// Eager `F.cross_entropy(logits.float())` (torchtitan components/loss.py, train.py
/// `del pred` before backward) peaks inside log_softmax's backward with the fp32 saved
/// log-probabilities, their incoming gradient and the outgoing one alive: 3 x fp32 = n 6.
/// A stack that names its loss (SoftwareStack::loss) is priced by loss_peak_bytes() instead.
[[nodiscard]] Bytes logits_bytes(const ModelSpec& m, const JobSpec& job, const Plan& p);

/// The n of logits_bytes(): with TP the stack's loss_parallel_buffers when it sets them, else
/// its loss_buffers, else 1 fused / 3 unfused. torch's loss_parallel (torchtitan with TP)
/// folds log_softmax's backward into nll_loss's (torch/distributed/tensor/parallel/loss.py
/// _nll_loss_and_log_softmax_backward: `(grad_input + torch.exp(x)) * grad_output`, x the saved
/// fp32 log-probabilities): x, the zeros-like grad_input, exp(x) and their sum alive at once,
/// 4 x fp32 = n 8.
[[nodiscard]] double loss_buffer_count(const JobSpec& job, const Plan& p);

/// Bytes per element of a GEMM input kept for the weight gradient. Transformer Engine under
/// quantised training keeps the quantised copy it fed the GEMM (module/linear.py and
/// layernorm_linear.py save the quantised input / ln_out when fp8 is on; TE @d0067d0d), so
/// fp8 1 B + its scales (mxfp8 1 + 1/32, nvfp4 0.5 + 1/16); otherwise the activation dtype.
/// TE stacks only (megatron-core, fused attention); torchao's float8 under torchtitan by release
/// and recipe (float8_saved_input_bytes: 1 B at 24.12's tensorwise, else the bf16 input).
[[nodiscard]] double saved_input_bytes(const JobSpec& job);

/// Bytes per token one dense layer keeps under torchtitan's op-level selective activation
/// checkpointing (torchtitan/models/llama3/parallelize.py _apply_ac_to_transformer_block @9dec370,
/// policy "op": save the outputs of aten.mm except every second one, of SDPA flash / efficient
/// attention and of aten.max; recompute everything else). The block is checkpointed, so its input
/// is kept (/ t under SP). Llama's matmuls in order q, k, v, o, w1, w3, w2 save q, v, w1, w2;
/// the attention output and its fp32 log-sum-exp are kept. Llama 3 8B, t = 1, bf16:
/// 2 (4096 + 1024 + 14336 + 4096 + 4096 + 4096) + 4 x 32 = 63,616 B. Under torch.compile
/// (SoftwareStack::torch_compile) the min-cut partitioner saves only what backward reads, so a
/// saved output no backward op reads is dropped: the last matmul's (w2), which feeds only the
/// residual add (torch/_functorch/partitioners.py: MUST_SAVE nodes outside the backward's
/// inputs are not saved): 63,616 - 2 x 4096 = 55,424 B.
[[nodiscard]] double op_sac_saved_bytes_per_token(const ModelSpec& m, const JobSpec& job,
                                                  const Plan& p);

/// Largest weight matrix of one transformer layer on one GPU after the TP split, in parameters:
/// max of QKV h x (a + 2 a_kv) d, projection a d x h, MLP in h x f (x2 for SwiGLU, gate and up
/// fused as in Megatron), MLP out f x h, and the same for one expert of an MoE model; / t.
[[nodiscard]] double largest_layer_matrix(const ModelSpec& m, const Plan& p);

/// ZeRO-3 gathered-weight buffers: DeepSpeed stage 3 gathers per submodule (each Linear), so at
/// the memory peak the module that runs and the one prefetched are whole: 2 x the largest layer
/// matrix in the weight dtype (DeepSpeed partition_parameters.py /
/// partitioned_param_coordinator.py: fetch_sub_module + prefetch of the next module in the trace).
/// FSDP wrapping whole blocks holds two blocks instead. 0 below ZeRO 3.
[[nodiscard]] Bytes zero3_gather_bytes(const ModelSpec& m, const JobSpec& job, const Plan& p);

/// Embedding output dropout mask of one micro-batch on the first stage (Korthikanti Sec. 4.3).
[[nodiscard]] Bytes
embedding_activation_bytes(const ModelSpec& m, const JobSpec& job, const Plan& p);

/// MoE dispatch and permutation buffers one layer keeps for backward, beyond the one copy of
/// the routed tokens activation_per_layer() counts (top_k x tokens x h / tp): the experts'
/// input at its real size (all-gathered over etp, the busiest EP rank's load), the expert
/// outputs the combine keeps for the probabilities' gradient where the probabilities scale the
/// outputs (Megatron-Core core_v0.12 moe_utils.py unpermute: output = permuted_tokens * probs;
/// torchtitan's score-after-experts) -- not where they scale the activation inside the experts
/// (Megatron-Core >= 0.13 experts.py, stack [moe] probs_in_experts) --, the (2)f intermediate
/// at the busiest rank's load beyond the average, and per routed copy an fp32 probability and
/// an int64 index.
[[nodiscard]] Bytes
moe_dispatch_buffer_bytes(const ModelSpec& m, const JobSpec& job, const Plan& p);

}  // namespace cleave
