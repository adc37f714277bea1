// cleave run: executes a plan as real training iterations under mpirun / srun and measures them
// (DESIGN §3). MPI is initialised here and only here, so every other subcommand runs without
// mpirun.
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "api/render.hpp"
#include "core/errors.hpp"
#include "core/trace.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/estimate.hpp"
#include "executor/profiling_backend.hpp"
#include "executor/registry.hpp"
#include "executor/run.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <thread>

#include <mpi.h>
#include <nlohmann/json.hpp>

namespace cleave::cli {

using namespace cleave::api;  // the JSON and table writers (api/render.hpp)

namespace {

struct RunOptions {
    JobFlags job;
    PlanFlags plan;
    int64_t iters = 3;
    int64_t warmup = 1;
    std::string backend = "cpu";
    std::string attention = "unfused";
    std::string dp_overlap = "auto";
    const CLI::Option* dtype_flag = nullptr;  // --dtype, to tell a given value from the default
    double timeout_s = 300.0;
    std::string format = "table";
    std::string trace;
    bool kernel_profile = false;
    uint64_t seed = 1234;
    double lr = 1e-4;
    double moe_aux_loss_coeff = 0.01;  // issue 16: Switch load-balancing loss coefficient
    // Scale the model down for small machines (0 = the model's value).
    int64_t layers = 0;
    int64_t hidden = 0;
    int64_t heads = 0;
    int64_t kv_heads = 0;
    int64_t ffn = 0;
    int64_t vocab = 0;
    // Hidden test flags: rank fault_rank stops at step fault_step of iteration fault_iter
    // (exit, hang), or sleeps 0.3 s at step fault_step of every iteration (delay).
    int64_t fault_rank = -1;
    int64_t fault_iter = 0;
    int64_t fault_step = 1;
    std::string fault_mode = "exit";
};

// MPI_Init_thread / MPI_Finalize around one run (MPI_Abort ends the process on failure).
class MpiSession {
public:
    MpiSession() {
        int initialized = 0;
        MPI_Initialized(&initialized);
        if (initialized == 0) {
            int provided = 0;
            if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
                throw BackendError("MPI_Init_thread failed");
            }
            owner_ = true;
        }
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &size_);
    }

    ~MpiSession() {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (owner_ && finalized == 0) {
            MPI_Finalize();
        }
    }

    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;

    [[nodiscard]] int rank() const { return rank_; }

    [[nodiscard]] int size() const { return size_; }

private:
    bool owner_ = false;
    int rank_ = 0;
    int size_ = 1;
};

void add_flags(CLI::App& sub, RunOptions& o) {
    add_job_flags(sub, o.job, /*require_gpus=*/false);
    add_plan_flags(sub, o.plan);
    sub.add_option("--iters", o.iters, "Measured iterations")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    sub.add_option("--warmup", o.warmup, "Unmeasured iterations run first")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub.add_option("--backend", o.backend, "Executor backend")
        ->check(CLI::IsMember({"cpu", "cuda"}))
        ->capture_default_str();
    o.dtype_flag = sub.get_option("--dtype");
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
    sub.add_option("--format", o.format, "Output format")
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

void apply_overrides(const RunOptions& o, ModelSpec& m) {
    const auto positive = [](int64_t v, const char* flag) {
        if (v < 0) {
            throw ConfigError(std::string(flag) + ": must be positive");
        }
    };
    for (const auto& [v, flag] : {std::pair{o.layers, "--layers"},
                                  {o.hidden, "--hidden"},
                                  {o.heads, "--heads"},
                                  {o.kv_heads, "--kv-heads"},
                                  {o.ffn, "--ffn"},
                                  {o.vocab, "--vocab"}}) {
        positive(v, flag);
    }
    if (o.hidden > 0) {
        m.ffn_hidden = o.ffn > 0 ? o.ffn : m.ffn_hidden * o.hidden / m.hidden;
        m.hidden = o.hidden;
    } else if (o.ffn > 0) {
        m.ffn_hidden = o.ffn;
    }
    if (o.layers > 0) {
        m.layers = o.layers;
    }
    if (o.heads > 0) {
        m.kv_heads = m.kv_heads == m.heads ? o.heads : m.kv_heads;
        m.heads = o.heads;
    }
    if (o.kv_heads > 0) {
        m.kv_heads = o.kv_heads;
    }
    if (o.vocab > 0) {
        m.vocab = o.vocab;
    }
    if (m.heads <= 0 || m.hidden % m.heads != 0) {
        throw ConfigError("--hidden/--heads: heads=" + std::to_string(m.heads) +
                          " must divide hidden=" + std::to_string(m.hidden));
    }
    if (m.kv_heads <= 0 || m.heads % m.kv_heads != 0) {
        throw ConfigError("--kv-heads: kv_heads=" + std::to_string(m.kv_heads) +
                          " must divide heads=" + std::to_string(m.heads));
    }
}

// The fault hook of the hidden --fault-* flags: the chosen rank exits (as a crashed process
// would) or stops participating (as a hung one would).
std::function<void(int64_t, int64_t)> fault_hook(const RunOptions& o, int rank, std::ostream& err) {
    if (o.fault_rank != rank) {
        return {};
    }
    return [&o, rank, &err](int64_t it, int64_t step) {
        if (o.fault_mode == "delay") {  // issue 18's test of dp_wait: this rank runs late
            if (step == o.fault_step) {
                std::this_thread::sleep_for(std::chrono::milliseconds(300));
            }
            return;
        }
        if (it != o.fault_iter || step != o.fault_step) {
            return;
        }
        err << "cleave run: rank " << rank << ": injected fault (" << o.fault_mode
            << ") at iteration " << it << " step " << step << std::endl;
        if (o.fault_mode == "exit") {
            std::_Exit(3);
        }
        for (;;) {
            std::this_thread::sleep_for(std::chrono::seconds(1));
        }
    };
}

double ms(double s) {
    return s * 1e3;
}

// --kernel-profile: rank 0's kernels per measured iteration; each GEMM shape against what the
// cost model charges it with CLUSTER's GEMM curve (gemm_time, in the dtype the run computes in).
void print_kernel_profile(std::ostream& os,
                          const std::vector<executor::KernelStat>& stats,
                          const GpuSpec& gpu,
                          Dtype dtype,
                          int64_t iters) {
    const double n = static_cast<double>(std::max<int64_t>(1, iters));
    os << "# kernel profile, rank 0, per measured iteration (ms); GEMMs m x n x k, "
          "priced = the profile's gemm_time\n"
       << "#   kernel                      calls    meas(ms)  priced(ms)  meas GFLOP/s\n";
    double total = 0.0;
    double comm = 0.0;
    double gemm_meas = 0.0;
    double gemm_priced = 0.0;
    char line[256];
    for (const auto& k : stats) {
        const double meas = k.total_s / n;
        (k.comm ? comm : total) += meas;
        std::string priced = "";
        std::string rate = "";
        if (k.flop > 0.0) {
            const double t = gemm_time(gpu,
                                       dtype,
                                       GemmShape{static_cast<double>(k.m),
                                                 static_cast<double>(k.n),
                                                 static_cast<double>(k.k),
                                                 static_cast<double>(k.calls) / n})
                                 .value();
            gemm_meas += meas;
            gemm_priced += t;
            priced = fixed(ms(t), 3);
            rate = fixed(k.flop / k.total_s / 1e9, 2);
        }
        std::snprintf(line,
                      sizeof line,
                      "    %-26s %6.1f %11.3f %11s %13s\n",
                      k.name.c_str(),
                      static_cast<double>(k.calls) / n,
                      ms(meas),
                      priced.c_str(),
                      rate.c_str());
        os << line;
    }
    std::snprintf(line,
                  sizeof line,
                  "#   GEMMs %.3f ms measured, %.3f priced (%+.1f%%); all compute kernels %.3f ms; "
                  "collectives and send/recv (waits included) %.3f ms\n",
                  ms(gemm_meas),
                  ms(gemm_priced),
                  gemm_meas > 0.0 ? 100.0 * (gemm_priced - gemm_meas) / gemm_meas : 0.0,
                  ms(total),
                  ms(comm));
    os << line;
}

double mib(int64_t b) {
    return static_cast<double>(b) / (1024.0 * 1024.0);
}

void print_table(std::ostream& os,
                 const Inputs& in,
                 const Plan& p,
                 const RunOptions& o,
                 const executor::Measurement& m,
                 double predicted_s) {
    os << "# cleave run: " << in.model.name << " (" << in.model.layers << " layers, hidden "
       << in.model.hidden << ", seq " << in.job.seq_len << ", gbs " << in.job.global_batch
       << ") on " << m.ranks.size() << " ranks, " << o.backend << " backend\n";
    os << "# plan: " << to_string(p) << "; " << o.iters << " measured iterations after " << o.warmup
       << " warm-up\n";
    os << std::fixed << std::setprecision(6) << "# loss " << m.loss << "  weights_checksum "
       << std::setprecision(6) << m.weights_checksum << "\n";
    os << "# rank stage  dp  tp   iter(ms) compute(ms) tp_comm(ms) pp_wait(ms) dp_comm(ms) "
          "optimizer(ms)  peak(MiB) dp_wait(ms)\n";
    const auto row = [&os](const executor::PhaseTimes& ph, double iter_s) {
        os << std::setw(10) << ms(iter_s) << std::setw(12) << ms(ph.compute_s) << std::setw(12)
           << ms(ph.tp_comm_s) << std::setw(12) << ms(ph.pp_wait_s) << std::setw(12)
           << ms(ph.dp_comm_s) << std::setw(14) << ms(ph.optimizer_s);
    };
    os << std::setprecision(3);
    for (const auto& r : m.ranks) {
        os << std::setw(6) << r.world_rank << std::setw(6) << r.at.pp_rank << std::setw(4)
           << r.at.dp_rank << std::setw(4) << r.at.tp_rank << " ";
        row(r.phases, r.iteration_time_s);
        os << std::setw(11) << mib(r.peak_memory_B) << std::setw(12) << ms(r.phases.dp_wait_s)
           << "\n";
    }
    os << "#  mean             ";
    row(m.phases, m.iteration_time_s);
    os << std::setw(11) << "" << std::setw(12) << ms(m.phases.dp_wait_s);
    os << "\n# measured iteration (median, slowest rank): " << ms(m.iteration_time_s)
       << " ms; predicted for " << in.cluster.name << ": " << ms(predicted_s) << " ms\n";
}

nlohmann::json phases_json(const executor::PhaseTimes& p) {
    return {{"compute", p.compute_s},
            {"tp_comm", p.tp_comm_s},
            {"pp_wait", p.pp_wait_s},
            {"dp_comm", p.dp_comm_s},
            {"dp_exposed", p.dp_exposed_s},
            {"ep_comm", p.ep_comm_s},
            {"dp_wait", p.dp_wait_s},
            {"optimizer", p.optimizer_s}};
}

nlohmann::json to_json(const Inputs& in,
                       const Plan& p,
                       const RunOptions& o,
                       const executor::Measurement& m,
                       const Estimate& e,
                       const std::string& device) {
    constexpr double gib = 1024.0 * 1024.0 * 1024.0;
    auto ranks = nlohmann::json::array();
    for (const auto& r : m.ranks) {
        ranks.push_back({{"rank", r.world_rank},
                         {"pp_rank", r.at.pp_rank},
                         {"dp_rank", r.at.dp_rank},
                         {"tp_rank", r.at.tp_rank},
                         {"iteration_time_s", r.iteration_time_s},
                         {"phases_s", phases_json(r.phases)},
                         {"peak_memory_gib", static_cast<double>(r.peak_memory_B) / gib}});
    }
    const TimeBreakdown& t = e.time;
    return {{"loss", m.loss},
            {"losses", m.losses},
            {"weights_checksum", m.weights_checksum},
            {"weights_probe", m.weights_probe},
            {"weights_probes", m.weights_probes},
            {"iteration_time_s", m.iteration_time_s},
            {"iteration_times_s", m.iteration_times_s},
            {"phases_s", phases_json(m.phases)},
            {"peak_memory_gib", static_cast<double>(m.peak_memory_B) / gib},
            {"predicted_iteration_time_s", e.iteration_time.value()},
            {"predicted_phases_s",
             {{"compute", t.compute.value()},
              {"tp_comm", t.tp_comm.value()},
              {"pp_wait", t.pp_comm.value() + t.bubble.value()},
              {"dp_comm", t.dp_comm.value()},
              {"ep_comm", t.ep_comm.value()},
              {"optimizer", t.optimizer.value()}}},
            {"backend", o.backend},
            {"dtype", o.job.dtype},
            {"attention", o.attention},
            {"device", device},
            {"world_size", m.ranks.size()},
            {"iters", o.iters},
            {"warmup", o.warmup},
            {"model",
             {{"name", in.model.name},
              {"layers", in.model.layers},
              {"hidden", in.model.hidden},
              {"heads", in.model.heads},
              {"kv_heads", in.model.kv_heads},
              {"ffn_hidden", in.model.ffn_hidden},
              {"vocab", in.model.vocab},
              {"seq", in.job.seq_len},
              {"gbs", in.job.global_batch}}},
            {"plan", plan_to_json(p, in.job)},
            {"ranks", ranks}};
}

// Loads and checks everything; the same on every rank, so a ConfigError is raised by all.
std::pair<Inputs, Plan> prepare(RunOptions& o, int world) {
    if (o.job.gpus > 0 && o.job.gpus != world) {
        throw ConfigError("--gpus " + std::to_string(o.job.gpus) + " but " + std::to_string(world) +
                          " ranks were launched (mpirun -np N)");
    }
    o.job.gpus = world;
    if (o.job.gbs == 0) {  // default: one micro-batch per pipeline stage per DP rank
        const int64_t mp = o.plan.tp * o.plan.pp * o.plan.cp;
        const int64_t dp = o.plan.dp > 0 ? o.plan.dp : (mp > 0 ? world / mp : 1);
        o.job.gbs = std::max<int64_t>(1, dp) * o.plan.mbs * o.plan.pp;
    }
    // cleave's own executor runs materialised attention with dropout, as megatron-2021 prices it.
    Inputs in = load_inputs(o.job, "megatron-2021");
    apply_overrides(o, in.model);
    const Plan p = make_plan(o.plan, in);
    executor::check_executable(in.model, in.job, p, world);
    return {in, p};
}

// What the backend runs, which is also what is priced (issue 17): the CPU backend computes in
// fp32 (the reference), so --dtype defaults to fp32 there and anything else is an error; the
// CUDA backend runs --dtype (default bf16) as its GEMM precision.
executor::BackendOptions backend_options(RunOptions& o) {
    executor::BackendOptions bo;
    bo.timeout_s = o.timeout_s;
    bo.fused_attention = o.attention == "fused";
    if (o.backend == "cpu") {
        const bool given = o.dtype_flag != nullptr && o.dtype_flag->count() > 0;
        if (given && o.job.dtype != "fp32") {
            throw ConfigError("--dtype " + o.job.dtype +
                              ": the CPU backend computes in fp32 only (it is the reference the "
                              "CUDA backend is checked against); use --dtype fp32, or --backend "
                              "cuda for bf16 / fp16");
        }
        if (bo.fused_attention) {
            throw ConfigError(
                "--attention fused: the CPU backend runs unfused attention only; use --backend "
                "cuda");
        }
        o.job.dtype = "fp32";
        return bo;
    }
    if (o.job.dtype == "bf16") {
        bo.precision = executor::GemmPrecision::bf16;
    } else if (o.job.dtype == "fp16") {
        bo.precision = executor::GemmPrecision::fp16;
    } else if (o.job.dtype != "fp32") {
        throw ConfigError("--dtype " + o.job.dtype +
                          ": the CUDA backend runs fp32, bf16 or fp16 GEMMs");
    }
    return bo;
}

// The stack the prediction prices, made to say what the executor runs (issue 17: what runs is
// what is priced): its attention kernel (the fused one skips fully masked key tiles), whether the
// DP buckets hide behind the backward (the CUDA backend overlaps them; the CPU backend runs them
// at once), and no dropout, no TP communication overlap, no param-gather overlap (the executor
// has none of them).
void price_as_executed(const RunOptions& o, bool dp_overlap, SoftwareStack& s) {
    const bool fused = o.attention == "fused";
    s.attention = fused ? AttentionImpl::fused : AttentionImpl::materialized;
    s.causal_skip = fused;
    s.overlap_grad_reduce = dp_overlap && o.backend == "cuda";
    s.overlap_param_gather = false;
    s.hidden_dropout = false;
    s.tp_comm_overlap = false;
}

void run(RunOptions& o, CliContext& ctx) {
    MpiSession mpi;
    try {
        const executor::BackendOptions bo = backend_options(o);
        auto [in, plan] = prepare(o, mpi.size());
        auto be = executor::make_backend(o.backend, bo);
        executor::RunOptions ro;
        ro.iters = o.iters;
        ro.warmup = o.warmup;
        ro.seed = o.seed;
        ro.lr = static_cast<float>(o.lr);
        ro.moe_aux_loss_coeff = static_cast<float>(o.moe_aux_loss_coeff);
        ro.trace = !o.trace.empty();
        ro.overlap_dp = o.dp_overlap == "on" || (o.dp_overlap == "auto" && o.backend == "cuda");
        ro.on_step = fault_hook(o, mpi.rank(), ctx.err);
        executor::ProfilingBackend profiled(*be);
        if (o.kernel_profile) {  // count the measured iterations only
            ro.on_step = [&profiled, warmup = o.warmup, fault = ro.on_step](int64_t it,
                                                                            int64_t step) {
                if (it == warmup && step == 0) {
                    profiled.reset();
                }
                if (fault) {
                    fault(it, step);
                }
            };
        }
        executor::Backend& runner = o.kernel_profile ? profiled : *be;
        const executor::Measurement m = executor::run_training(runner, in.model, in.job, plan, ro);
        if (mpi.rank() != 0) {
            return;
        }
        price_as_executed(o, ro.overlap_dp, in.job.stack);
        const Estimate e = estimate(in.model, in.cluster, in.job, plan);
        if (!o.trace.empty()) {
            std::ofstream f(o.trace);
            if (!f) {
                throw ConfigError("--trace: cannot write '" + o.trace + "'");
            }
            write_chrome_trace(f, m.trace);
        }
        if (o.format == "json") {
            ctx.out << to_json(in, plan, o, m, e, be->device_name()).dump(2) << "\n";
        } else {
            print_table(ctx.out, in, plan, o, m, e.iteration_time.value());
        }
        if (o.kernel_profile) {
            print_kernel_profile(
                ctx.out, profiled.stats(), in.cluster.gpu, in.job.compute, o.iters);
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
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

}  // namespace

void setup_run(CLI::App& app, CliContext& ctx) {
    auto opts = std::make_shared<RunOptions>();
    auto* sub = app.add_subcommand(
        "run",
        "Execute a plan as real training iterations and measure them; launch with "
        "`mpirun -np N cleave run ...` (one rank per GPU or CPU process). Exit codes: 0 ok, 1 run "
        "failed, 2 bad input");
    add_flags(*sub, *opts);
    sub->callback([opts, &ctx] { run(*opts, ctx); });
}

}  // namespace cleave::cli
