// cleave calibrate: measure this machine through the executor's backend and write a hardware
// profile (docs/calibrate.md; api::calibrate_machine()).
#include "api/run.hpp"
#include "api/trace.hpp"
#include "calibrate/mpi_session.hpp"
#include "calibrate/validate.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "cli/progress.hpp"
#include "core/errors.hpp"

#include <fstream>
#include <memory>
#include <ostream>
#include <string>

namespace cleave::cli {

namespace {

// --out FILE: the profile or the overlay, or exit 2 naming the file.
void write_out(const std::string& path, const std::string& text) {
    std::ofstream f(path);
    if (!(f << text)) {
        throw ConfigError("--out: cannot write '" + path + "'");
    }
}

// What calibrate --from-trace needs beside the machine calibration's options.
struct FromTraceOptions {
    std::string trace;
    std::string scope = "step";
    JobFlags job;
    PlanFlags plan;
};

void run_from_trace(const FromTraceOptions& t, const std::string& out, CliContext& ctx) {
    if (t.job.model.empty() || t.job.cluster.empty() || t.job.gpus <= 0) {
        throw ConfigError("calibrate --from-trace: give MODEL, CLUSTER and --gpus with the plan "
                          "flags of the job the trace recorded");
    }
    const trace::TraceSummary s = api::read_trace(t.trace);
    // cleave's own executor (cleave run --trace) is priced as validate prices it: Megatron's
    // materialised attention (megatron-2021 unless --stack says otherwise) and fp32 on the CPU.
    const bool executor = s.backend == "cleave";
    Inputs in = load_inputs(t.job, executor ? "megatron-2021" : default_stack_name);
    if (executor && s.gpu.rfind("CPU", 0) == 0) {
        in.job = calibrate::as_executed(in.job);
    }
    const Plan plan = make_plan(t.plan, in);
    const api::TraceCalibrated c =
        api::calibrate_from_trace(in, plan, s, api::parse_trace_scope(t.scope));
    api::print_table(ctx.out, c);
    if (out.empty()) {
        ctx.out << "\n" << c.toml;
        return;
    }
    write_out(out, c.toml);
    ctx.out << "\n# overlay written to " << out << " (use it with --calibration " << out << ")\n";
}

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
    write_out(o.out, c.profile);
    ctx.out << "# profile written to " << o.out << " (use it as CLUSTER)\n";
}

}  // namespace

void setup_calibrate(CLI::App& app, CliContext& ctx) {
    auto opt = std::make_shared<api::CalibrateOptions>();
    auto tr = std::make_shared<FromTraceOptions>();
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
    sub->add_option("--from-trace", tr->trace,
                    "Fit a calibration overlay to a PyTorch profiler trace of MODEL on CLUSTER "
                    "under the plan flags, instead of measuring this machine (no mpirun)")
        ->check(CLI::ExistingFile);
    add_trace_scope_flag(*sub, tr->scope);
    add_job_flags(*sub, tr->job, /*require_gpus=*/false, /*require_cluster=*/false,
                  /*require_model=*/false);
    add_plan_flags(*sub, tr->plan);
    sub->callback([opt, tr, &ctx] {
        if (!tr->trace.empty()) {
            run_from_trace(*tr, opt->out, ctx);
            return;
        }
        if (!tr->job.model.empty()) {
            throw ConfigError("calibrate: MODEL and CLUSTER are read with --from-trace only; "
                              "without it calibrate measures this machine");
        }
        run_calibrate(*opt, ctx);
    });
}

}  // namespace cleave::cli
