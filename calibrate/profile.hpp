#pragma once
// From measurements to a hardware profile: the GEMM efficiency curve, the memory bandwidth and
// the alpha-beta fit of the collectives, turned into a ClusterSpec and written as a profile TOML
// in the shipped format (docs/file-formats.md) that every command accepts as CLUSTER.

#include "calibrate/fit.hpp"
#include "calibrate/microbench.hpp"
#include "core/cluster.hpp"
#include "costmodel/compute.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cleave::calibrate {

/// Everything `cleave calibrate` measured, plus where.
struct Calibration {
    std::string backend;  // "cpu" or "cuda"
    std::string device;   // Backend::device_name()
    std::string host;     // host name of world rank 0
    int64_t ranks = 0;
    int64_t ranks_per_host = 0;
    double host_memory_B = 0.0;  // physical memory of rank 0's host
    bool quick = false;
    std::vector<GemmSample> gemm;
    std::vector<StreamSample> memory;
    std::vector<StreamSample> kernels;  // the executor's memory-bound kernels
    std::vector<CollectiveSample> collectives;
    SyncSample sync;  // no segments on one rank
};

/// The mean of two calibrations of the same machine with the same sweep (`cleave validate
/// --calibrate` brackets each run by the calibrations just before and just after it): every
/// sample's time is the mean of the two; everything else is `a`'s. Throws ConfigError when the
/// two sweeps differ (another sample list, shape, kernel or size).
[[nodiscard]] Calibration mean_of(const Calibration& a, const Calibration& b);

/// The memory-bound kernel class a bench_kernels sample measures: norm_* -> norm,
/// bias_residual_* -> elementwise, gelu_* -> activation, swiglu_* -> gated_activation,
/// attention -> softmax,
/// cross_entropy -> cross_entropy, adam -> optimizer, ssm -> ssm; nullopt for any other name.
[[nodiscard]] std::optional<KernelClass> kernel_class_of(std::string_view kernel);

/// One measured kernel class: the bytes the cost model charges its samples over their time.
struct ClassBandwidth {
    KernelClass cls = KernelClass::norm;
    BytesPerSecond bw;
    double efficiency = 0.0;  // bw / Summary::memory_peak

    bool operator==(const ClassBandwidth&) const = default;
};

/// Seconds the cost model charges the GEMMs of bench_kernels' "attention" sample (forward:
/// Q K^T and P V, backward twice that; gemm_time with the measured peak and curve, one GEMM per
/// batch element and head on the cpu backend, one batched kernel otherwise).
[[nodiscard]] double attention_gemm_s(const std::string& backend,
                                      FlopsPerSecond peak,
                                      const std::vector<GemmEfficiencyPoint>& curve);

/// Bytes per token the cost model charges the ssm class (costmodel/compute.cpp mamba_traffic,
/// forward + backward) for a Mamba-2 layer of ssm_bench_shape at 4-byte activations, t = 1: the
/// bytes of bench_kernels' "ssm" sample.
[[nodiscard]] double ssm_bench_bytes_per_token();

/// Seconds the cost model charges the SSD scan's products of that sample (mamba_gemms' four
/// products at the measured peak and curve, forward once and backward twice, as
/// mamba_layer_cost prices them).
[[nodiscard]] double ssm_gemm_s(const std::string& backend,
                                FlopsPerSecond peak,
                                const std::vector<GemmEfficiencyPoint>& curve);

struct CollectiveFit {
    Collective op = Collective::all_reduce;
    AlphaBetaFit fit;
};

/// What the profile is built from.
struct Summary {
    FlopsPerSecond peak;  // the best GEMM throughput of the sweep (CPUs have no datasheet peak
                          // the executor's Eigen path reaches; the curve is relative to this)
    std::vector<GemmEfficiencyPoint> curve;  // strictly increasing sizes
    BytesPerSecond memory_peak;              // best streaming kernel, per rank, all ranks at once
    BytesPerSecond kernels_bw;               // executor kernels: cost-model bytes / measured time
    double memory_efficiency = 1.0;          // kernels_bw / memory_peak, at most 1
    std::vector<ClassBandwidth> classes;     // per kernel class, in KernelClass order
    double attention_s = 0.0;                // the "attention" sample, and the cost model's
    double attention_gemm_s = 0.0;           // price of its GEMMs (its softmax: the rest)
    double ssm_s = 0.0;                      // the "ssm" sample, and the cost model's price of
    double ssm_gemm_s = 0.0;                 // the scan's products (the ssm class: the rest)
    std::vector<CollectiveFit> per_collective;
    double sync_wait_fraction = 0.0;  // sync.wait_fraction(): NodeSpec::sync_wait_fraction
    AlphaBetaFit link;  // one fit over every collective sample: the profile's intra-node link
    bool link_measured = false;
};

/// The alpha-beta view of collective samples: steps = ring_steps(op, n), wire_B = S *
/// busbw_factor(op, n) (costmodel/collectives.hpp, shared with the cost model, STYLE S9.3).
[[nodiscard]] std::vector<AlphaBetaSample>
alpha_beta_samples(const std::vector<CollectiveSample>& samples);

/// Peak, curve (efficiency = throughput / peak, samples of equal FLOPs averaged), memory, the
/// kernel classes (cost-model bytes over time per class; the attention sample less the price of
/// its GEMMs counts as softmax, and is left out when that leaves under 5% of it) and the fits.
/// memory_peak is the best of the streams, the classes and their mix, so every efficiency is at
/// most 1. Throws ConfigError when there are no GEMM or memory samples.
[[nodiscard]] Summary summarize(const Calibration& c);

/// The profile as a value: gpu = one rank (peak fp32 = summary.peak, the curve, HBM = memory
/// bandwidth), node = the ranks of one host (intra link = the collective fit), network = the
/// same fit (one host: nothing crosses a network).
[[nodiscard]] ClusterSpec
to_cluster(const Calibration& c, const Summary& s, const std::string& name);

struct Provenance {
    std::string date_utc;  // "2026-11-29T22:10:00Z"
    std::string command;   // the command line that measured it
};

/// Profile TOML text for `cluster`, every number commented with what measured it.
[[nodiscard]] std::string profile_toml(const Calibration& c,
                                       const Summary& s,
                                       const ClusterSpec& cluster,
                                       const Provenance& p);

}  // namespace cleave::calibrate
