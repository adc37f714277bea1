// cleave simulate MODEL CLUSTER <job flags> <plan flags> [--trace FILE] [--format table|json]:
// plays one iteration of the plan event by event next to the closed-form estimate
// (api::simulate()).
#include "api/cleave.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"

#include <memory>
#include <ostream>
#include <string>

namespace cleave::cli {

namespace {

struct SimulateCommand {
    JobFlags job;
    PlanFlags plan;
    std::string format = "table";
    bool no_dp_overlap = false;
    bool no_optimizer_sync = false;
    api::SimulateOptions sim;
};

void run_simulate(SimulateCommand& o, CliContext& ctx) {
    const Inputs in = load_inputs(o.job);
    const Plan plan = make_plan(o.plan, in);
    o.sim.dp_overlap = !o.no_dp_overlap;
    o.sim.optimizer_sync = !o.no_optimizer_sync;
    const api::Simulated s = api::simulate(in, plan, o.sim);
    if (!s.estimate.fits) {
        ctx.err
            << "cleave simulate: warning: the plan does not fit in memory (see cleave explain)\n";
    }
    if (o.format == "json") {
        ctx.out << api::to_json(s).dump(2) << '\n';
    } else {
        api::print_table(ctx.out, s);
    }
}

}  // namespace

void setup_simulate(CLI::App& app, CliContext& ctx) {
    auto opts = std::make_shared<SimulateCommand>();
    auto* sub = app.add_subcommand(
        "simulate", "Play one iteration of a plan event by event; compare with the closed form");
    add_job_flags(*sub, opts->job);
    add_plan_flags(*sub, opts->plan);
    sub->add_option("--trace", opts->sim.trace, "Write a Chrome trace JSON (Perfetto) to FILE");
    sub->add_option("--format", opts->format, "Output format")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    sub->add_option("--sim-schedule",
                    opts->sim.schedule,
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
