// cleave model FILE: the derived facts of a model (parameter counts per part, layer and stage;
// api::model_to_json).
#include "api/cleave.hpp"
#include "cli/commands.hpp"
#include "core/load.hpp"

#include <memory>
#include <ostream>
#include <string>

namespace cleave::cli {

void setup_model(CLI::App& app, CliContext& ctx) {
    struct ModelOptions {
        std::string file;
        std::string format = "table";
        int64_t pp = 0;  // 0 = no per-stage split
    };
    auto opts = std::make_shared<ModelOptions>();
    auto* sub = app.add_subcommand("model", "Print a model's derived facts and parameter counts");
    sub->add_option("MODEL", opts->file, "Model: cleave TOML or Hugging Face config.json")
        ->required()
        ->check(CLI::ExistingFile);
    sub->add_option("--format", opts->format, "Output: table or json")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    sub->add_option("--pp", opts->pp, "Also list the parameters of each of this many stages")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub->callback([opts, &ctx] {
        const ModelSpec m = load_model(opts->file);
        if (opts->format == "json") {
            ctx.out << api::model_to_json(m, opts->pp).dump(2) << "\n";
        } else {
            api::print_model_table(ctx.out, m, opts->pp);
        }
    });
}

}  // namespace cleave::cli
