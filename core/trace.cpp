#include "core/trace.hpp"

#include "core/errors.hpp"

#include <cmath>
#include <cstdio>
#include <ostream>

namespace cleave {

namespace {

// Microseconds with nanosecond resolution; JSON has no NaN or infinity.
std::string number(double x) {
    CLEAVE_ASSERT(std::isfinite(x), "trace values must be finite");
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", x);
    return buf;
}

void write_arg_value(std::ostream& os, const std::variant<int64_t, double, std::string>& v) {
    if (const auto* i = std::get_if<int64_t>(&v)) {
        os << *i;
    } else if (const auto* d = std::get_if<double>(&v)) {
        if (std::isfinite(*d)) {
            char buf[64];
            std::snprintf(buf, sizeof buf, "%.17g", *d);
            os << buf;
        } else {
            os << "null";
        }
    } else {
        os << json_quote(std::get<std::string>(v));
    }
}

}  // namespace

std::string json_quote(std::string_view s) {
    std::string out;
    out.reserve(s.size() + 2);
    out.push_back('"');
    for (const char c : s) {
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\t':
            out += "\\t";
            break;
        case '\r':
            out += "\\r";
            break;
        default:
            if (static_cast<unsigned char>(c) < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
                out += buf;
            } else {
                out.push_back(c);
            }
        }
    }
    out.push_back('"');
    return out;
}

ChromeTraceWriter::ChromeTraceWriter(std::ostream& os)
    : os_(os) {
    os_ << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
}

void ChromeTraceWriter::separator() {
    CLEAVE_ASSERT(!finished_, "trace already finished");
    os_ << (first_ ? "\n" : ",\n");
    first_ = false;
}

void ChromeTraceWriter::track(const TraceTrack& t) {
    const bool process = t.tid < 0;
    const int64_t tid = process ? 0 : t.tid;
    separator();
    os_ << "{\"ph\":\"M\",\"pid\":" << t.pid << ",\"tid\":" << tid << ",\"name\":\""
        << (process ? "process_name" : "thread_name")
        << "\",\"args\":{\"name\":" << json_quote(t.name) << "}}";
    separator();
    os_ << "{\"ph\":\"M\",\"pid\":" << t.pid << ",\"tid\":" << tid << ",\"name\":\""
        << (process ? "process_sort_index" : "thread_sort_index")
        << "\",\"args\":{\"sort_index\":" << (process ? t.pid : t.tid) << "}}";
}

void ChromeTraceWriter::event(const TraceEvent& e) {
    separator();
    os_ << "{\"ph\":\"X\",\"name\":" << json_quote(e.name);
    if (!e.category.empty()) {
        os_ << ",\"cat\":" << json_quote(e.category);
    }
    os_ << ",\"pid\":" << e.pid << ",\"tid\":" << e.tid << ",\"ts\":" << number(e.ts_us)
        << ",\"dur\":" << number(e.dur_us < 0.0 ? 0.0 : e.dur_us);
    if (!e.args.empty()) {
        os_ << ",\"args\":{";
        for (size_t i = 0; i < e.args.size(); ++i) {
            os_ << (i == 0 ? "" : ",") << json_quote(e.args[i].key) << ':';
            write_arg_value(os_, e.args[i].value);
        }
        os_ << '}';
    }
    os_ << '}';
}

void ChromeTraceWriter::finish() {
    CLEAVE_ASSERT(!finished_, "trace already finished");
    finished_ = true;
    os_ << "\n]}\n";
}

void write_chrome_trace(std::ostream& os, const Trace& t) {
    ChromeTraceWriter w(os);
    for (const auto& track : t.tracks) {
        w.track(track);
    }
    for (const auto& e : t.events) {
        w.event(e);
    }
    w.finish();
}

}  // namespace cleave
