#pragma once
// One measured training run of a plan: the public entry point of the executor library.

#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "core/trace.hpp"
#include "executor/backend.hpp"
#include "executor/schedule.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace cleave::executor {

struct RunOptions {
    int64_t iters = 3;   // measured iterations
    int64_t warmup = 1;  // iterations run first and not measured
    /// Issue 18: above `warmup`, warm up until the iteration time is stable (warmed_up in
    /// collect.hpp: the last two warm-up iterations within `stable_tolerance`), at most this
    /// many warm-up iterations in all; at or below `warmup`, exactly `warmup` of them.
    int64_t warmup_max = 0;
    double stable_tolerance = 0.05;
    uint64_t seed = 1234;
    float lr = 1e-4f;  // Adam: beta1 0.9, beta2 0.95, eps 1e-8 (Megatron GPT defaults)
    bool trace = false;
    /// Issue 17: start each layer's DP gradient all-reduce (Backend::all_reduce_start) once
    /// the chunk's last backward has passed it, and wait for them after the backward (no ZeRO,
    /// dp > 1). A GPU backend overlaps them with the backward; the CPU backend runs them at once.
    bool overlap_dp = false;
    /// Issue 16: coefficient of the MoE load-balancing loss (Switch Transformers' alpha, Fedus
    /// et al. 2021 eq. 4; they use 1e-2), added to the loss and its gradient.
    float moe_aux_loss_coeff = 0.01f;
    /// Called before every pipeline step with (iteration, step index); a test hook (fault
    /// injection). May throw, exit or block.
    std::function<void(int64_t, int64_t)> on_step;
};

struct PhaseTimes {
    double compute_s = 0.0;     // forward + backward math (everything not listed below)
    double tp_comm_s = 0.0;     // TP all-reduce / all-gather / reduce-scatter
    double pp_wait_s = 0.0;     // pipeline send / recv, including waiting for the neighbour
    double dp_comm_s = 0.0;     // DP gradient reduction, embedding sync, ZeRO all-gather (all of
                                // it: the blocking part and what ran hidden behind the backward)
    double optimizer_s = 0.0;   // Adam
    double dp_exposed_s = 0.0;  // the part of dp_comm_s that blocked the step (issue 17)
    double ep_comm_s = 0.0;     // MoE dispatch / combine all-to-alls on the EP group (issue 16)
    // Issue 18: waiting for the slowest DP rank before the gradient reduction (a one-element
    // all-reduce over the DP group just before it, timed apart), so that dp_comm_s is the
    // reduction alone. Rank skew, not communication: not part of dp_comm_s.
    double dp_wait_s = 0.0;

    bool operator==(const PhaseTimes&) const = default;
};

struct RankReport {
    int64_t world_rank = 0;
    RankCoords at;
    double iteration_time_s = 0.0;  // median over measured iterations
    PhaseTimes phases;              // medians over measured iterations
    int64_t peak_memory_B = 0;      // tracked high-water mark

    bool operator==(const RankReport&) const = default;
};

struct Measurement {
    double loss = 0.0;  // mean token loss of the last iteration (before its update), plus the
                        // MoE load-balancing loss (mean over micro-batches, summed over layers)
    std::vector<double> losses;     // every iteration, warm-up included
    int64_t warmup_iterations = 0;  // warm-up iterations run (RunOptions::warmup_max)
    double weights_checksum = 0.0;  // sum of every weight after the last update, counted once
    double weights_probe = 0.0;     // Params::probes summed over tensors and ranks (issue 16)
    std::map<std::string, double> weights_probes;  // per tensor, world rank 0 only
    double iteration_time_s = 0.0;          // median over measured iterations of the slowest rank
    std::vector<double> iteration_times_s;  // measured iterations, slowest rank each
    PhaseTimes phases;                      // mean over ranks of each rank's medians
    int64_t peak_memory_B = 0;              // max over ranks
    std::vector<RankReport> ranks;          // world rank 0 only
    Trace trace;                            // world rank 0 only, with RunOptions::trace
    double trace_origin_s = 0.0;  // this rank's backend clock at the trace's time 0
};

/// Throws ConfigError when the executor cannot run `plan` for this model and job on
/// `world_size` ranks (beyond check_plan: cp is not executed, ZeRO-3 is not executed, dp * tp *
/// pp must equal the rank count, TP must divide vocab and the kv heads; MoE needs SP with tp > 1,
/// ep * etp dividing tp * dp, no expert biases, and no ZeRO when expert-DP is not DP).
void check_executable(const ModelSpec& model,
                      const JobSpec& job,
                      const Plan& plan,
                      int64_t world_size);

/// Runs the warm-up iterations (RunOptions::warmup, or until stable up to warmup_max), then
/// iters measured training iterations. Collective over MPI_COMM_WORLD (used only to set up
/// groups and to collect the results; all training traffic goes over per-group communicators).
/// Returns loss, checksum and times on every rank; per-rank reports and the trace on rank 0.
/// Throws ConfigError (see check_executable), BackendError / CommTimeout on failures.
[[nodiscard]] Measurement run_training(Backend& be,
                                       const ModelSpec& model,
                                       const JobSpec& job,
                                       const Plan& plan,
                                       const RunOptions& options);

}  // namespace cleave::executor
