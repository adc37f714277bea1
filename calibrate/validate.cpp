#include "calibrate/validate.hpp"

#include "calibrate/fit.hpp"
#include "core/errors.hpp"
#include "executor/collect.hpp"
#include "planner/search.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace cleave::calibrate {

namespace {

bool executable(const ModelSpec& model, const JobSpec& job, const Plan& p) {
    try {
        executor::check_executable(model, job, p, job.gpus);
        return true;
    } catch (const ConfigError&) {
        return false;
    }
}

// The expert grid is part of a plan's shape (issue 16): an MoE model's table gets its best EP
// plan beside the best dense-grid one.
auto shape(const Plan& p) {
    return std::make_tuple(p.dp, p.tp, p.pp, p.ep, expert_tp(p));
}

std::string shape_name(const Plan& p) {
    std::string s =
        "dp" + std::to_string(p.dp) + " tp" + std::to_string(p.tp) + " pp" + std::to_string(p.pp);
    if (p.ep > 1) {
        s += " ep" + std::to_string(p.ep);
    }
    if (p.etp > 0 && p.etp != p.tp) {
        s += " etp" + std::to_string(p.etp);
    }
    return s;
}

}  // namespace

JobSpec as_executed(JobSpec job) {
    job.compute = Dtype::fp32;
    job.weights = Dtype::fp32;
    job.grads = Dtype::fp32;
    job.optimizer_states = Dtype::fp32;
    job.master_weights = false;
    return job;
}

std::vector<Candidate> choose_plans(const ModelSpec& model,
                                    const ClusterSpec& cluster,
                                    const JobSpec& job,
                                    int64_t top_k) {
    SearchOptions o;
    o.top_k = 1;
    const int64_t feasible = search(model, cluster, job, o).feasible;
    if (feasible == 0) {
        throw ConfigError("cleave validate: no plan of " + std::to_string(job.gpus) +
                          " GPUs fits this model and job");
    }
    o.top_k = feasible;
    std::vector<RankedPlan> all = search(model, cluster, job, o).plans;
    std::erase_if(all, [&](const RankedPlan& r) { return !executable(model, job, r.plan); });
    if (all.empty()) {
        throw ConfigError("cleave validate: none of the " + std::to_string(feasible) +
                          " feasible plans can be executed (see cleave run)");
    }
    std::vector<Candidate> out;
    const auto listed = [&](const Plan& p) {
        return std::any_of(out.begin(), out.end(), [&](const Candidate& c) { return c.plan == p; });
    };
    for (size_t i = 0; i < all.size() && static_cast<int64_t>(i) < top_k; ++i) {
        out.push_back({all[i].plan, "top-" + std::to_string(i + 1), all[i].estimate});
    }
    for (const RankedPlan& r : all) {  // best first: the first of each new shape is its best
        const bool have = std::any_of(out.begin(), out.end(), [&](const Candidate& c) {
            return shape(c.plan) == shape(r.plan);
        });
        if (!have) {
            out.push_back({r.plan, "best " + shape_name(r.plan), r.estimate});
        }
    }
    if (!listed(all.back().plan)) {
        out.push_back({all.back().plan, "poor", all.back().estimate});
    }
    return out;
}

executor::PhaseTimes predicted_phases(const Estimate& e) {
    executor::PhaseTimes p;
    p.compute_s = e.time.compute.value();
    p.tp_comm_s = e.time.tp_comm.value();
    p.pp_wait_s = (e.time.pp_comm + e.time.bubble).value();
    p.dp_comm_s = e.time.dp_comm.value();
    p.optimizer_s = e.time.optimizer.value();
    p.ep_comm_s = e.time.ep_comm.value();
    return p;
}

ValidationReport summarize(std::vector<PlanResult> plans) {
    ValidationReport r;
    std::vector<double> predicted;
    std::vector<double> measured;
    for (auto& p : plans) {
        p.error_pct = error_pct(p.predicted_s, p.measured_s);
        predicted.push_back(p.predicted_s);
        measured.push_back(p.measured_s);
    }
    r.mape_pct = mape_pct(predicted, measured);
    r.rank_correlation = spearman(predicted, measured);
    const bool priced = std::all_of(predicted.begin(), predicted.end(),
                                    [](double x) { return x > 0.0; });
    if (!plans.empty() && priced) {
        double sum_signed = 0.0;
        double sum_log = 0.0;
        double lo = 0.0;
        double hi = 0.0;
        for (size_t i = 0; i < plans.size(); ++i) {
            const double e = 100.0 * (predicted[i] - measured[i]) / measured[i];
            sum_signed += e;
            sum_log += std::log(measured[i] / predicted[i]);
            lo = i == 0 ? e : std::min(lo, e);
            hi = i == 0 ? e : std::max(hi, e);
        }
        const double n = static_cast<double>(plans.size());
        r.signed_mean_pct = sum_signed / n;
        r.signed_min_pct = lo;
        r.signed_max_pct = hi;
        r.common_factor = std::exp(sum_log / n);
        std::vector<double> scaled = predicted;
        for (double& x : scaled) {
            x *= r.common_factor;
        }
        r.scale_free_mape_pct = mape_pct(scaled, measured);
        const bool one_sign = lo > 0.0 || hi < 0.0;
        r.uniform_bias = plans.size() >= 2 && one_sign && hi - lo < std::abs(r.signed_mean_pct);
    }
    if (!plans.empty()) {
        r.predicted_best = static_cast<size_t>(
            std::min_element(predicted.begin(), predicted.end()) - predicted.begin());
        r.measured_best = static_cast<size_t>(std::min_element(measured.begin(), measured.end()) -
                                              measured.begin());
        r.predicted_best_is_measured_best = r.predicted_best == r.measured_best;
        r.regret_pct = 100.0 * (measured[r.predicted_best] - measured[r.measured_best]) /
                       measured[r.measured_best];
        const PlanResult& pb = plans[r.predicted_best];
        const PlanResult& mb = plans[r.measured_best];
        const double pb_min = pb.measured_min_s > 0.0 ? pb.measured_min_s : pb.measured_s;
        const double mb_max = mb.measured_max_s > 0.0 ? mb.measured_max_s : mb.measured_s;
        r.best_within_noise = r.predicted_best_is_measured_best || pb_min <= mb_max;
    }
    r.plans = std::move(plans);
    return r;
}

namespace {

void add_scaled(executor::PhaseTimes& sum, const executor::PhaseTimes& p, double w) {
    sum.compute_s += w * p.compute_s;
    sum.tp_comm_s += w * p.tp_comm_s;
    sum.pp_wait_s += w * p.pp_wait_s;
    sum.dp_comm_s += w * p.dp_comm_s;
    sum.optimizer_s += w * p.optimizer_s;
    sum.ep_comm_s += w * p.ep_comm_s;
    sum.dp_exposed_s += w * p.dp_exposed_s;
    sum.dp_wait_s += w * p.dp_wait_s;
}

}  // namespace

ValidationReport validate_plans(executor::Backend& be,
                                const ModelSpec& model,
                                const JobSpec& job,
                                const std::vector<Candidate>& candidates,
                                const executor::RunOptions& options,
                                const ValidateHooks& hooks,
                                int64_t rounds) {
    CLEAVE_ASSERT(rounds >= 1, "validate_plans: rounds must be at least 1");
    const size_t n = candidates.size();
    const auto r_count = static_cast<size_t>(rounds);
    std::vector<std::vector<executor::Measurement>> runs(n);
    size_t k = 0;
    for (size_t r = 0; r < r_count; ++r) {
        for (size_t i = 0; i < n; ++i, ++k) {
            if (hooks.checkpoint) {
                hooks.checkpoint(k);
            }
            if (hooks.progress) {
                hooks.progress(r, i, n, candidates[i]);
            }
            runs[i].push_back(executor::run_training(be, model, job, candidates[i].plan, options));
        }
    }
    if (hooks.checkpoint) {
        hooks.checkpoint(k);
    }
    const double w = 1.0 / static_cast<double>(r_count);
    std::vector<PlanResult> results;
    for (size_t i = 0; i < n; ++i) {
        const Candidate& c = candidates[i];
        PlanResult p;
        p.plan = c.plan;
        p.role = c.role;
        p.planned_s = c.estimate.iteration_time.value();
        std::vector<double> measured;
        std::vector<double> iterations;  // every measured iteration of every round
        for (size_t r = 0; r < r_count; ++r) {
            const executor::Measurement& m = runs[i][r];
            const Estimate e = hooks.reprice ? hooks.reprice(r * n + i, c) : c.estimate;
            measured.push_back(m.iteration_time_s);
            iterations.insert(
                iterations.end(), m.iteration_times_s.begin(), m.iteration_times_s.end());
            add_scaled(p.measured_phases, m.phases, w);
            add_scaled(p.predicted_phases, predicted_phases(e), w);
            p.predicted_s += w * e.iteration_time.value();
            p.predicted_memory_B = std::max(p.predicted_memory_B, e.memory.total.value());
            p.measured_memory_B =
                std::max(p.measured_memory_B, static_cast<double>(m.peak_memory_B));
            p.loss = m.loss;
            p.warmup_iterations = std::max(p.warmup_iterations, m.warmup_iterations);
        }
        p.measured_s = executor::median(measured);
        if (!iterations.empty()) {
            const auto [lo, hi] = std::minmax_element(iterations.begin(), iterations.end());
            p.measured_min_s = *lo;
            p.measured_max_s = *hi;
        }
        results.push_back(p);
    }
    return summarize(std::move(results));
}

}  // namespace cleave::calibrate
