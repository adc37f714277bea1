// cleave published [CSV...]: predicted vs published iteration times of public training runs, or
// vs measured peak memory (api::published()).
#include "api/cleave.hpp"
#include "cli/commands.hpp"

#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace cleave::cli {

void setup_published(CLI::App& app, CliContext& ctx) {
    struct Options {
        std::vector<std::string> csvs;  // empty = the repository copy tests/data/public_runs.csv
        std::string format = "table";
    };
    auto opt = std::make_shared<Options>();
    auto* sub = app.add_subcommand(
        "published", "Predict the published training runs of a CSV and print the errors");
    sub->add_option("CSV", opt->csvs,
                    "public runs CSVs (default: tests/data/public_runs.csv); several are read as one "
                    "set (per-source and held-out tables over all of them)")
        ->check(CLI::ExistingFile);
    sub->add_option("--format", opt->format, "Output format")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    sub->callback([opt, &ctx] {
        const api::Published p = api::published(opt->csvs);
        if (opt->format == "json") {
            ctx.out << api::to_json(p).dump(2) << "\n";
        } else {
            api::print_table(ctx.out, p);
        }
        ctx.exit_code = 0;
    });
}

}  // namespace cleave::cli
