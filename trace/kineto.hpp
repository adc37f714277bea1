#pragma once
// Reads one rank's PyTorch profiler trace (Kineto's Chrome-trace JSON, plain or gzipped) as a
// stream: a scanner cuts the `traceEvents` array into one event at a time and simdjson's
// On-Demand parser reads each without building a document, so memory holds the few fields kept
// per GPU event, not the file. Kept: GPU kernels, memcpy / memset, the CPU launches that name
// them (correlation -> thread and time), user annotations (CPU and GPU) and the shapes of matmul
// ops recorded with record_shapes. Bad input throws ConfigError naming the file, the line and
// column where it breaks, and what is missing.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace cleave::trace {

/// A GPU activity: a kernel, or a copy-engine memcpy / memset (is_copy).
struct GpuEvent {
    uint32_t name = 0;  // index into KinetoTrace::names
    int32_t device = 0;
    int64_t stream = 0;
    double ts_us = 0.0;   // start, microseconds since the trace's first GPU event
    double dur_us = 0.0;  // >= 0
    int64_t correlation = -1;  // the CPU launch's correlation id; -1 = none
    int64_t external_id = -1;  // the CPU op's "External id"; -1 = none
    bool is_copy = false;
    int32_t blocks = 0;  // thread blocks launched (the grid's product); 0 = not recorded

    bool operator==(const GpuEvent&) const = default;
};

/// A host-side launch (cuda_runtime / cuda_driver, hipLaunchKernel...): where and when the CPU
/// asked for the kernel of the same correlation id.
struct Launch {
    int64_t pid = 0;
    int64_t tid = 0;
    double ts_us = 0.0;
    double dur_us = 0.0;  // the call's own duration: the kernel is queued when it returns

    bool operator==(const Launch&) const = default;
};

/// A user range: `record_function` / `ProfilerStep#N` on a CPU thread, or its GPU projection.
struct Annotation {
    std::string name;
    int64_t pid = 0;
    int64_t tid = 0;
    double ts_us = 0.0;
    double dur_us = 0.0;
    bool on_gpu = false;  // cat gpu_user_annotation: ts/dur on the GPU timeline

    bool operator==(const Annotation&) const = default;
};

/// A matmul op with the shapes record_shapes wrote ("Input Dims"): C[m x n] = A[m x k] B[k x n],
/// `batch` of them (bmm / baddbmm), in `dtype` (the first input's "Input type").
struct MatmulOp {
    std::string op;  // aten::mm, aten::addmm, aten::bmm, aten::_scaled_mm, ...
    double m = 0.0;
    double n = 0.0;
    double k = 0.0;
    double batch = 1.0;
    std::string dtype;

    bool operator==(const MatmulOp&) const = default;
};

struct KinetoTrace {
    std::string file;
    uint64_t file_bytes = 0;
    uint32_t crc32 = 0;  // zlib crc32 of the file as stored (gzipped or not)
    double base_ts_us = 0.0;  // the absolute timestamp that GpuEvent::ts_us counts from
    std::vector<std::string> names;  // interned kernel names
    std::vector<GpuEvent> gpu;
    std::unordered_map<int64_t, Launch> launches;  // by correlation id
    std::vector<Annotation> annotations;
    std::unordered_map<int64_t, MatmulOp> matmuls;  // by External id
    // deviceProperties of the device the kernels ran on (the first listed when unknown).
    std::string gpu_name;
    int64_t gpu_sms = 0;
    int64_t rank = -1;
    int64_t world_size = 0;
    std::string backend;  // distributedInfo.backend: "nccl", "cleave" (cleave run --trace), ...
    int64_t events = 0;  // every event in traceEvents
    std::unordered_map<std::string, int64_t> categories;  // events per "cat", for diagnostics
};

/// Reads FILE (gzip detected by its magic bytes). Throws ConfigError: file missing, gzip
/// garbage or truncated, JSON that breaks (line:column), no traceEvents, or no GPU events.
[[nodiscard]] KinetoTrace read_kineto(const std::string& path);

/// The same from text in memory (tests, fuzzing); `name` stands for the file in messages.
[[nodiscard]] KinetoTrace read_kineto_text(const std::string& text, const std::string& name);

}  // namespace cleave::trace
