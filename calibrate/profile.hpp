#pragma once
// From measurements to a hardware profile: the GEMM efficiency curve, the memory bandwidth and
// the alpha-beta fit of the collectives, turned into a ClusterSpec and written as a profile TOML
// in the shipped format (docs/file-formats.md) that every command accepts as CLUSTER.

#include "calibrate/fit.hpp"
#include "calibrate/microbench.hpp"
#include "core/cluster.hpp"

#include <string>
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
};

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
    std::vector<CollectiveFit> per_collective;
    AlphaBetaFit link;  // one fit over every collective sample: the profile's intra-node link
    bool link_measured = false;
};

/// The alpha-beta view of collective samples: steps = ring_steps(op, n), wire_B = S *
/// busbw_factor(op, n) (costmodel/collectives.hpp, shared with the cost model, STYLE S9.3).
[[nodiscard]] std::vector<AlphaBetaSample>
alpha_beta_samples(const std::vector<CollectiveSample>& samples);

/// Peak, curve (efficiency = throughput / peak, samples of equal FLOPs averaged), memory and the
/// fits. Throws ConfigError when there are no GEMM or memory samples.
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
