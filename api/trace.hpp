#pragma once
// `cleave trace FILE`: a PyTorch profiler trace read and summarised (trace/analyze.hpp), as
// DESIGN §3 JSON or a table.

#include "api/cleave.hpp"
#include "trace/analyze.hpp"

#include <nlohmann/json.hpp>

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace cleave::api {

struct TraceOptions {
    std::string classes;  // a user class table tried before the shipped one ("" = none)
    trace::SummaryOptions summary;
};

[[nodiscard]] trace::TraceSummary read_trace(const std::string& file, const TraceOptions& o = {});

/// The by-class map as JSON: every class, milliseconds.
[[nodiscard]] nlohmann::json by_class_json(const trace::ByClass& b);

[[nodiscard]] nlohmann::json to_json(const trace::TraceSummary& s);
void print_table(std::ostream& os, const trace::TraceSummary& s);

}  // namespace cleave::api

// --- explain --trace: the trace beside the price ------------------------------------------------

namespace cleave::api {

/// What the trace covers: a whole iteration (`step`), or the forward and backward of N layers of
/// one micro-batch on the plan's first full middle stage (`layers=N`, as DeepSeek's trace is).
struct TraceScope {
    int64_t layers = 0;  // 0: step
};

/// "step" or "layers=N"; throws ConfigError naming --trace-scope otherwise.
[[nodiscard]] TraceScope parse_trace_scope(const std::string& s);

struct TraceRow {
    std::string cls;
    std::optional<double> measured_ms;
    std::optional<double> predicted_ms;  // nullopt: cleave prices nothing of this class here
};

struct TraceComparison {
    std::string scope;  // "step" or "layers=N"
    std::string covers;  // what the prediction covers, in words
    std::vector<TraceRow> rows;  // the classes, then compute, exposed communication, idle, total
    std::vector<std::string> notes;
};

/// The price of what the trace covers, class by class (costmodel/kernel_classes.hpp), beside the
/// trace's measured time. Throws ConfigError where the scope cannot be priced (layers=N on a
/// hybrid model, N above the stage's layers).
[[nodiscard]] TraceComparison
compare_trace(const Explained& x, const trace::TraceSummary& s, const TraceScope& scope);

[[nodiscard]] nlohmann::json to_json(const TraceComparison& c);
void print_table(std::ostream& os, const TraceComparison& c);

}  // namespace cleave::api

// --- calibrate --from-trace: what a trace can tell, as a calibration overlay --------------------

#include "core/calibration.hpp"

namespace cleave::api {

struct TraceCalibrated {
    Calibration calibration;  // as written (profile, [gpu] values, [trace])
    std::string toml;         // the overlay file's text
    TraceComparison before;   // explain --trace without the overlay
    TraceComparison after;    // and with it
    std::vector<std::string> fitted;        // "key = value (class: measured / priced before)"
    std::vector<std::string> not_informed;  // what this trace could not inform, and why
};

/// Fits, for `plan` on `in`, what the trace measured class by class: the GEMM efficiency of the
/// job's precision (gemm_efficiency_factor_<dtype>), the fused attention rate
/// (attention_factor), and the memory-bound classes' efficiencies (quantize, norm, activation,
/// element-wise), each until cleave's price of that class is the trace's time (fixed point, at
/// most 12 rounds; efficiencies capped at 1). `trace_path` names the file in the overlay.
[[nodiscard]] TraceCalibrated calibrate_from_trace(const Inputs& in,
                                                   const Plan& plan,
                                                   const trace::TraceSummary& s,
                                                   const TraceScope& scope);

void print_table(std::ostream& os, const TraceCalibrated& c);

}  // namespace cleave::api
