// cleave run: executes a plan as real training iterations under mpirun / srun and measures them
// (DESIGN §3; api::run()). MPI is initialised here and only here, so every other subcommand runs
// without mpirun.
#include "api/run.hpp"
#include "calibrate/mpi_session.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "core/errors.hpp"
#include "executor/backend.hpp"

#include <memory>
#include <ostream>
#include <string>

namespace cleave::cli {

namespace {

struct RunCommand {
    JobFlags job;
    PlanFlags plan;
    api::RunOptions run;
    std::string format = "table";
    const CLI::Option* dtype_flag = nullptr;  // --dtype, to tell a given value from the default
};

void add_flags(CLI::App& sub, RunCommand& c) {
    api::RunOptions& o = c.run;
    add_job_flags(sub, c.job, /*require_gpus=*/false);
    add_plan_flags(sub, c.plan);
    sub.add_option("--iters", o.iters, "Measured iterations")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    sub.add_option("--warmup", o.warmup, "Unmeasured iterations run first")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub.add_option("--backend", o.backend, "Executor backend")
        ->check(CLI::IsMember({"cpu", "cuda"}))
        ->capture_default_str();
    c.dtype_flag = sub.get_option("--dtype");
    sub.add_option("--attention",
                   o.attention,
                   "Attention kernels: unfused (scores materialised) or fused (flash-style, "
                   "--backend cuda)")
        ->check(CLI::IsMember({"unfused", "fused"}))
        ->capture_default_str();
    sub.add_option("--dp-overlap",
                   o.dp_overlap,
                   "Start each layer's DP gradient all-reduce as soon as the backward has passed "
                   "it (auto: on with --backend cuda, which overlaps them with the backward)")
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->capture_default_str();
    sub.add_option("--moe-aux-loss-coeff",
                   o.moe_aux_loss_coeff,
                   "MoE models: coefficient of the load-balancing loss (Switch Transformers, "
                   "Fedus et al. 2021 eq. 4) added to the loss")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub.add_option(
           "--timeout",
           o.timeout_s,
           "Seconds one collective or transfer may take before the job is aborted (0: none)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub.add_option("--format", c.format, "Output format")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    sub.add_option("--trace", o.trace, "Write a Chrome trace (JSON) of the measured iterations");
    sub.add_flag("--kernel-profile",
                 o.kernel_profile,
                 "Time every compute kernel of the measured iterations and print rank 0's table, "
                 "GEMMs per shape against the profile's price");
    sub.add_option("--seed", o.seed, "Seed of the weights and the data")->capture_default_str();
    sub.add_option("--lr", o.lr, "Adam learning rate")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    const char* scale = "Model overrides (scale down for small machines)";
    sub.add_option("--layers", o.layers, "Override the model's layers")->group(scale);
    sub.add_option("--hidden", o.hidden, "Override hidden (ffn scales with it unless --ffn)")
        ->group(scale);
    sub.add_option("--heads", o.heads, "Override attention heads")->group(scale);
    sub.add_option("--kv-heads", o.kv_heads, "Override kv heads")->group(scale);
    sub.add_option("--ffn", o.ffn, "Override the MLP inner size")->group(scale);
    sub.add_option("--vocab", o.vocab, "Override the vocabulary size")->group(scale);
    sub.add_option("--fault-rank", o.fault_rank)->group("");
    sub.add_option("--fault-at-iter", o.fault_iter)->group("");
    sub.add_option("--fault-at-step", o.fault_step)->group("");
    sub.add_option("--fault-mode", o.fault_mode)
        ->check(CLI::IsMember({"exit", "hang", "delay"}))
        ->group("");
}

void run(RunCommand& c, CliContext& ctx) {
    calibrate::MpiSession mpi;
    try {
        c.run.dtype_given = c.dtype_flag != nullptr && c.dtype_flag->count() > 0;
        const auto r = api::run(c.job, c.plan, c.run, mpi.rank(), mpi.size(), ctx.err);
        if (!r) {
            return;  // not rank 0
        }
        if (c.format == "json") {
            ctx.out << api::to_json(*r).dump(2) << "\n";
        } else {
            api::print_table(ctx.out, *r);
        }
    } catch (const ConfigError&) {
        if (mpi.rank() == 0) {
            throw;  // every rank raised it; rank 0 reports it
        }
        ctx.exit_code = 2;
    } catch (const std::exception& ex) {
        if (mpi.size() == 1) {
            throw;
        }
        // A failed rank must take the whole job down, or its peers wait forever. A timeout's
        // message already starts with the rank.
        const bool named = dynamic_cast<const executor::CommTimeout*>(&ex) != nullptr;
        ctx.err << "cleave run: "
                << (named ? std::string() : "rank " + std::to_string(mpi.rank()) + ": ")
                << ex.what() << "\ncleave run: aborting the job (MPI_Abort)" << std::endl;
        mpi.abort_if_parallel(1);
    }
}

}  // namespace

void setup_run(CLI::App& app, CliContext& ctx) {
    auto opts = std::make_shared<RunCommand>();
    auto* sub = app.add_subcommand(
        "run",
        "Execute a plan as real training iterations and measure them; launch with "
        "`mpirun -np N cleave run ...` (one rank per GPU or CPU process). Exit codes: 0 ok, 1 run "
        "failed, 2 bad input");
    add_flags(*sub, *opts);
    sub->callback([opts, &ctx] { run(*opts, ctx); });
}

}  // namespace cleave::cli
