// cleave explain MODEL CLUSTER <job flags> <plan flags>: one plan priced in detail.
#include "api/cleave.hpp"
#include "api/trace.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"

#include <memory>
#include <optional>
#include <ostream>

namespace cleave::cli {

namespace {

struct ExplainOptions {
    JobFlags job;
    PlanFlags plan;
    std::string format = "table";
    std::string trace;  // a profiler trace to put beside the price
    std::string trace_scope = "step";
};

void run_explain(const ExplainOptions& o, CliContext& ctx) {
    const Inputs in = load_inputs(o.job);
    const Plan plan = make_plan(o.plan, in);  // throws ConfigError (exit 2) naming the constraint
    const api::Explained x = api::explain(in, plan);
    std::optional<api::TraceComparison> tc;
    if (!o.trace.empty()) {
        const api::TraceScope scope = api::parse_trace_scope(o.trace_scope);
        tc = api::compare_trace(x, api::read_trace(o.trace), scope);
    }
    if (o.format == "json") {
        nlohmann::json j = api::to_json(x);
        if (tc) {
            j["trace"] = api::to_json(*tc);
        }
        ctx.out << j.dump(2) << "\n";
    } else {
        api::print_table(ctx.out, x);
        if (tc) {
            api::print_table(ctx.out, *tc);
        }
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
    sub->add_option("--trace", opt->trace,
                    "A PyTorch profiler trace (Kineto JSON, .gz too) of this plan: print cleave's "
                    "price of what it covers beside it, class by class")
        ->check(CLI::ExistingFile);
    add_trace_scope_flag(*sub, opt->trace_scope);
    sub->callback([opt, &ctx] { run_explain(*opt, ctx); });
}

}  // namespace cleave::cli
