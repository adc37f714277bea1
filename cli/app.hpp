#pragma once
// The cleave command line: make_app() builds the whole CLI::App so tests can parse argument
// vectors in process (STYLE S1.2, S7.4).

#include <iosfwd>
#include <memory>

#include <CLI/CLI.hpp>

namespace cleave::cli {

/// Where commands print and what they return. Commands write results to `out` and
/// diagnostics to `err`, and set `exit_code` (0 ok, 1 no feasible plan / run failed, 2 bad input).
struct CliContext {
    std::ostream& out;
    std::ostream& err;
    int exit_code = 0;
};

/// Builds the application with every subcommand; callbacks capture `ctx` by reference.
[[nodiscard]] std::unique_ptr<CLI::App> make_app(CliContext& ctx);

/// Parses argv and runs the chosen command; maps ConfigError to 2, BackendError and other
/// runtime failures to 1, CLI11 parse errors to their own codes. Prints diagnostics to ctx.err.
[[nodiscard]] int run_cli(int argc, const char* const* argv, CliContext& ctx);

}  // namespace cleave::cli
