// cleave trace FILE: where a PyTorch profiler trace's GPU time went, by kernel class
// (api/trace.hpp).
#include "api/trace.hpp"
#include "cli/commands.hpp"

#include <memory>
#include <ostream>
#include <string>

namespace cleave::cli {

void setup_trace(CLI::App& app, CliContext& ctx) {
    struct TraceCmdOptions {
        std::string file;
        std::string format = "table";
        api::TraceOptions trace;
    };
    auto opts = std::make_shared<TraceCmdOptions>();
    auto* sub = app.add_subcommand(
        "trace", "Read a PyTorch profiler (Kineto) trace, plain or .gz: time by kernel class, "
                 "streams, overlap, launch gaps, steps and phases");
    sub->add_option("FILE", opts->file, "One rank's trace JSON (Megatron, NeMo, torchtitan, torch.profiler)")
        ->required()
        ->check(CLI::ExistingFile);
    sub->add_option("--format", opts->format, "Output: table or json")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    sub->add_option("--classes", opts->trace.classes,
                    "A kernel class table of your own (TOML, trace/kernel-classes.toml's format), "
                    "tried before the shipped one")
        ->check(CLI::ExistingFile);
    sub->add_option("--top", opts->trace.summary.top, "Kernels listed by time (and unclassified)")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    sub->add_option("--launch-gap-us", opts->trace.summary.launch_gap_us,
                    "Idle gaps up to this between kernels of a compute stream count as launch "
                    "gaps; longer ones as waits")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    sub->callback([opts, &ctx] {
        const trace::TraceSummary s = api::read_trace(opts->file, opts->trace);
        if (opts->format == "json") {
            ctx.out << api::to_json(s).dump(2) << "\n";
        } else {
            api::print_table(ctx.out, s);
        }
    });
}

}  // namespace cleave::cli
