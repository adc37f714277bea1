// calibrate --from-trace: the values a profiler trace informs, fitted so that cleave's price of
// each kernel class equals the trace's time for the plan it recorded, as a calibration overlay.
#include "api/detail.hpp"
#include "api/trace.hpp"
#include "core/errors.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/precision.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>

namespace cleave::api {

namespace {

using detail::format_number;

const TraceRow* find_row(const TraceComparison& c, const std::string& cls) {
    for (const TraceRow& r : c.rows) {
        if (r.cls == cls) {
            return &r;
        }
    }
    return nullptr;
}

// measured / predicted of a group of classes, or nullopt when either side has nothing.
std::optional<double> ratio(const TraceComparison& c, const std::vector<std::string>& classes) {
    double m = 0.0;
    double p = 0.0;
    for (const std::string& cls : classes) {
        const TraceRow* r = find_row(c, cls);
        if (r != nullptr && r->measured_ms && r->predicted_ms) {
            m += *r->measured_ms;
            p += *r->predicted_ms;
        }
    }
    if (m <= 0.0 || p <= 0.0) {
        return std::nullopt;
    }
    return m / p;
}

// The overlay key of d's GEMM curve: a quantised dtype's own, else the 16-bit curve (bf16, fp16;
// fp32 and tf32 read it too).
std::string dtype_key(Dtype d) {
    return is_quantised(d) ? to_string(d) : "bf16";
}

struct Knob {
    std::string key;   // the overlay key
    std::vector<std::string> cls;  // the trace classes priced at it (fitted to their sum)
    double value = 1.0;
    bool efficiency = true;  // a fraction of HBM bandwidth (capped at 1) or a factor
    bool capped = false;
    bool used = false;
};

}  // namespace

TraceCalibrated calibrate_from_trace(const Inputs& in, const Plan& plan, const trace::TraceSummary& s,
                                     const TraceScope& scope) {
    TraceCalibrated out;
    const GpuSpec& g0 = in.cluster.gpu;
    const bool gated = in.model.mlp == MlpKind::swiglu;
    const std::string dt = dtype_key(in.job.compute);
    std::vector<Knob> knobs = {
        {"gemm_efficiency_factor_" + dt, {"gemm"}, 1.0, false},
        {"attention_factor", {"attention"}, 1.0, false},
        {"quantize_efficiency", {"quantize"},
         g0.quantize_efficiency > 0.0 ? g0.quantize_efficiency : kernel_efficiency(g0, KernelClass::elementwise)},
        {"norm_efficiency", {"norm"}, kernel_efficiency(g0, KernelClass::norm)},
        {gated ? "gated_activation_efficiency" : "activation_efficiency", {"activation"},
         kernel_efficiency(g0, gated ? KernelClass::gated_activation : KernelClass::activation)},
        // The MoE permutation is priced at the element-wise rate: fitted together.
        {"elementwise_efficiency", {"elementwise", "moe_permute"},
         kernel_efficiency(g0, KernelClass::elementwise)},
    };
    // Materialised attention is its score GEMMs and the softmax + dropout passes: both scaled
    // by the attention class's one ratio, so the class moves as one rate.
    if (in.job.stack.attention != AttentionImpl::fused) {
        knobs.push_back({"softmax_efficiency", {"attention"}, kernel_efficiency(g0, KernelClass::softmax)});
    }
    // The GEMM factor's ceiling: the curve's best point at efficiency 1 (apply_calibration caps
    // every point there, so a larger factor would change nothing).
    double best = 0.0;
    for (const GemmEfficiencyPoint& pt : gemm_curve(g0, in.job.compute)) {
        best = std::max(best, pt.efficiency);
    }
    const double gemm_ceiling = best > 0.0 ? 1.0 / best : 1.0;
    const auto overlay = [&](bool with_trace) {
        Calibration c;
        c.source = "calibrate --from-trace " + s.file;
        c.profile = in.cluster.name;
        c.fitted_on = std::filesystem::path(s.file).filename().string();
        c.fitted_on_all = {c.fitted_on};
        c.stack = in.job.stack.name;
        c.method = "cleave calibrate --from-trace, --trace-scope " +
                   (scope.layers > 0 ? "layers=" + std::to_string(scope.layers) : std::string("step")) +
                   ": each value brings cleave's price of its kernel class to the trace's time for "
                   "the plan " + to_string(plan);
        for (const Knob& k : knobs) {
            if (!k.used) {
                continue;
            }
            if (k.key.rfind("gemm_efficiency_factor_", 0) == 0) {
                c.gemm_factor_by_dtype.emplace_back(dt, k.value);
            } else if (k.key == "attention_factor") {
                c.attention_factor = k.value;
            } else {
                c.efficiencies.emplace_back(k.key, k.value);
            }
        }
        if (with_trace) {
            char crc[16];
            std::snprintf(crc, sizeof crc, "%08x", s.crc32);
            c.trace_file = s.file;
            c.trace_crc32 = crc;
        }
        return c;
    };
    const auto price = [&](const Calibration* cal) {
        Inputs x = in;
        if (cal != nullptr) {
            apply_calibration(*cal, x.cluster);
        }
        return compare_trace(explain(x, plan), s, scope);
    };
    out.before = price(nullptr);
    for (Knob& k : knobs) {
        k.used = ratio(out.before, k.cls).has_value();
    }
    // Fixed point: time ~ 1 / value for every knob, but the classes share kernels (recomputed
    // norms at the element-wise rate, GEMM curves capped at 1), so a few rounds.
    TraceComparison now = out.before;
    for (int round = 0; round < 12; ++round) {
        bool moved = false;
        for (Knob& k : knobs) {
            if (!k.used) {
                continue;
            }
            const std::optional<double> r = ratio(now, k.cls);
            if (!r || std::abs(*r - 1.0) < 0.002) {
                continue;
            }
            double v = k.value / *r;
            const double ceiling = k.efficiency ? 1.0 : k.cls.front() == "gemm" ? gemm_ceiling : 1e6;
            k.capped = v > ceiling;
            v = std::min(v, ceiling);
            moved = moved || std::abs(v - k.value) > 1e-6 * k.value;
            k.value = v;
        }
        const Calibration c = overlay(false);
        now = price(&c);
        if (!moved) {
            break;
        }
    }
    out.calibration = overlay(true);
    out.after = now;
    for (const Knob& k : knobs) {
        double m = 0.0;
        double p = 0.0;
        std::string names;
        for (const std::string& cls : k.cls) {
            if (const TraceRow* r = find_row(out.before, cls)) {
                m += r->measured_ms.value_or(0.0);
                p += r->predicted_ms.value_or(0.0);
            }
            names += (names.empty() ? "" : " + ") + cls;
        }
        if (k.used) {
            out.fitted.push_back(k.key + " = " + format_number("%.4g", k.value) + "  (" + names + ": measured " +
                                 format_number("%.2f", m) + " ms, priced " + format_number("%.2f", p) + " ms before" +
                                 (k.capped ? "; at its ceiling (efficiency 1): still off" : "") + ")");
        } else {
            out.not_informed.push_back(k.key + ": the trace has no " + names +
                                       " kernels, or cleave prices none in this scope");
        }
    }
    // What no trace of this kind informs, and what this one measured without a key to put it in.
    for (const char* d : {"bf16", "fp8", "mxfp8", "nvfp4"}) {
        if (d != dt) {
            out.not_informed.push_back(std::string("gemm_efficiency_factor_") + d +
                                       ": the plan's GEMMs are " + dt);
        }
    }
    const bool softmax_fitted = std::any_of(knobs.begin(), knobs.end(), [](const Knob& k) {
        return k.used && k.key == "softmax_efficiency";
    });
    out.not_informed.push_back(std::string("hbm_efficiency, ") +
                               (softmax_fitted ? "" : "softmax_efficiency, ") +
                               "cross_entropy_efficiency, optimizer_efficiency, ssm_efficiency: "
                               "their kernels are not priced in this scope or not in the trace");
    out.not_informed.push_back("moe_permute apart from elementwise: both are priced at elementwise_efficiency, fitted to their sum");
    out.not_informed.push_back("communication: a trace shows collective kernels' residency, not the "
                               "link bandwidth; cleave calibrate measures links");
    out.not_informed.push_back(
        "launch floor: the trace's " + std::to_string(s.launch_gaps) + " launch gaps (" +
        format_number("%.2f", s.launch_gaps_ms) + " ms) and " + std::to_string(s.small_kernels) +
        " kernels under 10 us are recorded in [trace]; cleave prices no per-launch cost");
    if (s.communication_sms > 0) {
        out.not_informed.push_back(
            "communication SMs: its collectives held " + std::to_string(s.communication_sms) +
            " SMs (recorded in [trace]); the GEMM factor above includes running on the rest");
    }
    out.calibration.not_informed = out.not_informed;

    std::ostringstream t;
    t << "# FITTED to a profiler trace, not datasheet values: written by cleave calibrate --from-trace.\n"
      << "# Trace " << s.file << " (" << s.file_bytes << " bytes, crc32 " << out.calibration.trace_crc32
      << "), GPU " << (s.gpu.empty() ? "not stated" : s.gpu) << ".\n"
      << "# Plan " << to_string(plan) << ", scope " << out.before.scope << ": " << out.before.covers << ".\n"
      << "# Apply with --calibration FILE on any pricing command (the profile named below only).\n\n"
      << "[calibration]\n"
      << "profile = \"" << out.calibration.profile << "\"\n"
      << "fitted_on = \"" << out.calibration.fitted_on << "\"\n"
      << "stack = \"" << out.calibration.stack << "\"\n"
      << "method = \"" << out.calibration.method << "\"\n\n[gpu]\n";
    for (const Knob& k : knobs) {
        if (k.used) {
            t << k.key << " = " << format_number("%.6g", k.value) << "\n";
        }
    }
    t << "\n[trace]\n"
      << "file = \"" << s.file << "\"\n"
      << "crc32 = \"" << out.calibration.trace_crc32 << "\"\n"
      << "bytes = " << s.file_bytes << "\n"
      << "gpu = \"" << s.gpu << "\"\n"
      << "scope = \"" << out.before.scope << "\"\n"
      << "span_ms = " << format_number("%.4f", s.span_ms) << "\n"
      << "launch_gaps = " << s.launch_gaps << "\n"
      << "launch_gaps_ms = " << format_number("%.4f", s.launch_gaps_ms) << "\n"
      << "small_kernel_ms = " << format_number("%.4f", s.small_kernel_ms) << "\n"
      << "communication_sms = " << s.communication_sms << "\n"
      << "not_informed = [\n";
    for (const std::string& n : out.not_informed) {
        std::string e;
        for (char ch : n) {
            e += ch == '"' ? std::string("\\\"") : std::string(1, ch);
        }
        t << "  \"" << e << "\",\n";
    }
    t << "]\n";
    out.toml = t.str();
    return out;
}

void print_table(std::ostream& os, const TraceCalibrated& c) {
    os << "Fitted to the trace (" << c.before.scope << ": " << c.before.covers << "):\n";
    for (const std::string& f : c.fitted) {
        os << "  " << f << "\n";
    }
    os << "Not informed by this trace:\n";
    for (const std::string& n : c.not_informed) {
        os << "  " << n << "\n";
    }
    os << "\nBefore";
    print_table(os, c.before);
    os << "\nAfter";
    print_table(os, c.after);
}

}  // namespace cleave::api
