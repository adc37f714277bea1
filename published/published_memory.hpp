#pragma once
// The memory check against measured peaks (shared/validation/public_memory.csv): each row's
// model, job and plan as cleave understands them, and the peak it predicts in the row's own
// metric (torch max_memory_allocated or max_memory_reserved). Parsing only: the caller reads
// the file and loads the hardware profiles and stacks.

#include "core/cluster.hpp"
#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "core/stack.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cleave {

/// What a row measured: PyTorch's peak allocated (tensors) or peak reserved (the caching
/// allocator's segments).
enum class MemoryMetric { allocated, reserved };

[[nodiscard]] const char* to_string(MemoryMetric m);

struct MemoryCase {
    int64_t row_id = 0;
    std::string source_key;
    std::string model_name;
    std::string confidence;
    std::string profile;  // shipped hardware profile ("" = none)
    std::string stack;    // shipped software stack ("" = none)
    bool expressible = false;
    std::string reason;  // why not expressible, or the assumptions made
    MemoryMetric metric = MemoryMetric::allocated;
    // The row's own stack settings, put over the shipped stack by load_memory_case_stack().
    int torch_compile = -1;           // torch.compile of the blocks: 1 on, 0 off, -1 the stack's
    LossImpl loss = LossImpl::unset;  // the loss as the row's release computes it; unset = stack's
    int64_t loss_chunks = 0;          // 0 = the stack's
    std::string release;              // the stack release the row ran (YY.MM); "" = the stack's
    double measured_gib = 0.0;
    ModelSpec model;
    JobSpec job;
    Plan plan;
};

/// True when the CSV's header is public_memory.csv's (it has a `memory_metric` column).
[[nodiscard]] bool is_memory_csv(std::string_view csv);

/// Parses public_memory.csv. Throws ConfigError naming `source_name`, the line and the column
/// when the header lacks a needed column or a number does not parse.
[[nodiscard]] std::vector<MemoryCase> parse_public_memory(std::string_view csv,
                                                          const std::string& source_name);

struct MemoryResult {
    double allocated_gib = 0.0;  // the peak stage's allocated bytes
    double reserved_gib = 0.0;   // ... and what the caching allocator reserves for them
    double predicted_gib = 0.0;  // the one of the two the row measured
    double error_pct = 0.0;      // (predicted - measured) / measured x 100
    int64_t stage = 0;           // the peak stage
    double total_gib = 0.0;      // what the fit check compares (reserved + profile's reservation)
    double usable_gib = 0.0;     // the GPU's memory
};

/// Loads the case's shipped stack (MemoryCase::stack) into its job with the row's own settings
/// on top (torch.compile, the loss as its release computes it), and the stack's grad dtype
/// where the row fixed none. Throws ConfigError when the stack is not shipped.
void load_memory_case_stack(MemoryCase& c);

/// The prediction of an expressible case on `cluster` (its stack already in case.job).
[[nodiscard]] MemoryResult evaluate_memory(const MemoryCase& c, const ClusterSpec& cluster);

}  // namespace cleave
