#pragma once
// One way to split a job: the parallel sizes and the knobs around them.

#include "core/job.hpp"
#include "core/model.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace cleave {

enum class Schedule { one_f_one_b, gpipe, interleaved };
enum class Recompute { none, selective, full };

struct Plan {
    int64_t dp = 1;
    int64_t tp = 1;
    int64_t pp = 1;
    int64_t cp = 1;   // context parallel (ring attention)
    int64_t ep = 1;   // expert parallel; carved out of dp * cp (Megatron), divides experts
    int64_t vpp = 1;  // virtual stages per pipeline rank (interleaved schedule)
    int64_t mbs = 1;  // micro-batch size in sequences
    Schedule schedule = Schedule::one_f_one_b;
    Recompute recompute = Recompute::none;
    bool sp = false;  // Megatron sequence parallelism (needs tp > 1)
    int zero =
        0;  // 0 none; 1 optimizer states (Megatron distributed optimizer); 2 + grads; 3 + weights

    bool operator==(const Plan&) const = default;
};

/// Number of micro-batches per iteration per pipeline: global_batch / (mbs * dp).
[[nodiscard]] int64_t num_microbatches(const Plan& p, const JobSpec& job);

/// GPUs the plan occupies: dp * tp * pp * cp.
[[nodiscard]] int64_t plan_gpus(const Plan& p);

[[nodiscard]] const char* to_string(Schedule s);   // "1f1b", "gpipe", "interleaved"
[[nodiscard]] const char* to_string(Recompute r);  // "none", "selective", "full"
[[nodiscard]] const char*
to_string(Dtype d);  // "fp32", "tf32", "bf16", "fp16", "fp8", "mxfp8", "nvfp4"
[[nodiscard]] const char* to_string(Fp8Recipe r);  // "delayed", "tensorwise", "blockwise"

/// Stable, human-readable key, e.g. "dp4 tp2 pp4 cp1 ep1 vpp1 mbs1 1f1b none sp0 zero1".
/// Used for deterministic tie-breaks.
[[nodiscard]] std::string to_string(const Plan& p);

/// The plan as cleave's command-line flags ("--tp 2 --pp 4 --dp 4 --mbs 1 ...").
[[nodiscard]] std::string to_flags(const Plan& p);

/// Every hard constraint the plan breaks for this model and job, one sentence each naming the
/// constraint ("tp=3 does not divide heads=32"). Empty when the plan can be expressed.
[[nodiscard]] std::vector<std::string>
check_plan(const ModelSpec& m, const JobSpec& job, const Plan& p);

}  // namespace cleave
