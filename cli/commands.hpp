#pragma once
// One setup_xxx per subcommand, each in its own cmd_xxx.cpp (STYLE S1.2).

#include <CLI/CLI.hpp>

#include "cli/app.hpp"

namespace cleave::cli {

void setup_model(CLI::App& app, CliContext& ctx);
void setup_hw(CLI::App& app, CliContext& ctx);
void setup_stack(CLI::App& app, CliContext& ctx);
void setup_explain(CLI::App& app, CliContext& ctx);
void setup_plan(CLI::App& app, CliContext& ctx);
void setup_compare(CLI::App& app, CliContext& ctx);
void setup_simulate(CLI::App& app, CliContext& ctx);
void setup_run(CLI::App& app, CliContext& ctx);
void setup_calibrate(CLI::App& app, CliContext& ctx);
void setup_validate(CLI::App& app, CliContext& ctx);
void setup_published(CLI::App& app, CliContext& ctx);
void setup_report(CLI::App& app, CliContext& ctx);
void setup_trace(CLI::App& app, CliContext& ctx);

}  // namespace cleave::cli
