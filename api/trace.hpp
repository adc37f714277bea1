#pragma once
// `cleave trace FILE`: a PyTorch profiler trace read and summarised (trace/analyze.hpp), as
// DESIGN §3 JSON or a table.

#include "trace/analyze.hpp"

#include <nlohmann/json.hpp>

#include <iosfwd>
#include <string>

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
