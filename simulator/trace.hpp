#pragma once
// A simulated iteration as Chrome trace JSON (core/trace.hpp): one process per pipeline stage,
// one thread per stream, complete events named by phase, micro-batch and chunk ("F mb3 c1").

#include "simulator/simulate.hpp"

#include <cstdint>
#include <iosfwd>

namespace cleave {

/// Writes `res` (simulated with SimOptions::record_timeline) as {"traceEvents":[...]}.
/// Times are microseconds from the start of the iteration. `in` supplies the TP/CP share of
/// each op (event args). Throws ConfigError when res holds no timeline.
void write_sim_trace(std::ostream& os, const SimInput& in, const SimResult& res);

/// Number of complete ("ph":"X") events write_sim_trace() writes for `res`.
[[nodiscard]] int64_t sim_trace_event_count(const SimResult& res);

}  // namespace cleave
