#pragma once
// Time of one transformer layer for one micro-batch on one GPU: GEMMs at the profile's
// shape-dependent efficiency, memory-bound kernels at HBM bandwidth, and the exposed TP / CP / EP
// communication of that layer.

#include "core/cluster.hpp"
#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "core/units.hpp"
#include "costmodel/collectives.hpp"
#include "costmodel/flops.hpp"

#include <utility>

namespace cleave {

/// Which of a linear layer's three GEMMs: the forward Y = X W (m x k by k x n), the data
/// gradient dX = dY W^T (m x n by n x k) or the weight gradient dW = X^T dY (k x m by m x n,
/// accumulated into the fp32 main gradient). All three have the forward's FLOPs.
enum class GemmPass : uint8_t { fprop, dgrad, wgrad };

/// Time of `g.count` GEMMs of pass `pass` of the forward shape g: FLOPs / (peak(dtype) *
/// efficiency). The efficiency is the curve's at the FLOPs of the whole batch when the GPU runs a
/// batch as one kernel (`batched_gemm_fused`, cuBLAS strided-batched), else at the FLOPs of one
/// GEMM of it (a loop of count GEMMs, each at the efficiency of its own shape); the same for the
/// three passes. Where the profile prices that dtype's GEMMs by shape (GpuSpec::
/// gemm_tensor_efficiency_fp8): shaped_gemm_time.
[[nodiscard]] Seconds
gemm_time(const GpuSpec& gpu, Dtype dtype, const GemmShape& g, GemmPass pass = GemmPass::fprop);

/// HBM bytes of one GEMM of pass `pass` of the forward shape g (count 1): the two operands at
/// `operand_B` a element and the result, 2 B (bf16) for fprop and dgrad, 8 B for wgrad (the fp32
/// main gradient read and written: Megatron's gradient-accumulation fusion, DeepGEMM PR #95's
/// accumulating wgrad kernels): fprop m k + k n + 2 m n, dgrad m n + n k + 2 m k (x operand_B
/// for the operands), wgrad m k + m n + 8 k n.
[[nodiscard]] double gemm_pass_bytes(const GemmShape& g, GemmPass pass, double operand_B);

/// A GEMM priced by its shape: the tensor work FLOPs / (peak x min(e, tensor_clock_ceiling))
/// plus gemm_pass_bytes through HBM at hbm_bw x hbm_efficiency, the two in sequence (a kernel
/// class fitted to DeepGEMM's per-shape table, hwprofiles/h800.toml); e =
/// gemm_tensor_efficiency_fp8. Times g.count.
[[nodiscard]] Seconds shaped_gemm_time(
    const GpuSpec& gpu, Dtype run, double tensor_efficiency, const GemmShape& g, GemmPass pass);

/// The share of the GPU's SMs left to compute kernels of a layer whose MoE all-to-all runs
/// beside them: (sm_count - held) / sm_count, held = the stack's moe_deepep_num_sms, where the
/// dispatcher is DeepEP (its kernels keep their SMs for as long as they run; Megatron
/// --moe-deepep-num-sms) and its all-to-all runs under compute (the DualPipe / DualPipeV pairs,
/// or the stack's a2a_overlap) with ep > 1; 1 otherwise, or where the profile has no sm_count.
/// Compute-bound kernels (GEMMs, attention) run in time / share (throughput linear in SMs).
[[nodiscard]] double compute_sm_share(const GpuSpec& gpu, const JobSpec& job, const Plan& p);

/// Classes of memory-bound kernel, each priced at its own achieved fraction of HBM bandwidth
/// (GpuSpec::norm_efficiency ...): on a GPU they all stream at about the same rate, on a CPU
/// GeLU's tanh or the cross-entropy's exp make some an order of magnitude slower per byte.
enum class KernelClass {
    norm,
    elementwise,
    activation,        // GeLU
    gated_activation,  // SwiGLU
    softmax,
    cross_entropy,
    optimizer,
    ssm  // a sequence mixer's own kernels: Mamba-2's conv + SiLU, SSD scan and gated norm; GDN's
};

/// "norm", "elementwise", "activation", "gated_activation", "softmax", "cross_entropy",
/// "optimizer", "ssm" (the profile key is this + "_efficiency").
[[nodiscard]] const char* to_string(KernelClass k);

/// The profile field that holds class k's efficiency (0 when the profile has none).
[[nodiscard]] double& kernel_efficiency_field(GpuSpec& gpu, KernelClass k);

/// The class's efficiency from the profile, hbm_efficiency when the profile has none (0), and
/// 1 when that is 0 too.
[[nodiscard]] double kernel_efficiency(const GpuSpec& gpu, KernelClass k);

/// Time of kernels of class `k` moving `b` bytes: b / (hbm_bw * kernel_efficiency(gpu, k)).
[[nodiscard]] Seconds memory_time(const GpuSpec& gpu, KernelClass k, Bytes b);

/// The achieved fraction of HBM bandwidth of the job's cast kernels: the profile's
/// quantize_efficiency (a trace calibration), else its value for the job's recipe
/// (quantize_efficiency_tensorwise / _delayed / _blockwise / _mxfp8 / _nvfp4), else the
/// element-wise class's efficiency.
[[nodiscard]] double quantize_efficiency(const GpuSpec& gpu, const JobSpec& job);

/// Time of the FP8 / FP4 casts of GEMM operands moving `b` bytes: b / (hbm_bw x
/// quantize_efficiency(gpu, job)).
[[nodiscard]] Seconds quantize_time(const GpuSpec& gpu, const JobSpec& job, Bytes b);

/// Memory-bound bytes split by kernel class.
struct KernelBytes {
    Bytes norm;
    Bytes elementwise;
    Bytes activation;
    Bytes gated_activation;
    Bytes softmax;
    Bytes cross_entropy;
    Bytes optimizer;
    Bytes ssm;

    [[nodiscard]] Bytes total() const {
        return norm + elementwise + activation + gated_activation + softmax + cross_entropy +
               optimizer + ssm;
    }

    bool operator==(const KernelBytes&) const = default;
};

/// Launches of memory-bound kernels by class, in one pass of one layer.
struct KernelLaunches {
    double norm = 0.0;
    double elementwise = 0.0;
    double activation = 0.0;
    double gated_activation = 0.0;
    double softmax = 0.0;

    [[nodiscard]] double total() const {
        return norm + elementwise + activation + gated_activation + softmax;
    }

    bool operator==(const KernelLaunches&) const = default;
};

/// Sum over the classes of memory_time(gpu, class, bytes of that class), each at least its
/// launches x the profile's kernel_floor (a launch occupies the GPU for at least that, however
/// few bytes it moves).
[[nodiscard]] Seconds
memory_time(const GpuSpec& gpu, const KernelBytes& b, const KernelLaunches& launches = {});

/// Expected EP ranks one token's top_k experts land on (DeepEP sends a token once per rank):
/// R (1 - (1 - 1/R)^k) with R = ep, or ep x group_topk / groups under group-limited routing
/// (router_groups), the experts drawn evenly over the ranks. DeepSeek-V3 at EP 64 (8 groups, top
/// 4): R = 32, 32 (1 - (31/32)^8) = 7.18 ranks per token.
[[nodiscard]] double deepep_rank_copies(const ModelSpec& m, const JobSpec& job, const Plan& p);

/// A norm kernel's time over rows of `width` elements relative to its bytes at the norm rate:
/// 1 where the stack has a tuned kernel of that kind for that width (or lists none), else the
/// stack's general-kernel factor, forward or backward (SoftwareStack::norm_general_fwd / _bwd;
/// Transformer Engine PR #747: 2.2 / 1.3 at 8192 on an H100).
[[nodiscard]] double
norm_kernel_factor(const SoftwareStack& s, NormKind kind, double width, bool backward);

/// `b` with its norm bytes scaled by `norm_factor` (the bytes a tuned kernel would move in the
/// time the layer's norms take): what memory_time prices a layer's classes from.
[[nodiscard]] KernelBytes norm_timed(KernelBytes b, double norm_factor);

/// HBM traffic of the memory-bound kernels of one layer (Megatron's fused kernels):
/// forward: 2 norms (read + write 2 B/elem), 2 bias-dropout-add (x, residual, out, 1-B mask),
/// activation (GeLU 4 B, SwiGLU 6 B per inner element), scale-mask-softmax (4 B per score) and
/// attention dropout (5 B per score); backward reads what forward wrote plus the gradient.
struct LayerTraffic {
    Bytes fwd;
    Bytes bwd;
    Bytes attn_core_fwd;  // softmax + attention dropout forward (selective recompute redoes it)
    Bytes permute;        // of fwd + bwd elementwise: the MoE router and token permutation
    KernelBytes fwd_by_class;  // fwd split by kernel class (norm, elementwise incl. RoPE and the
                               // MoE permutation, (gated) activation, softmax incl. attention
                               // dropout)
    KernelBytes bwd_by_class;
    Bytes rope;  // of fwd (and again of bwd) elementwise: RoPE (MLA: with its q / k assembly)
    // The norms' time over their bytes at the norm rate, bytes-weighted over the layer's norms
    // (norm_kernel_factor of each width): the class's bytes stay the bytes moved.
    double norm_fwd_factor = 1.0;
    double norm_bwd_factor = 1.0;
    KernelLaunches fwd_launches;
    KernelLaunches bwd_launches;
    // torchtitan uncompiled: of fwd / bwd elementwise (and launches), what the eager chains add
    // over the fused kernels (costmodel/eager.hpp).
    Bytes eager_fwd;
    Bytes eager_bwd;

    bool operator==(const LayerTraffic&) const = default;
};

[[nodiscard]] LayerTraffic
layer_traffic(const ModelSpec& m, const JobSpec& job, const Plan& p, bool moe,
              LayerShape shape = LayerShape::full);

/// Costs of one layer, one micro-batch, one GPU. Compute excludes communication; *_comm is the
/// exposed part of the TP / CP / EP collectives (Megatron does not overlap TP collectives; ring
/// attention hides its K/V passes behind the attention core; MoE all-to-all is exposed).
struct LayerCost {
    Seconds fwd;        // forward math + memory-bound kernels
    Seconds bwd;        // backward math + memory-bound kernels, no recomputation
    Seconds recompute;  // extra forward work redone in backward (selective or full)
    Seconds tp_fwd;
    Seconds tp_bwd;  // incl. the recomputed forward's collectives (full recompute)
    Seconds cp_fwd;
    Seconds cp_bwd;
    Seconds ep_fwd;
    Seconds ep_bwd;
    // Of fwd + bwd + recompute: the quantised grouped GEMM's fixed per-expert cost (local
    // experts x node.quantised_expert_overhead), what a2a overlap does not hide.
    Seconds expert_overhead;
    Bytes tp_bytes;  // sent per GPU, fwd + bwd (+ recompute)
    Bytes cp_bytes;
    Bytes ep_bytes;
    Bytes ep_nvlink_bytes;  // of ep_bytes (+ the ETP gathers): over NVLink
    Bytes ep_nic_bytes;     // of ep_bytes: through this GPU's NIC
    Flops flops_fwd;        // GEMM FLOPs of the forward on this GPU
    // Of fwd + bwd (recompute apart), by kind of kernel: the linear layers' GEMMs (router and
    // shared experts included), the attention core, and the memory-bound kernels (norms,
    // element-wise, activation, softmax, quantisation casts). Comm and expert_overhead are not in
    // them: fwd + bwd = gemm + attention + memory + the layer's exposed comm + expert_overhead.
    Seconds gemm;
    Seconds attention;
    Seconds memory;

    bool operator==(const LayerCost&) const = default;
};

/// Of a LayerCost, by the kernel classes a profiler trace shows (trace/classes.hpp): of memory,
/// the FP8 / FP4 casts of the GEMM operands, norms, activations, the unfused softmax + attention
/// dropout, and the MoE router and permutation (the rest is element-wise: residual adds, dropout,
/// RoPE); of recompute, its GEMMs, attention core, norms and activations. Kept apart from
/// LayerCost, which the planner caches per layer shape, and filled only when asked for.
struct LayerClasses {
    Seconds quantize;
    Seconds norm;
    Seconds activation;
    Seconds softmax;
    Seconds permute;
    Seconds recompute_gemm;
    Seconds recompute_attention;
    Seconds recompute_norm;
    Seconds recompute_activation;
    Seconds gaps;  // of memory: the gaps between the layer's launches (costmodel/launches.hpp)

    bool operator==(const LayerClasses&) const = default;
};

/// Of an EP all-to-all's copies through the NIC, the share a DeepEP-style dispatcher sends (one
/// per remote domain a token reaches, forwarded over NVLink there), with group-limited routing
/// when groups > 0 (compute.cpp derives it).
[[nodiscard]] double
nic_copy_ratio(const AllToAllLinks& l, double top_k, int64_t groups, int64_t group_topk);

/// The job's group-limited routing (groups, group_topk): its --moe-router-num-groups /
/// --moe-router-group-topk when set, else the model's (HF n_group / topk_group); {0, 0} = none.
[[nodiscard]] std::pair<int64_t, int64_t> router_groups(const ModelSpec& m, const JobSpec& job);

/// E[max] of n independent standard normals, by Blom's plotting position (Blom 1958,
/// "Statistical Estimates and Transformed Beta-Variables"): Phi^-1((n - 0.375) / (n + 0.25)).
/// 0 for n <= 1; n = 8: Phi^-1(7.625 / 8.25) = 1.434 (exact 1.4236).
[[nodiscard]] double expected_max_normal(int64_t n);

/// How much slower than the mean GPU a synchronous job of `gpus` GPUs runs its kernels: the
/// slowest GPU's pace, 1 + spread x E[max of gpus standard normals] (the TP collectives of every
/// layer, the pipeline's send/recv and the DP reduction of every step wait for it; with a
/// GPU's speed a property of its die and its place in the rack, the same GPU is slowest every
/// step). 1 where the profile has no throughput_spread.
[[nodiscard]] double straggler_factor(const GpuSpec& gpu, int64_t gpus);

[[nodiscard]] LayerCost layer_cost(const ModelSpec& m,
                                   const ClusterSpec& c,
                                   const JobSpec& job,
                                   const Plan& p,
                                   const PlanLinks& links,
                                   bool moe,
                                   LayerShape shape = LayerShape::full,
                                   LayerClasses* classes = nullptr);

/// Memory traffic of one Mamba-2 layer's non-GEMM kernels per micro-batch on one GPU (bytes by
/// kernel class; see mamba_layer_cost).
[[nodiscard]] LayerTraffic mamba_traffic(const ModelSpec& m, const JobSpec& job, const Plan& p);

/// One Mamba-2 layer (a hybrid model's M layer) on one GPU for one micro-batch: in_proj and
/// out_proj at the GEMM curve, the SSD scan's tensor products at the GEMM curve of their (small,
/// batched) shape and its memory traffic at HBM speed, the causal conv, the gated norm, the
/// pre-norm and the residual add; TP as one column/row-parallel pair (in_proj, out_proj), CP as
/// Megatron's MambaContextParallel all-to-alls (mamba_context_parallel.py @d98e8a64: the in_proj
/// output to head-sharded before the conv and scan, the scan output back after; the reverse in
/// backward). Full recomputation re-runs the forward; selective recomputes nothing here.
[[nodiscard]] LayerCost mamba_layer_cost(const ModelSpec& m,
                                         const ClusterSpec& c,
                                         const JobSpec& job,
                                         const Plan& p,
                                         const PlanLinks& links);

/// Memory traffic of one gated DeltaNet layer's non-GEMM kernels per micro-batch on one GPU
/// (bytes by kernel class; see gdn_layer_cost).
[[nodiscard]] LayerTraffic gdn_traffic(const ModelSpec& m, const JobSpec& job, const Plan& p);

/// One gated DeltaNet layer (a hybrid model's G layer) on one GPU for one micro-batch, priced as
/// mamba_layer_cost prices Mamba-2: in_proj and out_proj at the GEMM curve, the chunked delta
/// rule's products at the GEMM curve of their batched shapes and its kernels' traffic at HBM
/// speed; the backward recomputes W, U and the chunk states before its gradients
/// (flash-linear-attention chunk_gated_delta_rule_bwd); TP as one column/row-parallel pair, CP
/// as gdn.py's head-parallel all-to-alls (a2a_cp_to_hp of the in_proj output, a2a_hp_to_cp of
/// the gated norm's output). Full recomputation re-runs the forward.
[[nodiscard]] LayerCost gdn_layer_cost(const ModelSpec& m,
                                       const ClusterSpec& c,
                                       const JobSpec& job,
                                       const Plan& p,
                                       const PlanLinks& links);

/// Tokens of the busiest expert over the average: job.moe_imbalance, capped by the capacity
/// factor when one is set (tokens beyond capacity are dropped, Megatron moe_utils.py
/// get_capacity: capacity = tokens * top_k / experts * factor).
[[nodiscard]] double expert_load_ratio(const JobSpec& job);

/// Tokens of the busiest EP rank over the average: its hottest expert at expert_load_ratio(),
/// its other experts / ep - 1 local experts at the average (capped by capacity):
/// (ratio + (local - 1) * min(1, capacity)) / local.
[[nodiscard]] double rank_load_ratio(const ModelSpec& m, const JobSpec& job, const Plan& p);

/// The routed experts' GEMMs on one GPU of the expert grid (etp x ep): each local expert sees
/// M = tokens * top_k * etp / (tp * experts / ep) rows on average (the SP shard of tokens/tp per
/// GPU, top_k copies, all-gathered over ETP), N split by etp. `hot` is the busiest expert
/// (M x expert_load_ratio()), `avg` each of the `others` other local experts.
struct ExpertGemms {
    GemmShape avg_in;   // M x h -> (2) f / etp
    GemmShape avg_out;  // M x f / etp -> h
    GemmShape hot_in;
    GemmShape hot_out;
    double others = 0.0;  // local experts - 1

    bool operator==(const ExpertGemms&) const = default;
};

[[nodiscard]] ExpertGemms expert_gemms(const ModelSpec& m, const JobSpec& job, const Plan& p);

/// Time of one expert GEMM of a group of `local` experts whose GEMMs total `group_flops`. How
/// full the GPU runs (the efficiency curve's lookup) depends on what runs at once: a fused
/// grouped kernel (stack moe_grouped_gemm_streams = 0) fills it with every expert's tiles (the
/// whole group's FLOPs); Transformer Engine's grouped GEMM runs one cuBLAS GEMM per expert over
/// moe_grouped_gemm_streams streams (min(local, streams) GEMMs at once); a loop (no grouped
/// GEMM) one at a time. Either way no faster than streaming the expert's weight and its rows
/// through HBM once (roofline: a small-M expert GEMM reads a K x N weight for few rows).
/// Where the profile prices the dtype's GEMMs by shape, shaped_gemm_time of the expert's own
/// shape (a grouped kernel's time is the sum of its groups': DeepGEMM's grouped table).
[[nodiscard]] Seconds expert_gemm_time(const GpuSpec& gpu,
                                       const JobSpec& job,
                                       const GemmShape& g,
                                       Flops group_flops,
                                       double local,
                                       GemmPass pass = GemmPass::fprop);

/// Embedding (first stage) and output layer + fp32 cross-entropy (last stage), one micro-batch.
struct EdgeCost {
    Seconds fwd;
    Seconds bwd;
    Seconds comm_fwd;  // vocab-parallel all-reduce (TP)
    Seconds comm_bwd;
    Bytes tp_bytes;
    Seconds gemm;  // of fwd + bwd: the GEMMs (the rest is memory-bound)

    bool operator==(const EdgeCost&) const = default;
};

[[nodiscard]] EdgeCost embedding_cost(const ModelSpec& m,
                                      const ClusterSpec& c,
                                      const JobSpec& job,
                                      const Plan& p,
                                      const PlanLinks& links);

/// One multi-token-prediction module's own work beside its transformer block and its output
/// head (DeepSeek-V3 report arXiv:2412.19437 Sec. 2.2, Megatron-Core multi_token_prediction.py):
/// RMSNorm of the hidden state and of the next token's embedding, their concatenation projected
/// 2h -> h (eh_proj, column-split over TP), and the block's final norm. Backward: 2x the GEMM.
[[nodiscard]] EdgeCost
mtp_projection_cost(const ModelSpec& m, const ClusterSpec& c, const JobSpec& job, const Plan& p);

[[nodiscard]] EdgeCost output_cost(const ModelSpec& m,
                                   const ClusterSpec& c,
                                   const JobSpec& job,
                                   const Plan& p,
                                   const PlanLinks& links);

/// Bytes of one activation element on the wire and in memory (2 for 16-bit and quantised training,
/// whose activations between layers stay bf16; 4 for fp32).
[[nodiscard]] double activation_bytes(const JobSpec& job);

/// Optimizer step of `params` local parameters: memory-bound, Adam reads master weights, grads,
/// m and v and writes master, m, v and the model copy, plus one read of the grads for the norm.
[[nodiscard]] Seconds optimizer_time(const GpuSpec& gpu, const JobSpec& job, double params);

/// Muon's work on one layer's 2-D weights in one optimizer step, on one GPU that owns every
/// one of them (estimate.cpp divides by the ranks that share the ownership): the Newton-Schulz
/// iterations (quintic, Megatron-Core emerging_optimizers / emerging-optimizers' newton_schulz:
/// per step A = X X^T, B = b A + c A^2, X = a X + B X on X of m x n, m <= n: GEMMs of
/// (m x n)(n x m), (m x m)(m x m), (m x m)(m x n), 4 m^2 n + 2 m^3 FLOPs) at the bf16 curve
/// (--muon-fp32-matmul-prec medium), and under --muon-tp-mode duplicated / distributed the
/// all-gather of each TP-sharded gradient over TP. Dense: the attention (q, k, v apart, as
/// --muon-split-qkv does; MLA's five projections), MLP, router and shared expert; expert: this
/// GPU's routed experts (experts / ep, each split by etp). A hybrid M layer's out_proj (its
/// in_proj is Adam's: mamba_mixer.py sets use_muon False); a G layer's in_proj and out_proj.
struct MuonCost {
    Seconds dense;
    Seconds expert;
    Seconds dense_gather;
    Seconds expert_gather;

    bool operator==(const MuonCost&) const = default;
};

/// One layer's Muon cost; `mamba` for a hybrid model's Mamba-2 layer, `gdn` for its gated
/// DeltaNet layer (shape ignored).
[[nodiscard]] MuonCost muon_layer_cost(const ModelSpec& m,
                                       const GpuSpec& gpu,
                                       const JobSpec& job,
                                       const Plan& p,
                                       const PlanLinks& links,
                                       bool moe,
                                       LayerShape shape,
                                       bool mamba = false,
                                       bool gdn = false);

/// Forward FLOPs of one quintic Newton-Schulz step on an r x c matrix: 4 m^2 n + 2 m^3 with
/// m = min(r, c), n = max(r, c).
[[nodiscard]] double newton_schulz_step_flops(double rows, double cols);

/// Quantising `params` local weights once per step for quantised training (0 otherwise):
/// weight_quantise_bytes() at the elementwise kernels' HBM rate.
[[nodiscard]] Seconds weight_quantise_time(const GpuSpec& gpu, const JobSpec& job, double params);

}  // namespace cleave
