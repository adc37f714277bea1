// cleave explain MODEL CLUSTER <job flags> <plan flags>: one plan priced in detail.
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "cli/report.hpp"
#include "costmodel/estimate.hpp"

#include <ostream>

#include <nlohmann/json.hpp>

namespace cleave::cli {

namespace {

struct ExplainOptions {
    JobFlags job;
    PlanFlags plan;
    std::string format = "table";
};

void run_explain(const ExplainOptions& o, CliContext& ctx) {
    const Inputs in = load_inputs(o.job);
    const Plan plan = make_plan(o.plan, in);  // throws ConfigError (exit 2) naming the constraint
    const Estimate e = estimate(in.model, in.cluster, in.job, plan);
    if (o.format == "json") {
        nlohmann::json j = estimate_to_json(in, plan, e);
        // The optimizer priced (issue 26): its states and step depend on it.
        j["optimizer"] = {{"name", to_string(in.job.optimizer)}};
        if (in.job.optimizer == Optimizer::muon) {
            j["optimizer"]["muon_num_ns_steps"] = in.job.muon_ns_steps;
            j["optimizer"]["muon_tp_mode"] = to_string(in.job.muon_tp_mode);
            j["optimizer"]["scalar_optimizer"] = "adam";
        }
        ctx.out << j.dump(2) << "\n";
    } else {
        print_estimate_table(ctx.out, in, plan, e);
    }
    ctx.exit_code = 0;
}

}  // namespace

void setup_explain(CLI::App& app, CliContext& ctx) {
    auto opt = std::make_shared<ExplainOptions>();
    auto* sub = app.add_subcommand(
        "explain", "Price one plan: memory per stage, time breakdown, traffic per group, risks");
    add_job_flags(*sub, opt->job);
    add_plan_flags(*sub, opt->plan);
    add_train_flags(*sub, opt->job.train);
    sub->add_option("--format", opt->format, "Output format")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    sub->callback([opt, &ctx] { run_explain(*opt, ctx); });
}

}  // namespace cleave::cli
