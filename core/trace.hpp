#pragma once
// Chrome trace JSON ("Trace Event Format"), as Perfetto and chrome://tracing load it:
// {"traceEvents":[...]} with complete events ("ph":"X", ts/dur in microseconds) and metadata
// events naming processes and threads ("ph":"M", process_name / thread_name / *_sort_index).
// Shared by the simulator (one process per pipeline stage, one thread per stream) and the
// executor (the same layout for measured runs).

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace cleave {

struct TraceArg {
    std::string key;
    std::variant<int64_t, double, std::string> value;

    bool operator==(const TraceArg&) const = default;
};

/// One complete event ("ph":"X").
struct TraceEvent {
    std::string name;      // e.g. "F mb3 c1"
    std::string category;  // "cat": e.g. "compute", "pp", "dp"
    int64_t pid = 0;       // process: pipeline stage
    int64_t tid = 0;       // thread: stream
    double ts_us = 0.0;    // start, microseconds
    double dur_us = 0.0;   // duration, microseconds (>= 0)
    std::vector<TraceArg> args;

    bool operator==(const TraceEvent&) const = default;
};

/// A process (tid < 0) or thread name, written as metadata with a sort index equal to its id.
struct TraceTrack {
    int64_t pid = 0;
    int64_t tid = -1;  // -1: names the process
    std::string name;

    bool operator==(const TraceTrack&) const = default;
};

struct Trace {
    std::vector<TraceTrack> tracks;
    std::vector<TraceEvent> events;

    bool operator==(const Trace&) const = default;
};

/// Streams a trace without holding it: begin() on construction, finish() closes the JSON.
/// Writes to a caller-owned stream; never prints elsewhere.
class ChromeTraceWriter {
public:
    explicit ChromeTraceWriter(std::ostream& os);
    ChromeTraceWriter(const ChromeTraceWriter&) = delete;
    ChromeTraceWriter& operator=(const ChromeTraceWriter&) = delete;

    /// Process (tid < 0) or thread name metadata.
    void track(const TraceTrack& t);

    /// One complete event.
    void event(const TraceEvent& e);

    /// Closes the array and the object; further calls are programming errors.
    void finish();

private:
    void separator();

    std::ostream& os_;
    bool first_ = true;
    bool finished_ = false;
};

/// Writes `t` as {"traceEvents":[metadata..., events...]}.
void write_chrome_trace(std::ostream& os, const Trace& t);

/// `s` as a JSON string literal, quotes included (escapes ", \ and control characters).
[[nodiscard]] std::string json_quote(std::string_view s);

}  // namespace cleave
