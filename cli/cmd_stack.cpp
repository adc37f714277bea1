// cleave stack list | cleave stack show NAME|FILE: the shipped software stacks and one stack's
// values (api::stack_to_json, api::print_stack_table).
#include "api/cleave.hpp"
#include "cli/commands.hpp"
#include "core/stack.hpp"

#include <memory>
#include <ostream>
#include <string>

namespace cleave::cli {

void setup_stack(CLI::App& app, CliContext& ctx) {
    auto* st = app.add_subcommand("stack", "List the shipped software stacks or show one");
    st->require_subcommand(1);

    auto list = std::make_shared<std::string>("table");
    auto* ls = st->add_subcommand("list", "List the shipped software stacks");
    ls->add_option("--format", *list, "Output: table or json")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    ls->callback([list, &ctx] {
        if (*list == "json") {
            ctx.out << api::stack_list_json().dump(2) << "\n";
        } else {
            api::print_stack_list(ctx.out);
        }
    });

    struct ShowOptions {
        std::string stack;
        std::string format = "table";
    };
    auto show = std::make_shared<ShowOptions>();
    auto* sh = st->add_subcommand("show", "Show one stack's values");
    sh->add_option("STACK", show->stack, "A shipped stack name or a stack TOML path")->required();
    sh->add_option("--format", show->format, "Output: table or json")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    sh->callback([show, &ctx] {
        const SoftwareStack s = load_stack(show->stack);
        if (show->format == "json") {
            ctx.out << api::stack_to_json(s).dump(2) << "\n";
        } else {
            api::print_stack_table(ctx.out, s);
        }
    });
}

}  // namespace cleave::cli
