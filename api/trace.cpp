#include "api/detail.hpp"
#include "api/trace.hpp"

#include <cstdio>
#include <ostream>
#include <string>

namespace cleave::api {

namespace {

using trace::Class;
using trace::kClasses;

using detail::format_number;

std::string pct(double part, double whole) {
    return whole > 0.0 ? format_number("%5.1f %%", 100.0 * part / whole) : "    -";
}

nlohmann::json kernel_json(const trace::KernelStats& k) {
    return {{"name", k.name},
            {"short_name", trace::short_kernel_name(k.name)},
            {"class", trace::to_string(k.cls)},
            {"classified", k.matched},
            {"library", k.library},
            {"count", k.count},
            {"total_ms", k.total_ms},
            {"mean_us", k.count > 0 ? 1e3 * k.total_ms / static_cast<double>(k.count) : 0.0},
            {"min_us", k.min_us},
            {"max_us", k.max_us}};
}

nlohmann::json range_json(const trace::RangeStats& r) {
    return {{"name", r.name},
            {"occurrences", r.occurrences},
            {"kernels", r.kernels},
            {"kernel_ms", r.kernel_ms},
            {"span_ms", r.span_ms},
            {"launched", r.launched},
            {"cpu_ms", r.cpu_ms},
            {"by_class_ms", by_class_json(r.by_class_ms)}};
}

std::string pad(std::string s, size_t w) {
    if (s.size() < w) {
        s.append(w - s.size(), ' ');
    }
    return s;
}

}  // namespace

trace::TraceSummary read_trace(const std::string& file, const TraceOptions& o) {
    const trace::ClassTable table = trace::load_class_table(o.classes);
    const trace::KinetoTrace t = trace::read_kineto(file);
    return trace::summarize(t, table, o.summary);
}

nlohmann::json by_class_json(const trace::ByClass& b) {
    nlohmann::json j = nlohmann::json::object();
    for (size_t i = 0; i < kClasses; ++i) {
        j[trace::to_string(static_cast<Class>(i))] = b[i];
    }
    return j;
}

nlohmann::json to_json(const trace::TraceSummary& s) {
    nlohmann::json j;
    j["file"] = s.file;
    j["file_bytes"] = s.file_bytes;
    char crc[16];
    std::snprintf(crc, sizeof crc, "%08x", s.crc32);
    j["crc32"] = crc;
    j["gpu"] = s.gpu;
    j["sms"] = s.sms;
    j["rank"] = s.rank;
    j["world_size"] = s.world_size;
    j["backend"] = s.backend;
    j["devices"] = s.devices;
    j["events"] = s.events;
    j["span_ms"] = s.span_ms;
    j["kernels"] = s.kernels;
    j["copies"] = s.copies;
    nlohmann::json streams = nlohmann::json::array();
    for (const trace::StreamStats& st : s.streams) {
        streams.push_back({{"id", st.id},
                           {"device", st.device},
                           {"kernels", st.kernels},
                           {"busy_ms", st.busy_ms},
                           {"kernel_ms", st.kernel_ms},
                           {"compute", st.compute},
                           {"launch_gaps", st.launch_gaps},
                           {"launch_gaps_ms", st.launch_gaps_ms},
                           {"waits", st.waits},
                           {"waits_ms", st.waits_ms},
                           {"by_class_ms", by_class_json(st.by_class_ms)}});
    }
    j["streams"] = streams;
    j["by_class_ms"] = by_class_json(s.by_class_ms);
    j["gemm_by_dtype_ms"] = s.gemm_by_dtype_ms;
    j["communication_by_op_ms"] = s.communication_by_op_ms;
    j["compute_kernel_ms"] = s.compute_kernel_ms;
    j["compute_busy_ms"] = s.compute_busy_ms;
    j["communication_busy_ms"] = s.communication_busy_ms;
    j["exposed_communication_ms"] = s.exposed_communication_ms;
    j["hidden_communication_ms"] = s.hidden_communication_ms;
    j["gpu_busy_ms"] = s.gpu_busy_ms;
    j["gpu_idle_ms"] = s.span_ms - s.gpu_busy_ms;
    j["launch_gap_limit_us"] = s.launch_gap_us;
    j["launch_gaps"] = s.launch_gaps;
    j["launch_gaps_ms"] = s.launch_gaps_ms;
    j["waits_ms"] = s.waits_ms;
    j["launched"] = s.launched;
    j["launch_threads"] = s.launch_threads;
    j["host_wait_ms"] = s.host_wait_ms;
    j["host_waits"] = s.host_waits;
    j["launch_lead_median_us"] = s.launch_lead_median_us;
    j["small_kernels"] = s.small_kernels;
    j["small_kernel_ms"] = s.small_kernel_ms;
    j["communication_sms"] = s.communication_sms;
    j["unclassified_ms"] = s.unclassified_ms;
    nlohmann::json un = nlohmann::json::array();
    for (const trace::KernelStats& k : s.unclassified) {
        un.push_back(kernel_json(k));
    }
    j["unclassified"] = un;
    nlohmann::json top = nlohmann::json::array();
    for (const trace::KernelStats& k : s.top) {
        top.push_back(kernel_json(k));
    }
    j["top_kernels"] = top;
    nlohmann::json steps = nlohmann::json::array();
    for (const trace::RangeStats& r : s.steps) {
        steps.push_back(range_json(r));
    }
    j["steps"] = steps;
    nlohmann::json phases = nlohmann::json::array();
    for (const trace::RangeStats& r : s.phases) {
        phases.push_back(range_json(r));
    }
    j["phases"] = phases;
    nlohmann::json shapes = nlohmann::json::array();
    for (const trace::GemmShape& g : s.gemm_shapes) {
        shapes.push_back({{"op", g.op},
                          {"m", g.m},
                          {"n", g.n},
                          {"k", g.k},
                          {"batch", g.batch},
                          {"dtype", g.dtype},
                          {"calls", g.calls},
                          {"kernel_ms", g.kernel_ms},
                          {"tflops", g.tflops}});
    }
    j["gemm_shapes"] = shapes;
    j["class_tables"] = s.class_files;
    return j;
}

void print_table(std::ostream& os, const trace::TraceSummary& s) {
    os << "trace " << s.file << " (" << s.file_bytes << " bytes, " << s.events << " events)\n";
    os << "GPU: " << (s.gpu.empty() ? "not stated" : s.gpu);
    if (s.sms > 0) {
        os << ", " << s.sms << " SMs";
    }
    if (s.rank >= 0) {
        os << "; rank " << s.rank << " of " << s.world_size;
    }
    os << "\n";
    os << "span " << format_number("%.2f", s.span_ms) << " ms: " << s.kernels << " kernels, " << s.copies
       << " copies on " << s.streams.size() << " streams; GPU busy "
       << format_number("%.2f", s.gpu_busy_ms) << " ms, idle " << format_number("%.2f", s.span_ms - s.gpu_busy_ms)
       << " ms\n\n";

    os << "stream  kernels  busy (ms)  kind      launch gaps (ms)  waits (ms)\n";
    for (const trace::StreamStats& st : s.streams) {
        os << pad(std::to_string(st.id) + (s.devices > 1 ? "@" + std::to_string(st.device) : ""), 8)
           << pad(std::to_string(st.kernels), 9) << pad(format_number("%.2f", st.busy_ms), 11)
           << pad(st.compute ? "compute" : "comm/copy", 10)
           << pad(st.compute ? format_number("%.2f", st.launch_gaps_ms) + " (" +
                                   std::to_string(st.launch_gaps) + ")"
                             : "-",
                  18)
           << (st.compute ? format_number("%.2f", st.waits_ms) : "-") << "\n";
    }

    os << "\nclass           time (ms)  of span\n";
    for (size_t i = 0; i < kClasses; ++i) {
        if (s.by_class_ms[i] <= 0.0) {
            continue;
        }
        os << pad(trace::to_string(static_cast<Class>(i)), 16)
           << pad(format_number("%9.2f", s.by_class_ms[i]), 11) << pct(s.by_class_ms[i], s.span_ms) << "\n";
    }
    os << "\ncompute kernels      " << format_number("%9.2f", s.compute_kernel_ms) << " ms (sum)\n";
    os << "compute busy         " << format_number("%9.2f", s.compute_busy_ms)
       << " ms (union over compute kernels)\n";
    os << "communication busy   " << format_number("%9.2f", s.communication_busy_ms) << " ms: hidden "
       << format_number("%.2f", s.hidden_communication_ms) << ", exposed "
       << format_number("%.2f", s.exposed_communication_ms) << "\n";
    os << "launch gaps          " << format_number("%9.2f", s.launch_gaps_ms) << " ms (" << s.launch_gaps
       << " gaps <= " << format_number("%g", s.launch_gap_us) << " us on compute streams; longer waits "
       << format_number("%.2f", s.waits_ms) << " ms)\n";
    os << "small kernels        " << format_number("%9.2f", s.small_kernel_ms) << " ms (" << s.small_kernels
       << " compute kernels under 10 us)\n";
    if (s.launched > 0) {
        os << "host waits           " << format_number("%9.2f", s.host_wait_ms) << " ms (" << s.host_waits
           << " gaps in compute that began before the host launched the kernel ending them; "
           << s.launched << " launches from " << s.launch_threads
           << " CPU threads, kernel start - launch return: median "
           << format_number("%.0f", s.launch_lead_median_us) << " us)\n";
    }
    if (!s.gemm_by_dtype_ms.empty()) {
        os << "GEMM by dtype       ";
        for (const auto& [dt, ms] : s.gemm_by_dtype_ms) {
            os << " " << dt << " " << format_number("%.2f", ms) << " ms";
        }
        os << "\n";
    }
    if (!s.communication_by_op_ms.empty()) {
        os << "communication by op ";
        for (const auto& [op, ms] : s.communication_by_op_ms) {
            os << " " << op << " " << format_number("%.2f", ms) << " ms";
        }
        os << "\n";
    }

    if (!s.steps.empty()) {
        os << "\nstep              kernels  span (ms)  compute (ms)  gemm (ms)  comm (ms)\n";
        for (const trace::RangeStats& r : s.steps) {
            double comp = 0.0;
            for (size_t i = 0; i < kClasses; ++i) {
                if (trace::is_compute(static_cast<Class>(i))) {
                    comp += r.by_class_ms[i];
                }
            }
            os << pad(r.name, 18) << pad(std::to_string(r.kernels), 9)
               << pad(format_number("%.2f", r.span_ms), 11) << pad(format_number("%.2f", comp), 14)
               << pad(format_number("%.2f", r.by_class_ms[static_cast<size_t>(Class::gemm)]), 11)
               << format_number("%.2f", r.by_class_ms[static_cast<size_t>(Class::communication)]) << "\n";
        }
    }
    if (!s.phases.empty()) {
        os << "\nphase (innermost annotation)  times  kernels  kernel (ms)  gemm  attention  "
              "comm    cpu (ms)  us/launch\n";
        for (const trace::RangeStats& r : s.phases) {
            // The CPU range's own time per kernel it launched: the host's cost of a launch
            // there (its Python, dispatch and launch calls), or more where the host waited.
            const bool host = r.launched > 0 && r.cpu_ms > 0.0;
            os << pad(r.name.size() > 29 ? r.name.substr(0, 26) + "..." : r.name, 30)
               << pad(std::to_string(r.occurrences), 7) << pad(std::to_string(r.kernels), 9)
               << pad(format_number("%.2f", r.kernel_ms), 13)
               << pad(format_number("%.2f", r.by_class_ms[static_cast<size_t>(Class::gemm)]), 6)
               << pad(format_number("%.2f", r.by_class_ms[static_cast<size_t>(Class::attention)]), 11)
               << pad(format_number("%.2f", r.by_class_ms[static_cast<size_t>(Class::communication)]), 8)
               << pad(host ? format_number("%.2f", r.cpu_ms) : "-", 10)
               << (host ? format_number("%.1f", 1e3 * r.cpu_ms / static_cast<double>(r.launched)) : "-")
               << "\n";
        }
    }
    if (!s.gemm_shapes.empty()) {
        os << "\nGEMM shape (record_shapes)          dtype      calls  time (ms)  TFLOP/s\n";
        size_t shown = 0;
        for (const trace::GemmShape& g : s.gemm_shapes) {
            if (++shown > 15) {
                break;
            }
            std::string shape = format_number("%.0f", g.m) + "x" + format_number("%.0f", g.n) + "x" + format_number("%.0f", g.k);
            if (g.batch > 1.0) {
                shape = format_number("%.0f", g.batch) + "*" + shape;
            }
            os << pad(g.op.substr(g.op.rfind(':') + 1) + " " + shape, 36) << pad(g.dtype, 11)
               << pad(std::to_string(g.calls), 7) << pad(format_number("%.3f", g.kernel_ms), 11)
               << format_number("%.1f", g.tflops) << "\n";
        }
    }

    os << "\ntop kernels                                          class          count  total (ms)  "
          "mean (us)\n";
    for (const trace::KernelStats& k : s.top) {
        std::string n = trace::short_kernel_name(k.name);
        if (n.size() > 52) {
            n = n.substr(0, 49) + "...";
        }
        os << pad(n, 53) << pad(trace::to_string(k.cls), 15) << pad(std::to_string(k.count), 7)
           << pad(format_number("%.3f", k.total_ms), 12)
           << format_number("%.1f", 1e3 * k.total_ms / static_cast<double>(std::max<int64_t>(k.count, 1)))
           << "\n";
    }
    os << "\nunclassified " << format_number("%.3f", s.unclassified_ms) << " ms ("
       << pct(s.unclassified_ms, s.compute_kernel_ms + s.by_class_ms[static_cast<size_t>(
                                                           Class::communication)])
       << " of kernel time)";
    if (!s.unclassified.empty()) {
        os << ": add a [[rule]] for these to a table of your own (--classes FILE):\n";
        for (const trace::KernelStats& k : s.unclassified) {
            os << "  " << format_number("%8.3f", k.total_ms) << " ms  " << trace::short_kernel_name(k.name)
               << "\n";
        }
    } else {
        os << "\n";
    }
}

}  // namespace cleave::api
