// cleave hw list | cleave hw show NAME|FILE: the shipped hardware profiles and one profile's
// values in display units (api::cluster_to_json, api::print_cluster_table).
#include "api/cleave.hpp"
#include "cli/commands.hpp"
#include "core/load.hpp"

#include <memory>
#include <ostream>
#include <string>

namespace cleave::cli {

void setup_hw(CLI::App& app, CliContext& ctx) {
    auto* hw = app.add_subcommand("hw", "List the shipped hardware profiles or show one");
    hw->require_subcommand(1);

    auto list = std::make_shared<std::string>("table");
    auto* ls = hw->add_subcommand("list", "List the shipped hardware profiles");
    ls->add_option("--format", *list, "Output: table or json")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    ls->callback([list, &ctx] {
        if (*list == "json") {
            ctx.out << api::cluster_list_json().dump(2) << "\n";
        } else {
            api::print_cluster_list(ctx.out);
        }
    });

    struct ShowOptions {
        std::string profile;
        std::string format = "table";
    };
    auto show = std::make_shared<ShowOptions>();
    auto* sh = hw->add_subcommand("show", "Show one profile's values in display units");
    sh->add_option("PROFILE", show->profile, "A shipped profile name or a profile TOML path")
        ->required();
    sh->add_option("--format", show->format, "Output: table or json")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    sh->callback([show, &ctx] {
        const ClusterSpec c = load_cluster(show->profile);
        if (show->format == "json") {
            ctx.out << api::cluster_to_json(c).dump(2) << "\n";
        } else {
            api::print_cluster_table(ctx.out, c);
        }
    });
}

}  // namespace cleave::cli
