// cleave compare: the best plan for one job on several hardware profiles, side by side
// (api::compare()).
#include "api/cleave.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"

#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace cleave::cli {

namespace {

struct CompareOptions {
    JobFlags job;  // job.cluster unused: one per --clusters
    std::vector<std::string> clusters;
    std::string format = "table";
};

void run_compare(const CompareOptions& o, CliContext& ctx) {
    const api::Compared c = api::compare(o.job, o.clusters);
    if (o.format == "json") {
        ctx.out << api::to_json(c).dump(2) << "\n";
    } else {
        api::print_table(ctx.out, c);
    }
    if (!c.any_feasible()) {
        ctx.err << "cleave compare: no profile has a feasible plan\n";
        ctx.exit_code = 1;
    }
}

}  // namespace

void setup_compare(CLI::App& app, CliContext& ctx) {
    auto o = std::make_shared<CompareOptions>();
    auto* sub = app.add_subcommand("compare", "Best plan for one job on several hardware profiles");
    sub->add_option("MODEL", o->job.model, "Model: cleave TOML or Hugging Face config.json")
        ->required()
        ->check(CLI::ExistingFile);
    sub->add_option("--clusters", o->clusters, "Hardware profiles: shipped names or TOML paths")
        ->required()
        ->expected(1, -1);
    sub->add_option("--gpus", o->job.gpus, "Number of GPUs")->required()->check(CLI::PositiveNumber);
    sub->add_option("--gbs", o->job.gbs, "Global batch size in sequences")->check(CLI::PositiveNumber);
    sub->add_option("--seq", o->job.seq, "Sequence length (default: the model's)")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--dtype", o->job.dtype, "Compute dtype of the linear layers' GEMMs")
        ->check(CLI::IsMember({"bf16", "fp16", "fp8", "mxfp8", "nvfp4", "fp32"}))
        ->capture_default_str();
    sub->add_option("--fp8-recipe", o->job.fp8_recipe, "FP8 scaling recipe (default delayed)")
        ->check(CLI::IsMember({"tensorwise", "delayed", "blockwise"}));
    sub->add_flag("--fp8-param-gather", o->job.fp8_param_gather, "FP8 primary weights");
    sub->add_option("--stack", o->job.stack, "Software stack for every profile (cleave stack list)");
    sub->add_option("--grad-dtype", o->job.grad_dtype, "Gradient buffer dtype (default fp32)")
        ->check(CLI::IsMember({"bf16", "fp16", "fp32"}));
    sub->add_option("--job", o->job.job_file, "Job TOML (flags override it)")->check(CLI::ExistingFile);
    add_train_flags(*sub, o->job.train);
    sub->add_option("--format", o->format, "Output: table or json")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    sub->callback([o, &ctx] { run_compare(*o, ctx); });
}

}  // namespace cleave::cli
