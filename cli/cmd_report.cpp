// cleave report MODEL CLUSTER|--clusters A B ... <job flags> -o FILE.html: the plan search, the
// chosen plan's memory, time and simulated timeline, and the cost to train, as one
// self-contained HTML page (api::report(), docs/report.md).
#include "api/cleave.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "cli/progress.hpp"

#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace cleave::cli {

namespace {

struct ReportOptions {
    JobFlags job;
    std::vector<std::string> clusters;
    std::string objective = "time";
    int64_t top = 5;
    std::string out;
};

void run_report(const ReportOptions& o, CliContext& ctx) {
    std::vector<std::string> clusters = o.clusters;
    if (!o.job.cluster.empty()) {
        clusters.insert(clusters.begin(), o.job.cluster);
    }
    const auto bar = [&ctx](const std::string& cluster) -> api::ProgressFn {
        // only searches over 1 s draw; the bar ends when the search's callback is dropped
        auto p = std::make_shared<Progress>(ctx.err, is_terminal(ctx.err), "search " + cluster, 1.0);
        return [p](int64_t d, int64_t t) { p->update(d, t, "job sizes"); };
    };
    const api::Reported r =
        api::report(o.job, clusters, api::parse_objective(o.objective), o.top, bar);
    api::write_html(o.out, r);
    ctx.err << "cleave report: wrote " << o.out << "\n";
    ctx.exit_code = r.any_feasible ? 0 : 1;
}

}  // namespace

void setup_report(CLI::App& app, CliContext& ctx) {
    auto o = std::make_shared<ReportOptions>();
    auto* sub = app.add_subcommand(
        "report", "Write one self-contained HTML page: plans, plots, timeline, cost to train");
    add_job_flags(*sub, o->job, /*require_gpus=*/true, /*require_cluster=*/false);
    add_train_flags(*sub, o->job.train);
    sub->add_option("--clusters", o->clusters, "Compare hardware profiles (instead of CLUSTER)")
        ->expected(1, -1);
    sub->add_option("--objective", o->objective, "Rank by: time, memory or cost")
        ->check(CLI::IsMember({"time", "memory", "cost"}))
        ->capture_default_str();
    sub->add_option("--top", o->top, "Plans in the table")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    sub->add_option("-o,--out", o->out, "HTML file to write")->required();
    sub->callback([o, &ctx] { run_report(*o, ctx); });
}

}  // namespace cleave::cli
