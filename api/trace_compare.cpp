// explain --trace: cleave's price of what a profiler trace covers, class by class, beside it.
#include "api/detail.hpp"
#include "api/trace.hpp"
#include "core/errors.hpp"
#include "costmodel/collectives.hpp"
#include "costmodel/kernel_classes.hpp"

#include <algorithm>
#include <cstdio>
#include <ostream>

namespace cleave::api {

namespace {

using trace::Class;

double ms(Seconds s) { return s.value() * 1e3; }

using detail::format_number;

// One layer of the kind the plan's middle stages hold (MoE when the model has experts), and its
// split by class.
LayerCost representative_layer(const Explained& x, LayerClasses& k) {
    const Inputs& in = x.inputs;
    return layer_cost(in.model, in.cluster, in.job, x.plan, plan_links(in.cluster, x.plan),
                      in.model.moe.enabled(), LayerShape::full, &k);
}

}  // namespace

TraceScope parse_trace_scope(const std::string& s) {
    if (s == "step") {
        return {};
    }
    if (s.rfind("layers=", 0) == 0) {
        const std::string n = s.substr(7);
        if (!n.empty() && n.size() < 7 && std::all_of(n.begin(), n.end(), ::isdigit) && std::stoll(n) > 0) {
            return {std::stoll(n)};
        }
    }
    throw ConfigError("--trace-scope: expected 'step' or 'layers=N' (N > 0), got '" + s + "'");
}

TraceComparison compare_trace(const Explained& x, const trace::TraceSummary& s, const TraceScope& scope) {
    const Plan& p = x.plan;
    const Estimate& e = x.estimate;
    TraceComparison out;
    LayerClasses k;
    const LayerCost lc = representative_layer(x, k);
    const ClassTimes layer = layer_class_times(lc, k);
    ClassTimes pred;
    std::optional<double> pred_optimizer;
    std::optional<double> pred_idle;
    double pred_total = 0.0;
    double per = 1.0;  // measured figures are divided by this (ProfilerSteps in the trace)
    if (scope.layers > 0) {
        if (is_hybrid(x.inputs.model)) {
            throw ConfigError("--trace-scope layers=N prices transformer layers; this hybrid model's "
                              "stages hold several layer kinds: use --trace-scope step");
        }
        const int64_t s_mid = p.pp > 2 ? 1 : 0;
        const int64_t on_stage = stage_cost(e, s_mid, p.pp).layers;
        if (scope.layers > on_stage) {
            throw ConfigError("--trace-scope layers=" + std::to_string(scope.layers) + ": stage " +
                              std::to_string(s_mid) + " of this plan holds " + std::to_string(on_stage) +
                              " layers");
        }
        const double n = static_cast<double>(scope.layers);
        pred = layer * n;
        pred_total = ms(pred.compute() + pred.communication + pred.gaps);
        out.scope = "layers=" + std::to_string(scope.layers);
        out.covers = "forward + backward of " + std::to_string(scope.layers) + " " +
                     (x.inputs.model.moe.enabled() ? "MoE" : "transformer") +
                     " layers, one micro-batch (" + std::to_string(p.mbs) + " x " +
                     std::to_string(x.inputs.job.seq_len) + " tokens), on one GPU of stage " +
                     std::to_string(s_mid);
    } else {
        // The trace's rank's stage (Megatron order: TP, CP, DP innermost, PP outermost).
        const int64_t per_stage = std::max<int64_t>(1, x.inputs.job.gpus / std::max<int64_t>(1, p.pp));
        const int64_t st = s.rank >= 0 ? std::min(p.pp - 1, s.rank / per_stage) : 0;
        const StageCost& c = stage_cost(e, st, p.pp);
        const double m = static_cast<double>(e.microbatches);
        const auto share = [](Seconds part, Seconds whole) {
            return whole.value() > 0.0 ? part.value() / whole.value() : 0.0;
        };
        const Seconds named = k.quantize + k.norm + k.activation + k.softmax + k.permute + k.gaps;
        const Seconds rest = max(Seconds{}, lc.memory - named);
        const Seconds redo_named =
            k.recompute_gemm + k.recompute_attention + k.recompute_norm + k.recompute_activation;
        const auto mem = [&](Seconds part) { return c.memory_bound * share(part, lc.memory); };
        const auto redo = [&](Seconds part) { return c.recompute * share(part, lc.recompute); };
        pred.gemm = (c.gemm + redo(k.recompute_gemm)) * m;
        pred.attention = (c.attention + mem(k.softmax) + redo(k.recompute_attention)) * m;
        pred.quantize = mem(k.quantize) * m;
        pred.norm = (mem(k.norm) + redo(k.recompute_norm)) * m;
        pred.activation = (mem(k.activation) + redo(k.recompute_activation)) * m;
        pred.moe_permute = mem(k.permute) * m;
        pred.elementwise = (mem(rest) + redo(max(Seconds{}, lc.recompute - redo_named))) * m;
        pred.gaps = mem(k.gaps) * m;
        const Seconds comm = c.fwd_comm + c.bwd_comm;
        pred.other = max(Seconds{}, c.fwd + c.bwd - c.gemm - c.attention - c.memory_bound - c.recompute - comm) * m;
        const TimeBreakdown& t = e.time;
        pred.communication = t.tp_comm + t.cp_comm + t.ep_comm + t.pp_comm + t.dp_comm;
        pred_optimizer = ms(t.optimizer);
        pred_idle = ms(t.bubble);
        pred_total = ms(e.iteration_time);
        per = std::max<double>(1.0, static_cast<double>(s.steps.size()));
        out.scope = "step";
        out.covers = "one iteration of stage " + std::to_string(st) +
                     (s.rank >= 0 ? " (the trace's rank " + std::to_string(s.rank) + ")" : "") + ", " +
                     std::to_string(e.microbatches) + " micro-batches";
        if (s.steps.size() > 1) {
            out.notes.push_back("the trace holds " + std::to_string(s.steps.size()) +
                                " profiler steps: measured figures are per step");
        }
    }
    const auto meas = [&](Class c) { return s.by_class_ms[static_cast<size_t>(c)] / per; };
    const auto row = [&](const char* name, std::optional<double> m, std::optional<double> pr) {
        out.rows.push_back({name, m, pr});
    };
    row("gemm", meas(Class::gemm), ms(pred.gemm));
    row("attention", meas(Class::attention), ms(pred.attention));
    row("quantize", meas(Class::quantize), ms(pred.quantize));
    row("norm", meas(Class::norm), ms(pred.norm));
    row("activation", meas(Class::activation), ms(pred.activation));
    row("elementwise", meas(Class::elementwise), ms(pred.elementwise));
    row("moe_permute", meas(Class::moe_permute), ms(pred.moe_permute));
    // Not a kernel class: the compute streams' short idle gaps (cleave trace's launch gaps).
    row("launch gaps", s.launch_gaps_ms / per, ms(pred.gaps));
    // Classes cleave prices inside others or not at all in this scope.
    for (const Class c : {Class::convolution, Class::embedding, Class::loss, Class::memcpy}) {
        if (meas(c) > 0.0) {
            row(trace::to_string(c), meas(c), std::nullopt);
        }
    }
    if (scope.layers > 0) {
        if (meas(Class::optimizer) > 0.0) {
            row("optimizer", meas(Class::optimizer), std::nullopt);
        }
    } else {
        row("optimizer", meas(Class::optimizer), pred_optimizer);
    }
    row("other", meas(Class::other), ms(pred.other));
    double measured_compute = s.compute_kernel_ms / per;
    row("compute", measured_compute, ms(pred.compute()) + pred_optimizer.value_or(0.0));
    row("communication", s.by_class_ms[static_cast<size_t>(Class::communication)] / per, std::nullopt);
    row("exposed_communication", s.exposed_communication_ms / per, ms(pred.communication));
    row("idle", (s.span_ms - s.gpu_busy_ms) / per, pred_idle);
    row("total", s.span_ms / per, pred_total);
    if (ms(pred.other) > 0.005) {
        out.notes.push_back("cleave's 'other' is the fitted per-expert cost of quantised MoE GEMMs "
                            "(hwprofiles/calibration), which has no kernel class of its own");
    }
    out.notes.push_back("communication: the trace's collective kernels run " +
                        format_number("%.2f", s.by_class_ms[static_cast<size_t>(Class::communication)] / per) +
                        " ms, " + format_number("%.2f", s.hidden_communication_ms / per) +
                        " of them under compute; cleave prices the exposed part");
    return out;
}

nlohmann::json to_json(const TraceComparison& c) {
    nlohmann::json m = nlohmann::json::object();
    nlohmann::json p = nlohmann::json::object();
    nlohmann::json unpriced = nlohmann::json::array();
    for (const TraceRow& r : c.rows) {
        m[r.cls] = r.measured_ms ? nlohmann::json(*r.measured_ms) : nlohmann::json(nullptr);
        p[r.cls] = r.predicted_ms ? nlohmann::json(*r.predicted_ms) : nlohmann::json(nullptr);
        if (!r.predicted_ms) {
            unpriced.push_back(r.cls);
        }
    }
    return {{"scope", c.scope}, {"covers", c.covers}, {"measured_ms", m},
            {"predicted_ms", p}, {"not_priced", unpriced}, {"notes", c.notes}};
}

void print_table(std::ostream& os, const TraceComparison& c) {
    os << "\nThe trace beside the price (--trace-scope " << c.scope << "): " << c.covers << "\n";
    os << "  class                  measured (ms)  cleave (ms)  cleave - measured\n";
    for (const TraceRow& r : c.rows) {
        std::string name = r.cls;
        name.resize(std::max<size_t>(name.size(), 23), ' ');
        os << "  " << name << (r.measured_ms ? format_number("%13.2f", *r.measured_ms) : std::string(13, ' '));
        if (!r.predicted_ms) {
            os << "   not priced\n";
            continue;
        }
        os << format_number("%13.2f", *r.predicted_ms);
        if (r.measured_ms && *r.measured_ms > 0.0) {
            const double d = *r.predicted_ms - *r.measured_ms;
            os << format_number("%11.2f", d) << format_number(" (%+.1f %%)", 100.0 * d / *r.measured_ms);
        }
        os << "\n";
    }
    for (const std::string& n : c.notes) {
        os << "  " << n << "\n";
    }
}

}  // namespace cleave::api
