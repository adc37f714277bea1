// cleave validate: plan a job, run the top plans and a few contrasting ones under mpirun, and
// compare the cost model's predictions with the measurements (api::validate()).
#include "api/run.hpp"
#include "calibrate/mpi_session.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "cli/progress.hpp"
#include "core/errors.hpp"

#include <cstdio>
#include <memory>
#include <ostream>
#include <string>

namespace cleave::cli {

namespace {

struct ValidateCommand {
    JobFlags job;
    api::ValidateOptions v;
    std::string format = "table";
};

void run_validate(const ValidateCommand& c, CliContext& ctx) {
    calibrate::MpiSession mpi;
    const bool root = mpi.rank() == 0;
    api::Validated r;
    try {
        // Plans run so far over all rounds, with an ETA, on a terminal only (issue 19).
        Progress bar(ctx.err, root && is_terminal(ctx.err), "validate");
        r = api::validate(c.job, c.v, mpi.rank(), mpi.size(), ctx.err,
                          [&bar](int64_t done, int64_t total, const std::string& what) {
                              bar.update(done, total, what);
                          });
    } catch (const ConfigError&) {
        if (root) {
            throw;  // every rank raised it (the same inputs and measurements); rank 0 reports it
        }
        ctx.exit_code = 2;
        return;
    } catch (const std::exception& e) {
        ctx.err << "cleave validate (rank " << mpi.rank() << "): " << e.what() << "\n";
        mpi.abort_if_parallel(1);
        throw;
    }
    if (root) {
        if (c.format == "json") {
            ctx.out << api::to_json(r).dump(2) << "\n";
        } else {
            api::print_table(ctx.out, r);
        }
    }
    if (r.report.mape_pct > c.v.max_error_pct) {
        if (root) {
            ctx.err << "cleave validate: MAPE " << fixed(r.report.mape_pct, 1)
                    << "% exceeds --max-error " << fixed(c.v.max_error_pct, 1) << "%\n";
        }
        ctx.exit_code = 1;
    }
}

}  // namespace

void setup_validate(CLI::App& app, CliContext& ctx) {
    auto opt = std::make_shared<ValidateCommand>();
    auto* sub = app.add_subcommand(
        "validate",
        "Plan a job, run the top plans and a few contrasting ones under mpirun, and compare the "
        "cost model's predictions with the measurements. Exit 1 when MAPE > --max-error.");
    add_job_flags(*sub, opt->job, /*require_gpus=*/false, /*require_cluster=*/false);
    sub->add_option("--top",
                    opt->v.top,
                    "Best plans to run (plus one per missing dp/tp/pp shape "
                    "and the worst feasible plan)")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    sub->add_option("--max-error", opt->v.max_error_pct, "Largest acceptable MAPE in percent")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub->add_option("--iters", opt->v.iters, "Measured iterations per plan")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    sub->add_option("--warmup", opt->v.warmup, "Unmeasured iterations first, at least")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub->add_option("--warmup-max",
                    opt->v.warmup_max,
                    "Above --warmup: warm up until two iterations in a row are within 5% of each "
                    "other (the slowest rank's times), at most this many (<= --warmup: exactly "
                    "--warmup)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub->add_option("--rounds",
                    opt->v.rounds,
                    "Run every plan this many times, in turn (all plans, then again): a slow "
                    "minute of a shared machine is spread over every plan; median of the rounds")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    sub->add_option("--backend", opt->v.backend, "Executor backend")
        ->check(CLI::IsMember({"cpu", "cuda"}))
        ->capture_default_str();
    sub->add_option("--timeout", opt->v.timeout_s, "Seconds any one collective may take")
        ->capture_default_str();
    sub->add_option("--format", opt->format, "Output format")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    sub->add_flag("--calibrate",
                  opt->v.calibrate,
                  "Measure this machine instead of reading CLUSTER: once before planning, then "
                  "the compute side again between runs; each plan is priced with the mean of "
                  "the measurements just before and just after its run");
    sub->add_flag(
        "--calibrate-quick", opt->v.calibrate_quick, "With --calibrate: calibrate --quick's sweep");
    sub->add_option(
        "--save-profile",
        opt->v.save_profile,
        "With --calibrate: write the profile it planned with (TOML, usable as CLUSTER)");
    sub->callback([opt, &ctx] { run_validate(*opt, ctx); });
}

}  // namespace cleave::cli
