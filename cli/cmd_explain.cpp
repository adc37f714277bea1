// cleave explain MODEL CLUSTER <job flags> <plan flags>: one plan priced in detail.
#include "api/cleave.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"

#include <memory>
#include <ostream>

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
    const api::Explained x = api::explain(in, plan);
    if (o.format == "json") {
        ctx.out << api::to_json(x).dump(2) << "\n";
    } else {
        api::print_table(ctx.out, x);
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
