// cleave simulate MODEL CLUSTER <job flags> <plan flags> [--trace FILE] [--format table|json]:
// plays one iteration of the plan event by event (simulator/) next to the closed-form estimate.
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "cli/report.hpp"
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

namespace cleave::cli {

namespace {

struct SimulateOptions {
    JobFlags job;
    PlanFlags plan;
    std::string trace;  // "" = no trace
    std::string format = "table";
    std::string sim_schedule;  // "" = the plan's schedule
    bool no_dp_overlap = false;
    bool no_optimizer_sync = false;
};

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

void print_table(std::ostream& os, const nlohmann::json& j) {
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

void run_simulate(const SimulateOptions& o, CliContext& ctx) {
    const Inputs in = load_inputs(o.job);
    const Plan plan = make_plan(o.plan, in);
    if (plan_gpus(plan) != in.job.gpus) {
        throw ConfigError("plan uses " + std::to_string(plan_gpus(plan)) +
                          " GPUs (dp*tp*pp*cp) but --gpus is " + std::to_string(in.job.gpus));
    }
    const Estimate e = estimate(in.model, in.cluster, in.job, plan);
    SimOptions opt;
    opt.record_timeline = !o.trace.empty();
    opt.dp_overlap = !o.no_dp_overlap;
    opt.optimizer_sync = !o.no_optimizer_sync;
    SimInput si = make_sim_input(in.model, in.cluster, in.job, plan, e, opt);
    si.schedule = parse_sim_schedule(o.sim_schedule, plan.schedule);
    const SimResult r = simulate(si, opt);
    if (!o.trace.empty()) {
        write_trace_file(o.trace, si, r);
    }
    auto j = result_json(in, plan, si, r, e);
    if (!o.trace.empty()) {
        j["trace"] = o.trace;
        j["trace_events"] = sim_trace_event_count(r);
    }
    if (!e.fits) {
        ctx.err
            << "cleave simulate: warning: the plan does not fit in memory (see cleave explain)\n";
    }
    if (o.format == "json") {
        ctx.out << j.dump(2) << '\n';
    } else {
        print_table(ctx.out, j);
    }
}

}  // namespace

void setup_simulate(CLI::App& app, CliContext& ctx) {
    auto opts = std::make_shared<SimulateOptions>();
    auto* sub = app.add_subcommand(
        "simulate", "Play one iteration of a plan event by event; compare with the closed form");
    add_job_flags(*sub, opts->job);
    add_plan_flags(*sub, opts->plan);
    sub->add_option("--trace", opts->trace, "Write a Chrome trace JSON (Perfetto) to FILE");
    sub->add_option("--format", opts->format, "Output format")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    sub->add_option("--sim-schedule",
                    opts->sim_schedule,
                    "Simulate this schedule instead of the plan's (zb-h1: zero-bubble H1)")
        ->check(CLI::IsMember({"gpipe", "1f1b", "interleaved", "zb-h1"}));
    sub->add_flag("--no-dp-overlap",
                  opts->no_dp_overlap,
                  "Start DP gradient reduction only after the whole backward");
    sub->add_flag("--no-optimizer-sync",
                  opts->no_optimizer_sync,
                  "Let each stage step its optimizer without waiting for the others");
    sub->callback([opts, &ctx] { run_simulate(*opts, ctx); });
}

}  // namespace cleave::cli
