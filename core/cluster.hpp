#pragma once
// Hardware profile: one GPU type, one node design, one scale-out network. All SI units.

#include "core/units.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cleave {

/// Element types. mxfp8: FP8 E4M3 with one E8M0 scale per 32 elements (OCP MX v1.0); nvfp4: FP4
/// E2M1 with one E4M3 scale per 16 elements and an fp32 tensor scale (Transformer Engine
/// docs/features/low_precision_training/{mxfp8,nvfp4} @d0067d0d).
enum class Dtype { fp32, tf32, bf16, fp16, fp8, mxfp8, nvfp4 };

/// Bytes per element of `d` (tf32 is stored as fp32), block scales not counted.
[[nodiscard]] constexpr double bytes_of(Dtype d) {
    switch (d) {
    case Dtype::fp32:
    case Dtype::tf32:
        return 4.0;
    case Dtype::bf16:
    case Dtype::fp16:
        return 2.0;
    case Dtype::fp8:
    case Dtype::mxfp8:
        return 1.0;
    case Dtype::nvfp4:
        return 0.5;
    }
    return 4.0;
}

enum class IntraLink {
    nvswitch,     // NVLink through NVSwitch: every GPU pair at full per-GPU bandwidth
    nvlink_mesh,  // NVLink hybrid cube-mesh (DGX-1): not all pairs directly linked
    xgmi,         // AMD Infinity Fabric full mesh
    pcie          // PCIe through the host (and possibly the CPU socket interconnect)
};

struct GemmEfficiencyPoint {
    Flops size;         // FLOPs of one GEMM (2*M*N*K)
    double efficiency;  // achieved / peak at that size, 0..1
    /// ln(size), kept so the log-linear lookup in gemm_efficiency() takes one log per call.
    /// Set from size at construction: build a new point rather than changing size in place.
    double ln_size = std::log(size.value());

    bool operator==(const GemmEfficiencyPoint&) const = default;
};

struct GpuSpec {
    std::string name;
    Bytes memory;           // HBM capacity as the runtime reports it
    BytesPerSecond hbm_bw;  // peak memory bandwidth
    FlopsPerSecond peak_fp32;
    FlopsPerSecond peak_tf32;
    FlopsPerSecond peak_bf16;  // dense tensor-core peak; 0 = unsupported
    FlopsPerSecond peak_fp16;
    FlopsPerSecond peak_fp8;
    FlopsPerSecond peak_mxfp8;  // block-scaled FP8 (Blackwell); 0 = no such path
    FlopsPerSecond peak_nvfp4;  // block-scaled FP4 (Blackwell); 0 = no such path
    /// Achieved fraction of peak for one GEMM as a function of its FLOPs, sorted by size;
    /// interpolated log-linearly, clamped at both ends. One point = constant efficiency. This is
    /// the 16-bit curve; the low-precision ones below fall back to it when empty.
    std::vector<GemmEfficiencyPoint> gemm_efficiency;
    std::vector<GemmEfficiencyPoint> gemm_efficiency_fp8;    // of peak_fp8; empty = 16-bit curve
    std::vector<GemmEfficiencyPoint> gemm_efficiency_mxfp8;  // of peak_mxfp8; empty = fp8 curve
    std::vector<GemmEfficiencyPoint> gemm_efficiency_nvfp4;  // of peak_nvfp4; empty = fp8 curve
    double hbm_efficiency = 0.0;  // achieved / peak HBM bandwidth for streaming kernels
    Bytes reserved_memory;        // CUDA/HIP context + allocator fragmentation + framework
    /// Achieved / peak HBM bandwidth of each class of memory-bound kernel, in the bytes the
    /// cost model charges that class (costmodel/compute.hpp, KernelClass); 0 = hbm_efficiency.
    double norm_efficiency = 0.0;              // layernorm / RMSNorm forward and backward
    double elementwise_efficiency = 0.0;       // bias-dropout-add, residual, RoPE, embedding rows
    double activation_efficiency = 0.0;        // GeLU forward and backward
    double gated_activation_efficiency = 0.0;  // SwiGLU forward and backward
    double softmax_efficiency = 0.0;           // attention scale-mask-softmax + attention dropout
    double cross_entropy_efficiency = 0.0;     // fp32 cross-entropy over the logits
    double optimizer_efficiency = 0.0;         // Adam step
    double ssm_efficiency = 0.0;  // a hybrid model's sequence mixer kernels (Mamba-2, gated DeltaNet)
    /// The FP8 / FP4 casts of GEMM operands (quantise, transpose, scales); 0 = the recipe's
    /// value below, then the element-wise class's efficiency. Set by a trace calibration (cleave
    /// calibrate --from-trace).
    double quantize_efficiency = 0.0;
    /// The same per recipe, for the cast kernels of that recipe (costmodel quantize_time): FP8
    /// per-tensor current scaling, delayed scaling, blockwise (1x128 / 128x128), MXFP8, NVFP4;
    /// 0 = quantize_efficiency's fallback. A kernel class measured per recipe (hwprofiles/).
    double quantize_efficiency_tensorwise = 0.0;
    double quantize_efficiency_delayed = 0.0;
    double quantize_efficiency_blockwise = 0.0;
    double quantize_efficiency_mxfp8 = 0.0;
    double quantize_efficiency_nvfp4 = 0.0;
    /// FP8 GEMMs by shape (costmodel gemm_time): the tensor work at this fraction of peak_fp8
    /// (capped at tensor_clock_ceiling) plus the operands and result streamed through HBM at
    /// hbm_efficiency, a kernel class fitted to a per-shape GEMM table; 0 = the size curve
    /// gemm_efficiency_fp8 alone.
    double gemm_tensor_efficiency_fp8 = 0.0;
    /// The least time one kernel launch occupies the GPU, however little it moves (costmodel:
    /// memory-bound kernels and casts, per launch); 0 = none.
    Seconds kernel_floor;
    /// The GPU idle between two kernels queued back to back on one stream in eager execution
    /// (the front end's launch of the next), what CUDA graphs take out of their scope
    /// (costmodel/launches.hpp); 0 = not priced.
    Seconds launch_gap;
    /// Streaming multiprocessors of the GPU (compute kernels beside communication kernels that
    /// hold some run on the rest, costmodel compute_sm_share); 0 = not known, not priced.
    int64_t sm_count = 0;
    /// Multiplies the fused attention kernels' efficiency (the stack's table); 1 = as the table
    /// says. Set by a trace calibration.
    double attention_factor = 1.0;
    /// true: the attention GEMMs of all batch elements and heads run as one batched kernel
    /// (cuBLAS strided-batched), at the efficiency of the whole batch's FLOPs; false: one GEMM
    /// per batch element and head (a loop, as the CPU executor runs them), each at its own size.
    bool batched_gemm_fused = true;
    /// Board power (TDP) in watts, for the energy to train (costmodel/train_cost.hpp); 0 = unknown.
    double tdp_w = 0.0;
    /// The SM clock the dense tensor peaks assume (NVIDIA's "compute clock": 1830 MHz on H100)
    /// and the clock the tensor pipe holds under the board's power limit in steady load (a
    /// training loop, a long GEMM run; shared/reference/sustained-compute.md F08-F13). Their
    /// ratio caps every tensor-core kernel's efficiency (tensor_clock_ceiling); 0 = not known,
    /// no cap (the curves' own values apply).
    double peak_clock_mhz = 0.0;
    double sustained_clock_mhz = 0.0;
    /// Standard deviation of one GPU's sustained throughput over GPUs of this part, relative to
    /// the mean (the silicon lottery and cooling position: shared/reference/sustained-compute.md
    /// F17). In a synchronous job the slowest GPU sets the pace (costmodel straggler_factor); 0 =
    /// not measured, not priced.
    double throughput_spread = 0.0;

    bool operator==(const GpuSpec&) const = default;
};

/// Bus bandwidth of each collective inside a node when it differs from NodeSpec::intra_bw (0:
/// intra_bw). CPU MPI's all-reduce and reduce-scatter reduce on the CPU and run at a third of its
/// all-gather; NCCL on GPUs runs them all at about one busbw (nccl-tests), so the shipped profiles
/// leave these unset.
struct CollectiveBandwidths {
    BytesPerSecond all_reduce;
    BytesPerSecond all_gather;
    BytesPerSecond reduce_scatter;
    BytesPerSecond send_recv;

    bool operator==(const CollectiveBandwidths&) const = default;
};

struct NodeSpec {
    int64_t gpus_per_node = 0;  // GPUs per host (OS instance), which share its NICs
    /// GPUs joined by one NVLink fabric: a group inside one domain runs on intra_bw. 0 =
    /// gpus_per_node (an 8-GPU DGX); 72 for GB200 / GB300 NVL72 racks of 4-GPU trays.
    int64_t nvlink_domain_gpus = 0;
    IntraLink intra_link = IntraLink::nvswitch;
    BytesPerSecond intra_bw;  // achievable ring bus bandwidth per GPU inside the node (busbw)
    Seconds intra_latency;    // per-step latency of a ring collective inside the node
    BytesPerSecond pcie_bw;   // GPU-host link per GPU (PCIe; NVLink-C2C on Grace), one direction
    // Expected wait for the slowest rank at each blocking TP collective, beyond the
    // collective's own time: ranks whose compute jitters reach each collective at different
    // moments (E[max] over ranks > the mean). Measured by cleave calibrate on shared CPUs; 0
    // when absent (the shipped GPU profiles: not measured).
    Seconds sync_wait;
    // The same wait as a share of the compute between a layer's collectives: a rank stalled
    // (descheduled, interrupted) stalls every rank at the next collective, so where collectives
    // come faster than the stalls the group loses each rank's stalls, the others' included,
    // whatever the segment length (sync_wait: a per-collective constant, which assumes segments
    // as long as the calibration's). Measured by cleave calibrate on shared CPUs; 0 when absent.
    double sync_wait_fraction = 0.0;
    // Fixed cost of one local expert in one MoE layer, one micro-batch (forward + backward),
    // when the expert GEMMs are quantised (fp8 / mxfp8 / nvfp4): the per-expert quantise, scale
    // and GEMM launches of Transformer Engine's grouped GEMM, serialised with the GPU work, not
    // proportional to FLOPs. Only a calibration overlay sets it ([moe] in
    // hwprofiles/calibration/, fitted to published runs); 0 = not priced.
    Seconds quantised_expert_overhead;
    // The quantisation the overhead was fitted under ("mxfp8", "fp8-tensorwise", ...; "" =
    // unknown): a job under another recipe is priced with it but told (explain's cautions).
    std::string quantised_expert_recipe;
    // The software release the overhead above was fitted under ("25.11"; "" = not stated), and
    // the values fitted under later releases (an overlay's [[moe.from_release]]), each in force
    // from its release on: what a release changes in the expert GEMMs' launches is data.
    std::string quantised_expert_release;
    struct ExpertOverheadFrom {
        std::string release;
        Seconds value;
        std::string recipe;
        bool operator==(const ExpertOverheadFrom&) const = default;
    };
    std::vector<ExpertOverheadFrom> quantised_expert_from_release;  // sorted by release
    CollectiveBandwidths collective_bw;  // [node] <collective>_bandwidth_gbps, optional

    bool operator==(const NodeSpec&) const = default;
};

struct NetworkSpec {
    std::string kind;         // "infiniband-hdr", "roce", "ethernet-1g", ...
    BytesPerSecond inter_bw;  // achievable bus bandwidth per GPU across nodes (NIC share)
    Seconds inter_latency;    // per-step latency of a ring collective across nodes
    bool operator==(const NetworkSpec&) const = default;
};

struct ClusterSpec {
    std::string name;          // short id, e.g. "dgx-a100-80g"
    std::string display_name;  // human description
    GpuSpec gpu;
    NodeSpec node;
    NetworkSpec network;
    double price_per_gpu_hour_usd = 0.0;  // 0 = unknown
    std::string source;                   // file the profile was read from ("" when built in code)
    std::string calibration;  // the calibration overlay applied (hwprofiles/calibration/), or ""

    bool operator==(const ClusterSpec&) const = default;
};

/// The quantised expert GEMMs' fixed cost per local expert under software `release`: the
/// latest of the node's values whose release is not after it (node.quantised_expert_overhead,
/// fitted under node.quantised_expert_release, or a [[moe.from_release]] entry); the base value
/// for a release before all of them or for "" (not stated). `fitted_under` receives the release
/// of the value chosen.
[[nodiscard]] Seconds quantised_expert_overhead(const NodeSpec& n,
                                                const std::string& release,
                                                std::string* fitted_under = nullptr);

/// GPUs of one NVLink domain: node.nvlink_domain_gpus, or gpus_per_node when 0 (at least 1).
[[nodiscard]] int64_t nvlink_domain(const NodeSpec& n);

/// Dense peak of `gpu` for `d`; 0 when the GPU has no such path.
[[nodiscard]] FlopsPerSecond peak_flops(const GpuSpec& gpu, Dtype d);

/// Memory a plan's peak must fit in: the GPU's capacity. The profile's reserved memory (context,
/// allocator fragmentation) is part of every MemoryBreakdown::total, so it is not subtracted here
/// as well (it was, before 2026-12-01: the reserved memory was counted twice).
[[nodiscard]] Bytes usable_memory(const GpuSpec& gpu);

/// The most a tensor-core kernel can reach of the dense peak in steady load:
/// sustained_clock_mhz / peak_clock_mhz, 1 when either is unknown. Derivation: a kernel that
/// keeps a fraction u of the tensor pipe busy at clock f delivers u f F (F = FLOP per clock) and
/// draws about P0 + k u f; under a power cap P the clock settles at min(f_max, (P - P0) / (k u)),
/// so the rate is min(u f_max F, (P - P0) F / k): the same ceiling for every kernel that meets
/// the cap, whatever its u, and none for a kernel that does not (small GEMMs, memory-bound
/// work). Measured as the throughput of a long, power-limited GEMM run divided by F.
[[nodiscard]] double tensor_clock_ceiling(const GpuSpec& gpu);

/// GEMM efficiency at `size` FLOPs from the profile's curve (log-linear interpolation,
/// clamped), capped at tensor_clock_ceiling(). Returns 0 for an empty curve.
[[nodiscard]] double gemm_efficiency(const GpuSpec& gpu, Flops size);

/// The efficiency curve of `d`'s GEMMs: gemm_efficiency_nvfp4 / _mxfp8 / _fp8 for those
/// dtypes, each falling back (nvfp4 and mxfp8 to fp8, fp8 to the 16-bit curve) when empty.
[[nodiscard]] const std::vector<GemmEfficiencyPoint>& gemm_curve(const GpuSpec& gpu, Dtype d);

/// gemm_efficiency() on `d`'s curve (gemm_curve), capped at tensor_clock_ceiling().
[[nodiscard]] double gemm_efficiency(const GpuSpec& gpu, Flops size, Dtype d);

/// The same at ln(size), for callers that derive several sizes from one logarithm.
[[nodiscard]] double gemm_efficiency_ln(const GpuSpec& gpu, double ln_size, Dtype d);

}  // namespace cleave
