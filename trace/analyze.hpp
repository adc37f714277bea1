#pragma once
// What a trace says: span, streams, time per kernel class, compute busy time (the union over
// compute kernels), communication hidden and exposed, launch gaps, top and unclassified kernels,
// per-step and per-phase tables from user annotations, and achieved TFLOP/s per GEMM shape where
// the trace recorded shapes. Pure: reads a KinetoTrace and a ClassTable, no I/O.

#include "trace/classes.hpp"
#include "trace/kineto.hpp"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cleave::trace {

using ByClass = std::array<double, kClasses>;  // milliseconds, indexed by Class

struct StreamStats {
    int32_t device = 0;
    int64_t id = 0;
    int64_t kernels = 0;
    double busy_ms = 0.0;    // union of its kernels' intervals
    double kernel_ms = 0.0;  // sum of durations
    bool compute = false;    // more compute-class than communication / copy time
    int64_t launch_gaps = 0;       // idle gaps up to the launch-gap limit between its kernels
    double launch_gaps_ms = 0.0;
    int64_t waits = 0;             // longer idle gaps (dependency waits)
    double waits_ms = 0.0;
    ByClass by_class_ms{};

    bool operator==(const StreamStats&) const = default;
};

struct KernelStats {
    std::string name;  // the kernel's name, shortened (template arguments and parameters cut)
    Class cls = Class::other;
    bool matched = false;
    std::string library;
    int64_t count = 0;
    double total_ms = 0.0;
    double min_us = 0.0;
    double max_us = 0.0;

    bool operator==(const KernelStats&) const = default;
};

/// Kernels attributed to a user annotation (by the CPU range that launched them, or, for GPU
/// annotations, by the GPU time they ran in); a name seen several times is summed.
struct RangeStats {
    std::string name;
    int64_t occurrences = 0;
    int64_t kernels = 0;
    double kernel_ms = 0.0;
    double span_ms = 0.0;  // first kernel start to last kernel end, summed over occurrences
    int64_t launched = 0;  // of kernels: those put here by the CPU range their launch ran in
    double cpu_ms = 0.0;   // a CPU range's own duration, summed over the occurrences that launched
    ByClass by_class_ms{};

    bool operator==(const RangeStats&) const = default;
};

struct GemmShape {
    std::string op;
    double m = 0.0, n = 0.0, k = 0.0, batch = 1.0;
    std::string dtype;
    int64_t calls = 0;
    double kernel_ms = 0.0;
    double tflops = 0.0;  // 2 m n k batch x calls / kernel time

    bool operator==(const GemmShape&) const = default;
};

struct SummaryOptions {
    int64_t top = 15;             // kernels listed by time
    double launch_gap_us = 10.0;  // idle gaps up to this on a compute stream count as launch gaps
    double small_kernel_us = 10.0;
};

struct TraceSummary {
    std::string file;
    uint64_t file_bytes = 0;
    uint32_t crc32 = 0;
    std::string gpu;
    int64_t sms = 0;
    int64_t rank = -1;
    int64_t world_size = 0;
    std::string backend;  // distributedInfo.backend ("cleave": written by cleave run --trace)
    int64_t devices = 0;
    int64_t events = 0;
    double span_ms = 0.0;  // first GPU activity start to last end
    int64_t kernels = 0;   // kernels (copies apart)
    int64_t copies = 0;    // memcpy / memset
    std::vector<StreamStats> streams;
    ByClass by_class_ms{};
    std::map<std::string, double> gemm_by_dtype_ms;
    std::map<std::string, double> communication_by_op_ms;
    double compute_kernel_ms = 0.0;  // sum over the compute classes
    double compute_busy_ms = 0.0;    // union of compute kernels in time
    double communication_busy_ms = 0.0;
    double exposed_communication_ms = 0.0;  // communication under no compute kernel
    double hidden_communication_ms = 0.0;
    double gpu_busy_ms = 0.0;  // union of every GPU activity
    double launch_gaps_ms = 0.0;  // over the compute streams
    int64_t launch_gaps = 0;
    double waits_ms = 0.0;
    int64_t small_kernels = 0;  // compute kernels shorter than small_kernel_us
    double small_kernel_ms = 0.0;
    double launch_gap_us = 0.0;  // the limit used
    // The host side, from the CPU launch record of each kernel (correlation id):
    int64_t launched = 0;        // kernels and copies whose launch the trace recorded
    int64_t launch_threads = 0;  // the CPU threads that launched them
    // Compute idle time (gaps in the union of a device's compute kernels) that ends at a kernel
    // the host had not yet asked for when the GPU went idle: of each gap, the part before that
    // kernel's launch call returned (launch overhead, or a CPU-side wait before the launch).
    // What CUDA graphs can take back is at most this; a gap spent on a dependency with the
    // kernel already queued is not in it, nor a side stream idle while another computes.
    double host_wait_ms = 0.0;
    int64_t host_waits = 0;  // gaps with such a part
    // Median over the compute kernels with a launch record of (start - launch call's return):
    // how far ahead of the GPU the host ran. Near the launch latency (a few us) the GPU waits
    // on the host.
    double launch_lead_median_us = 0.0;
    // Most thread blocks a communication kernel launched, when no more than the GPU's SMs:
    // the SMs communication holds while it runs (DeepEP's 20 of 132); 0 = not known.
    int64_t communication_sms = 0;
    double unclassified_ms = 0.0;
    std::vector<KernelStats> unclassified;  // by time, at most `top`
    std::vector<KernelStats> top;
    std::vector<RangeStats> steps;   // ProfilerStep#N
    std::vector<RangeStats> phases;  // other annotations, innermost
    std::vector<GemmShape> gemm_shapes;
    std::vector<std::string> class_files;
};

[[nodiscard]] TraceSummary
summarize(const KinetoTrace& t, const ClassTable& classes, const SummaryOptions& o = {});

/// Total length of the union of [start, end) intervals (sorted in place).
[[nodiscard]] double union_length(std::vector<std::pair<double, double>>& iv);

/// "void ns::kernel<T, 4>(args)" -> "ns::kernel": the name without return type, template
/// arguments or parameters (names without them are returned as they are).
[[nodiscard]] std::string short_kernel_name(const std::string& name);

}  // namespace cleave::trace
