// TODO(#issue): placeholder until this subcommand lands; its owner replaces this file.
#include "cli/commands.hpp"

#include <ostream>

namespace cleave::cli {

void setup_validate(CLI::App& app, CliContext& ctx) {
    auto* sub = app.add_subcommand("validate", "(not available yet)");
    sub->allow_extras();
    sub->callback([&ctx] {
        ctx.err << "cleave validate: not implemented yet\n";
        ctx.exit_code = 1;
    });
}

}  // namespace cleave::cli
