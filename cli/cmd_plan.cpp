// cleave plan: search every plan for a job and print the best (DESIGN §3, docs/planner.md).
// Flags in, api::plan(), the result printed in the chosen format.
#include "api/cleave.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "cli/progress.hpp"

#include <memory>
#include <ostream>
#include <sstream>
#include <string>

namespace cleave::cli {

namespace {

struct PlanCommand {
    JobFlags job;
    int64_t top = 10;
    std::string objective = "time";
    double target_tokens_per_s = 0.0;
    std::string format = "table";
    bool allow_tp_cross_node = false;
    int64_t max_tp = 0;
    int64_t max_pp = 0;
    int64_t max_cp = 0;
    int64_t max_ep = 0;
    bool heuristics = false;
    bool simulate = false;
    PlanFlags given;  // plan flags; those the user gave are fixed
};

void run_plan(const PlanCommand& o, const CLI::App& sub, CliContext& ctx) {
    const Inputs in = load_inputs(o.job);
    SearchOptions so;
    so.objective = api::parse_objective(o.objective);
    so.top_k = o.top;
    so.allow_tp_cross_node = o.allow_tp_cross_node;
    so.max_tp = o.max_tp;
    so.max_pp = o.max_pp;
    so.max_cp = o.max_cp;
    so.max_ep = o.max_ep;
    so.target_tokens_per_s = o.target_tokens_per_s;
    so.heuristics = o.heuristics;
    so.fixed = api::fixed_dimensions(
        o.given, [&sub](std::string_view flag) { return sub.count("--" + std::string(flag)) > 0; },
        in);
    const bool export_format = o.format == "megatron" || o.format == "deepspeed" ||
                               o.format == "bridge" || o.format == "torchtitan";
    if (export_format) {
        api::require_export_framework(in, o.format);  // before the search: exit 2 early
    }
    const api::Planned r = [&] {
        Progress bar(ctx.err, is_terminal(ctx.err), "search", 1.0);  // only searches over 1 s
        return api::plan(in, so, o.simulate,
                         [&bar](int64_t d, int64_t t) { bar.update(d, t, "job sizes"); });
    }();
    const bool none = r.result.plans.empty();
    if (o.format == "json") {
        ctx.out << api::to_json(r).dump(2) << "\n";
    } else if (o.format == "csv") {
        api::print_csv(ctx.out, r);
    } else if (o.format == "table" || none) {
        api::print_table(o.format == "table" ? ctx.out : ctx.err, r);
    } else {
        api::write_export(ctx.out, ctx.err, r, o.format);
    }
    if (none) {
        if (o.format == "csv" || o.format == "json") {
            api::print_why_not(ctx.err, r);
        }
        ctx.err << "cleave plan: no feasible plan among " << r.result.candidates_evaluated
                << " candidates" << (r.why_empty.empty() ? "" : ":") << "\n";
        std::istringstream why(r.why_empty);
        for (std::string line; std::getline(why, line);) {
            ctx.err << "cleave plan:   " << line << "\n";
        }
        ctx.exit_code = 1;
    }
}

}  // namespace

void setup_plan(CLI::App& app, CliContext& ctx) {
    auto opts = std::make_shared<PlanCommand>();
    auto* sub = app.add_subcommand("plan", "Search every DP/TP/PP/CP/EP plan and rank the best");
    add_job_flags(*sub, opts->job);
    add_train_flags(*sub, opts->job.train);
    sub->add_option("--top", opts->top, "How many plans to list")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    sub->add_option("--objective",
                    opts->objective,
                    "Rank by: time, memory, gpus or cost (GPU-hours: tries 1..--gpus GPUs)")
        ->check(CLI::IsMember({"time", "memory", "gpus", "cost"}))
        ->capture_default_str();
    sub->add_option("--target-tokens-per-s",
                    opts->target_tokens_per_s,
                    "Objective gpus: tokens/s to reach (--gpus is the most GPUs to try)")
        ->check(CLI::NonNegativeNumber);
    sub->add_option(
           "--format",
           opts->format,
           "Output: table, json, csv, megatron, deepspeed, torchtitan or bridge (Megatron-Bridge "
           "ConfigContainer overrides)")
        ->check(CLI::IsMember(
            {"table", "json", "csv", "megatron", "deepspeed", "torchtitan", "bridge"}))
        ->capture_default_str();
    sub->add_flag("--allow-tp-cross-node",
                  opts->allow_tp_cross_node,
                  "Also price TP groups that leave a node (default: rejected, tp_cross_node)");
    sub->add_option("--max-tp", opts->max_tp, "Largest TP size to try (0 = any)")
        ->capture_default_str();
    sub->add_option("--max-pp", opts->max_pp, "Largest PP size to try (0 = any)")
        ->capture_default_str();
    sub->add_option("--max-cp", opts->max_cp, "Largest CP size to try (0 = any)")
        ->capture_default_str();
    sub->add_option("--max-ep", opts->max_ep, "Largest EP size to try (0 = any)")
        ->capture_default_str();
    sub->add_flag("--heuristics",
                  opts->heuristics,
                  "Also skip: TP across nodes, GPipe, CP below seq 8192 (may miss feasible plans)");
    sub->add_flag("--simulate",
                  opts->simulate,
                  "Re-score the top plans with the discrete-event simulator and re-rank them");
    add_plan_flags(*sub, opts->given);
    sub->callback([opts, sub, &ctx] { run_plan(*opts, *sub, ctx); });
}

}  // namespace cleave::cli
