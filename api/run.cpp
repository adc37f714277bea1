// cleave run: executes a plan as real training iterations on the ranks of MPI_COMM_WORLD and
// measures them (DESIGN §3; api/run.hpp run()).
#include "api/run.hpp"
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

#include <nlohmann/json.hpp>

namespace cleave::api {

namespace {



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
    if (m.heads == 0) {
        throw ConfigError("--heads: model '" + m.name +
                          "' states no attention heads (a Mamba-2 stack); the executor sizes "
                          "its attention by them: give --heads (and --kv-heads)");
    }
    if (m.heads < 0 || m.hidden % m.heads != 0) {
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

void print_run_table(std::ostream& os,
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

nlohmann::json run_json(const Inputs& in,
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
            {"dtype", to_string(in.job.compute)},
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
std::pair<Inputs, Plan> prepare(JobOptions& job, PlanOptions& plan, const RunOptions& o, int world) {
    if (job.gpus > 0 && job.gpus != world) {
        throw ConfigError("--gpus " + std::to_string(job.gpus) + " but " + std::to_string(world) +
                          " ranks were launched (mpirun -np N)");
    }
    job.gpus = world;
    if (job.gbs == 0) {  // default: one micro-batch per pipeline stage per DP rank
        const int64_t mp = plan.tp * plan.pp * plan.cp;
        const int64_t dp = plan.dp > 0 ? plan.dp : (mp > 0 ? world / mp : 1);
        job.gbs = std::max<int64_t>(1, dp) * plan.mbs * plan.pp;
    }
    // cleave's own executor runs materialised attention with dropout, as megatron-2021 prices it.
    Inputs in = load_inputs(job, "megatron-2021");
    apply_overrides(o, in.model);
    const Plan p = make_plan(plan, in);
    executor::check_executable(in.model, in.job, p, world);
    return {in, p};
}

// What the backend runs, which is also what is priced (issue 17): the CPU backend computes in
// fp32 (the reference), so --dtype defaults to fp32 there and anything else is an error; the
// CUDA backend runs --dtype (default bf16) as its GEMM precision.
executor::BackendOptions backend_options(const RunOptions& o, JobOptions& job) {
    executor::BackendOptions bo;
    bo.timeout_s = o.timeout_s;
    bo.fused_attention = o.attention == "fused";
    if (o.backend == "cpu") {
        const bool given = o.dtype_given;
        if (given && job.dtype != "fp32") {
            throw ConfigError("--dtype " + job.dtype +
                              ": the CPU backend computes in fp32 only (it is the reference the "
                              "CUDA backend is checked against); use --dtype fp32, or --backend "
                              "cuda for bf16 / fp16");
        }
        if (bo.fused_attention) {
            throw ConfigError(
                "--attention fused: the CPU backend runs unfused attention only; use --backend "
                "cuda");
        }
        job.dtype = "fp32";
        return bo;
    }
    if (job.dtype == "bf16") {
        bo.precision = executor::GemmPrecision::bf16;
    } else if (job.dtype == "fp16") {
        bo.precision = executor::GemmPrecision::fp16;
    } else if (job.dtype != "fp32") {
        throw ConfigError("--dtype " + job.dtype +
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

// `cleave run --trace`: the Chrome trace of every rank's phases (pid = rank), and rank 0's
// kernels as a PyTorch profiler (Kineto) trace holds them, so `cleave trace` and `calibrate
// --from-trace` read it: cat "kernel", args.stream (7 compute, 20 communication), args.device,
// names "cleave::<kernel>" that trace/kernel-classes.toml classifies (GEMMs with their dtype),
// and rank 0's forward / backward ranges as GPU annotations.
void write_run_trace(std::ostream& os, const executor::Measurement& m,
                     const std::vector<executor::ProfilingBackend::Event>& kernels,
                     const std::vector<double>& step_starts, const std::string& device,
                     const std::string& gemm_dtype, int world) {
    std::ostringstream chrome;
    write_chrome_trace(chrome, m.trace);
    nlohmann::json j = nlohmann::json::parse(chrome.str());
    nlohmann::json& ev = j["traceEvents"];
    constexpr int64_t kPid = 1000;  // the kernels' process, apart from the ranks' phase tracks
    ev.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", kPid}, {"tid", 0},
                  {"args", {{"name", "rank 0 kernels (Kineto)"}}}});
    const auto is_comm = [](const std::string& k) {
        for (const char* c : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send ", "recv"}) {
            if (k.rfind(c, 0) == 0) {
                return true;
            }
        }
        return false;
    };
    int64_t corr = 1;
    for (const auto& k : kernels) {
        const bool comm = is_comm(k.name);
        const int64_t stream = comm ? 20 : 7;
        std::string name = "cleave::" + k.name;
        if (k.name.rfind("gemm ", 0) == 0) {
            name = "cleave::gemm_" + gemm_dtype + k.name.substr(4);
        }
        ev.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", name}, {"pid", kPid}, {"tid", stream},
                      {"ts", (k.t0_s - m.trace_origin_s) * 1e6}, {"dur", (k.t1_s - k.t0_s) * 1e6},
                      {"args", {{"device", 0}, {"stream", stream}, {"correlation", corr}, {"External id", corr}}}});
        ++corr;
    }
    // Each measured iteration as ProfilerStep#N (from its first step to the next one's, the last
    // to its last kernel), as torch.profiler marks steps: cleave trace divides by them.
    double last_end = 0.0;
    for (const auto& k : kernels) {
        last_end = std::max(last_end, k.t1_s);
    }
    for (size_t i = 0; i < step_starts.size(); ++i) {
        const double t0 = step_starts[i];
        const double t1 = i + 1 < step_starts.size() ? step_starts[i + 1] : std::max(last_end, t0);
        ev.push_back({{"ph", "X"}, {"cat", "gpu_user_annotation"}, {"name", "ProfilerStep#" + std::to_string(i)},
                      {"pid", kPid}, {"tid", 7}, {"ts", (t0 - m.trace_origin_s) * 1e6}, {"dur", (t1 - t0) * 1e6}});
    }
    // Rank 0's micro-batch forward / backward ranges as GPU annotations (cleave trace's phases).
    for (const TraceEvent& e : m.trace.events) {
        if (e.pid != 0 || e.category != "compute" || e.name.size() < 2 || e.name[1] != ' ') {
            continue;
        }
        const char* phase = e.name[0] == 'F' ? "forward" : e.name[0] == 'B' ? "backward" : nullptr;
        if (phase != nullptr) {
            ev.push_back({{"ph", "X"}, {"cat", "gpu_user_annotation"}, {"name", phase}, {"pid", kPid},
                          {"tid", 7}, {"ts", e.ts_us}, {"dur", e.dur_us}});
        }
    }
    j["deviceProperties"] = nlohmann::json::array({{{"id", 0}, {"name", device}}});
    j["distributedInfo"] = {{"backend", "cleave"}, {"rank", 0}, {"world_size", world}};
    os << j.dump() << "\n";
}

}  // namespace

std::optional<Ran> run(JobOptions job,
                       PlanOptions plan_options,
                       const RunOptions& o,
                       int rank,
                       int world,
                       std::ostream& err) {
    const executor::BackendOptions bo = backend_options(o, job);
    auto [in, plan] = prepare(job, plan_options, o, world);
    auto be = executor::make_backend(o.backend, bo);
    executor::RunOptions ro;
    ro.iters = o.iters;
    ro.warmup = o.warmup;
    ro.seed = o.seed;
    ro.lr = static_cast<float>(o.lr);
    ro.moe_aux_loss_coeff = static_cast<float>(o.moe_aux_loss_coeff);
    ro.trace = !o.trace.empty();
    ro.overlap_dp = o.dp_overlap == "on" || (o.dp_overlap == "auto" && o.backend == "cuda");
    ro.on_step = fault_hook(o, rank, err);
    executor::ProfilingBackend profiled(*be);
    const bool profile = o.kernel_profile || !o.trace.empty();
    profiled.record_events(!o.trace.empty() && rank == 0);
    std::vector<double> step_starts;  // each measured iteration's first step (backend clock)
    if (profile) {  // count the measured iterations only
        ro.on_step = [&profiled, &step_starts, warmup = o.warmup, fault = ro.on_step](int64_t it,
                                                                                    int64_t step) {
            if (it == warmup && step == 0) {
                profiled.reset();
                step_starts.clear();
            }
            if (step == 0) {
                step_starts.push_back(profiled.clock_s());
            }
            if (fault) {
                fault(it, step);
            }
        };
    }
    executor::Backend& runner = profile ? profiled : *be;
    Ran r{in, plan, executor::run_training(runner, in.model, in.job, plan, ro), {}, be->device_name(),
          o, {}};
    if (rank != 0) {
        return std::nullopt;
    }
    price_as_executed(o, ro.overlap_dp, r.inputs.job.stack);
    r.estimate = estimate(r.inputs.model, r.inputs.cluster, r.inputs.job, r.plan);
    if (!o.trace.empty()) {
        std::ofstream f(o.trace);
        if (!f) {
            throw ConfigError("--trace: cannot write '" + o.trace + "'");
        }
        write_run_trace(f, r.measurement, profiled.events(), step_starts, r.device,
                        o.backend == "cpu" ? "fp32" : to_string(r.inputs.job.compute), world);
    }
    if (o.kernel_profile) {
        r.kernels = profiled.stats();
    }
    return r;
}

nlohmann::json to_json(const Ran& r) {
    return run_json(r.inputs, r.plan, r.options, r.measurement, r.estimate, r.device);
}

void print_table(std::ostream& os, const Ran& r) {
    print_run_table(os, r.inputs, r.plan, r.options, r.measurement, r.estimate.iteration_time.value());
    if (r.options.kernel_profile) {
        print_kernel_profile(os, r.kernels, r.inputs.cluster.gpu, r.inputs.job.compute,
                             r.options.iters);
    }
}

}  // namespace cleave::api
