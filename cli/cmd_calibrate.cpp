// cleave calibrate: measure this machine through the executor's backend and write a hardware
// profile (docs/calibrate.md; api::calibrate_machine()).
#include "api/run.hpp"
#include "calibrate/mpi_session.hpp"
#include "cli/commands.hpp"
#include "cli/progress.hpp"
#include "core/errors.hpp"

#include <fstream>
#include <memory>
#include <ostream>
#include <string>

namespace cleave::cli {

namespace {

void run_calibrate(const api::CalibrateOptions& o, CliContext& ctx) {
    calibrate::MpiSession mpi;
    const bool root = mpi.rank() == 0;
    api::Calibrated c;
    try {
        // One progress line per measurement phase, with its ETA, on a terminal only.
        std::unique_ptr<Progress> bar;
        std::string phase;
        api::CalibrateProgressFn progress;
        if (root && is_terminal(ctx.err)) {
            progress = [&](const std::string& what, int64_t done, int64_t total) {
                if (!bar || what != phase) {
                    phase = what;
                    bar.reset();
                    bar = std::make_unique<Progress>(ctx.err, true, "calibrate " + phase);
                }
                bar->update(done, total);
            };
        }
        c = api::calibrate_machine(o, mpi.rank(), mpi.size(), progress);
        if (root) {
            api::print_table(ctx.out, c);
        }
    } catch (const std::exception& e) {
        ctx.err << "cleave calibrate (rank " << mpi.rank() << "): " << e.what() << "\n";
        mpi.abort_if_parallel(1);
        throw;
    }
    if (!root) {
        return;
    }
    if (o.out.empty()) {
        ctx.out << "\n" << c.profile;
        return;
    }
    std::ofstream f(o.out);
    if (!(f << c.profile)) {
        throw ConfigError("--out: cannot write '" + o.out + "'");
    }
    ctx.out << "# profile written to " << o.out << " (use it as CLUSTER)\n";
}

}  // namespace

void setup_calibrate(CLI::App& app, CliContext& ctx) {
    auto opt = std::make_shared<api::CalibrateOptions>();
    auto* sub = app.add_subcommand(
        "calibrate",
        "Measure this machine (GEMM, memory, collectives; run under mpirun) and write a hardware "
        "profile");
    sub->add_option("--out", opt->out, "Profile TOML to write (default: stdout, after the report)");
    sub->add_option("--name", opt->name, "Profile name (default: calibrated-<host>)");
    sub->add_option("--backend", opt->backend, "Executor backend to measure")
        ->check(CLI::IsMember({"cpu", "cuda"}))
        ->capture_default_str();
    sub->add_flag("--quick", opt->quick, "Few sizes, short timings (seconds; for tests)");
    sub->callback([opt, &ctx] { run_calibrate(*opt, ctx); });
}

}  // namespace cleave::cli
