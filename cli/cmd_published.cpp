// TODO(#issue): placeholder until this subcommand lands; its owner replaces this file.
#include "cli/commands.hpp"

#include <ostream>

namespace cleave::cli {

void setup_published(CLI::App& app, CliContext& ctx) {
    auto* sub = app.add_subcommand("published", "(not available yet)");
    sub->allow_extras();
    sub->callback([&ctx] {
        ctx.err << "cleave published: not implemented yet\n";
        ctx.exit_code = 1;
    });
}

}  // namespace cleave::cli
