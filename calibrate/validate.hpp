#pragma once
// Validation: plan a job, run the chosen plans through the executor, and compare the cost
// model's predictions with the measurements (iteration time, phases, peak memory; MAPE and the
// Spearman rank correlation of the two orders).

#include "core/cluster.hpp"
#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "costmodel/estimate.hpp"
#include "executor/backend.hpp"
#include "executor/run.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cleave::calibrate {

/// A plan chosen for validation and why: "top-N" (the planner's N-th best), "best <shape>" (the
/// best plan of a dp/tp/pp shape the top list lacks) or "poor" (the worst feasible plan).
struct Candidate {
    Plan plan;
    std::string role;
    Estimate estimate;
};

/// The job as the executor runs it: every tensor in fp32 (weights, grads, optimizer states; no
/// separate master copy), so the cost model prices the same bytes and FLOP rates.
[[nodiscard]] JobSpec as_executed(JobSpec job);

/// Plans to validate on `job.gpus` ranks, every one executable (executor::check_executable):
/// the top_k best, then the best plan of each dp x tp x pp shape not yet listed, then the worst
/// feasible plan. Pure. Throws ConfigError when no executable plan fits.
[[nodiscard]] std::vector<Candidate>
choose_plans(const ModelSpec& model, const ClusterSpec& cluster, const JobSpec& job, int64_t top_k);

/// Per-phase times in the executor's split: pp_wait = exposed send/recv + bubble (what a stage
/// spends waiting for its neighbours).
[[nodiscard]] executor::PhaseTimes predicted_phases(const Estimate& e);

struct PlanResult {
    Plan plan;
    std::string role;
    double predicted_s = 0.0;
    double planned_s = 0.0;  // the prediction at plan choice (differs under --calibrate)
    double measured_s = 0.0;
    // The fastest and slowest measured iteration (slowest rank each) over every round: the
    // machine's run-to-run noise for this plan (0: take measured_s).
    double measured_min_s = 0.0;
    double measured_max_s = 0.0;
    double error_pct = 0.0;  // 100 |predicted - measured| / measured
    executor::PhaseTimes predicted_phases;
    executor::PhaseTimes measured_phases;
    double predicted_memory_B = 0.0;  // cost model: peak stage total
    double measured_memory_B = 0.0;   // executor: tracked high-water mark, max over ranks
    double loss = 0.0;
    int64_t warmup_iterations = 0;  // the most any round ran (RunOptions::warmup_max)

    bool operator==(const PlanResult&) const = default;
};

struct ValidationReport {
    std::vector<PlanResult> plans;  // in the order run
    double mape_pct = 0.0;
    double rank_correlation = 0.0;  // Spearman of predicted vs measured times
    bool predicted_best_is_measured_best = false;
    size_t predicted_best = 0;  // index into plans
    size_t measured_best = 0;
    // What following the prediction costs: 100 (measured time of the predicted fastest - the
    // measured fastest) / the measured fastest; 0 when they are the same plan.
    double regret_pct = 0.0;
    // The best-plan check allowing for noise: the predicted fastest is the measured fastest, or
    // its fastest iteration was no slower than the measured fastest's slowest (their measured
    // ranges overlap, so the measurement does not order the two).
    bool best_within_noise = false;
    // A machine that ran at another speed than its profile's moves every plan the same way.
    // signed_mean_pct: mean of 100 (predicted - measured) / measured. common_factor: the
    // geometric mean of measured / predicted; scale_free_mape_pct: the MAPE of predicted x
    // common_factor (what is left once one speed factor is taken out: the plans' relative
    // prices, which ranking relies on). uniform_bias: every plan's error has the mean's sign
    // and the signed errors spread over less than the mean's size (the machine, not the plans).
    double signed_mean_pct = 0.0;
    double signed_min_pct = 0.0;  // the plans' signed errors: the lowest and the highest
    double signed_max_pct = 0.0;
    double common_factor = 1.0;
    double scale_free_mape_pct = 0.0;
    bool uniform_bias = false;

    bool operator==(const ValidationReport&) const = default;
};

/// Errors, MAPE, rank correlation and the best-plan check over `plans` (predicted_s and
/// measured_s set). Pure. Precondition: every measured_s > 0.
[[nodiscard]] ValidationReport summarize(std::vector<PlanResult> plans);

/// (round, index, count) before each run; called on every rank.
using RunProgressFn =
    std::function<void(size_t round, size_t index, size_t count, const Candidate& c)>;

/// What validate_plans calls besides the runs; every member may be empty.
struct ValidateHooks {
    RunProgressFn progress;
    /// Called on every rank before run k (k = 0 .. runs-1; run k is candidate k % n of round
    /// k / n) and once after the last (k = runs): `--calibrate` measures the machine here, so
    /// that run k lies between measurements k and k + 1.
    std::function<void(size_t k)> checkpoint;
    /// After every run: the prediction for run k of candidate c (default: c's estimate from
    /// plan choice).
    std::function<Estimate(size_t k, const Candidate& c)> reprice;
};

/// Runs every candidate with executor::run_training, `rounds` times in turn (round-robin: all
/// candidates once, then again), and summarizes: per candidate the measured time is the median
/// over its rounds, the predicted time and both phase splits the mean over its rounds. Taking
/// turns spreads a machine's slow minutes over every plan instead of one. Collective over the
/// world (every rank calls it with the same arguments); every rank returns the same report.
/// PlanResult::planned_s is the candidate's estimate. Precondition: rounds >= 1.
[[nodiscard]] ValidationReport validate_plans(executor::Backend& be,
                                              const ModelSpec& model,
                                              const JobSpec& job,
                                              const std::vector<Candidate>& candidates,
                                              const executor::RunOptions& options,
                                              const ValidateHooks& hooks = {},
                                              int64_t rounds = 1);

}  // namespace cleave::calibrate
