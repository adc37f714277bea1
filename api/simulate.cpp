// One iteration of a plan played event by event (simulator/) next to the closed-form estimate:
// api/cleave.hpp simulate().
#include "api/cleave.hpp"
#include "core/errors.hpp"
#include "costmodel/estimate.hpp"
#include "simulator/simulate.hpp"
#include "simulator/trace.hpp"

#include <cstdio>
#include <fstream>
#include <memory>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace cleave::api {

namespace {


SimSchedule parse_sim_schedule(const std::string& s, Schedule plan_schedule) {
    if (s.empty()) {
        return sim_schedule(plan_schedule);
    }
    if (s == "gpipe") {
        return SimSchedule::gpipe;
    }
    if (s == "interleaved") {
        return SimSchedule::interleaved;
    }
    if (s == "zb-h1") {
        return SimSchedule::zb_h1;
    }
    return SimSchedule::one_f_one_b;
}

nlohmann::json stages_json(const SimResult& r) {
    auto out = nlohmann::json::array();
    for (size_t s = 0; s < r.stages.size(); ++s) {
        const StageResult& st = r.stages[s];
        out.push_back({{"stage", s},
                       {"busy_s", st.busy.value()},
                       {"idle_s", st.idle.value()},
                       {"comm_wait_s", st.comm_wait.value()},
                       {"compute_s", st.compute_fb.value()},
                       {"bubble_ratio", st.bubble_ratio},
                       {"peak_inflight_microbatches", st.peak_inflight_microbatches},
                       {"peak_inflight_chunks", st.peak_inflight_chunks},
                       {"compute_end_s", st.compute_end.value()},
                       {"dp_end_s", st.dp_end.value()},
                       {"optimizer_start_s", st.optimizer_start.value()},
                       {"optimizer_end_s", st.optimizer_end.value()}});
    }
    return out;
}

nlohmann::json result_json(
    const Inputs& in, const Plan& plan, const SimInput& si, const SimResult& r, const Estimate& e) {
    const double sim_t = r.iteration_time.value();
    const double ana_t = e.iteration_time.value();
    return {{"plan", plan_to_json(plan, in.job)},
            {"schedule", to_string(si.schedule)},
            {"microbatches", si.microbatches},
            {"iteration_time_s", sim_t},
            {"pipeline_span_s", r.pipeline_span.value()},
            {"bubble_ratio", r.bubble_ratio},
            {"analytic_iteration_time_s", ana_t},
            {"analytic_bubble_ratio", e.bubble_ratio},
            {"difference_s", sim_t - ana_t},
            {"difference_pct", ana_t > 0.0 ? 100.0 * (sim_t - ana_t) / ana_t : 0.0},
            {"fits", e.fits},
            {"stages", stages_json(r)}};
}

void print_json_table(std::ostream& os, const nlohmann::json& j) {
    char line[256];
    os << "# cleave simulate: " << j["plan"]["flags"].get<std::string>() << ", schedule "
       << j["schedule"].get<std::string>() << ", " << j["microbatches"].get<int64_t>()
       << " micro-batches\n";
    std::snprintf(line,
                  sizeof line,
                  "# iteration %.3f ms simulated, %.3f ms closed-form (%+.1f %%); bubble %.1f %% "
                  "simulated, %.1f %% closed-form\n",
                  1e3 * j["iteration_time_s"].get<double>(),
                  1e3 * j["analytic_iteration_time_s"].get<double>(),
                  j["difference_pct"].get<double>(),
                  100.0 * j["bubble_ratio"].get<double>(),
                  100.0 * j["analytic_bubble_ratio"].get<double>());
    os << line;
    os << "# stage   busy(ms)   idle(ms)  comm_wait(ms)  bubble(%)  peak_inflight(mb)\n";
    for (const auto& s : j["stages"]) {
        std::snprintf(line,
                      sizeof line,
                      "%7lld %10.3f %10.3f %14.3f %10.1f %17.2f\n",
                      static_cast<long long>(s["stage"].get<int64_t>()),
                      1e3 * s["busy_s"].get<double>(),
                      1e3 * s["idle_s"].get<double>(),
                      1e3 * s["comm_wait_s"].get<double>(),
                      100.0 * s["bubble_ratio"].get<double>(),
                      s["peak_inflight_microbatches"].get<double>());
        os << line;
    }
}

void write_trace_file(const std::string& path, const SimInput& si, const SimResult& r) {
    std::ofstream f(path, std::ios::binary);
    if (!f) {
        throw ConfigError("--trace: cannot open '" + path + "' for writing");
    }
    write_sim_trace(f, si, r);
    f.close();
    if (!f) {
        throw ConfigError("--trace: failed writing '" + path + "'");
    }
}

}  // namespace

Simulated simulate(const Inputs& in, const Plan& plan, const SimulateOptions& o) {
    if (plan_gpus(plan) != in.job.gpus) {
        throw ConfigError("plan uses " + std::to_string(plan_gpus(plan)) +
                          " GPUs (dp*tp*pp*cp) but --gpus is " + std::to_string(in.job.gpus));
    }
    if (bidirectional(plan.schedule)) {
        throw ConfigError("--schedule dualpipe: the event simulator does not play DualPipe's "
                          "two directions yet; cleave explain prices it (bubble, overlap, memory) "
                          "in closed form");
    }
    Simulated out{in, plan, estimate(in.model, in.cluster, in.job, plan), {}, {}, o.trace};
    SimOptions opt;
    opt.record_timeline = !o.trace.empty();
    opt.dp_overlap = o.dp_overlap;
    opt.optimizer_sync = o.optimizer_sync;
    out.input = make_sim_input(in.model, in.cluster, in.job, plan, out.estimate, opt);
    out.input.schedule = parse_sim_schedule(o.schedule, plan.schedule);
    out.result = cleave::simulate(out.input, opt);
    if (!o.trace.empty()) {
        write_trace_file(o.trace, out.input, out.result);
    }
    return out;
}

nlohmann::json to_json(const Simulated& s) {
    auto j = result_json(s.inputs, s.plan, s.input, s.result, s.estimate);
    if (!s.trace.empty()) {
        j["trace"] = s.trace;
        j["trace_events"] = sim_trace_event_count(s.result);
    }
    return j;
}

void print_table(std::ostream& os, const Simulated& s) {
    print_json_table(os, to_json(s));
}

}  // namespace cleave::api
