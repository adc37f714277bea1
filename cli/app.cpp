#include "cli/app.hpp"

#include <ostream>

#include "cli/commands.hpp"
#include "core/errors.hpp"

namespace cleave::cli {

std::unique_ptr<CLI::App> make_app(CliContext& ctx) {
    auto app = std::make_unique<CLI::App>(
        "cleave: plan, predict, simulate and run data/tensor/pipeline-parallel LLM training.\n"
        "Exit codes: 0 ok, 1 no feasible plan or run failed, 2 bad input or usage.");
    app->require_subcommand(1);
    app->set_version_flag("--version", "cleave 0.1.0");
    setup_model(*app, ctx);
    setup_hw(*app, ctx);
    setup_stack(*app, ctx);
    setup_explain(*app, ctx);
    setup_plan(*app, ctx);
    setup_compare(*app, ctx);
    setup_simulate(*app, ctx);
    setup_run(*app, ctx);
    setup_calibrate(*app, ctx);
    setup_validate(*app, ctx);
    setup_published(*app, ctx);
    setup_report(*app, ctx);
    setup_trace(*app, ctx);
    return app;
}

int run_cli(int argc, const char* const* argv, CliContext& ctx) {
    auto app = make_app(ctx);
    try {
        app->parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app->exit(e, ctx.out, ctx.err);
    } catch (const CLI::CallForAllHelp& e) {
        return app->exit(e, ctx.out, ctx.err);
    } catch (const CLI::CallForVersion& e) {
        return app->exit(e, ctx.out, ctx.err);
    } catch (const CLI::ParseError& e) {
        const int code = app->exit(e, ctx.out, ctx.err);
        return code == 0 ? 0 : 2;
    } catch (const ConfigError& e) {
        ctx.err << e.what() << "\n";
        return 2;
    } catch (const BackendError& e) {
        ctx.err << "error: " << e.what() << "\n";
        return 1;
    } catch (const std::exception& e) {
        ctx.err << "error: " << e.what() << "\n";
        return 1;
    }
    return ctx.exit_code;
}

}  // namespace cleave::cli
