// cleave validate: plan a job, run the chosen plans through the executor, and print predicted
// against measured (docs/calibrate.md).
#include "calibrate/measure.hpp"
#include "calibrate/mpi_session.hpp"
#include "calibrate/profile.hpp"
#include "calibrate/validate.hpp"
#include "api/run.hpp"
#include "api/detail.hpp"
#include "core/errors.hpp"
#include "costmodel/estimate.hpp"
#include "executor/registry.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <ostream>

#include <nlohmann/json.hpp>

namespace cleave::api {

namespace {


std::string fmt(const char* spec, double v) {
    return detail::format_number(spec, v);
}

std::string pair_ms(double p, double m) {
    return fmt("%.1f", p * 1e3) + "/" + fmt("%.1f", m * 1e3);
}

void print_validate_table(std::ostream& os,
                 const calibrate::ValidationReport& r,
                 const ValidateOptions& o,
                 const Inputs& in) {
    os << "# cleave validate: " << in.model.name << " on " << in.cluster.name << ", " << in.job.gpus
       << " rank(s), gbs " << in.job.global_batch << ", seq " << in.job.seq_len << ", fp32, "
       << o.iters << " iterations after "
       << (o.warmup_max > o.warmup ? std::to_string(o.warmup) + "-" + std::to_string(o.warmup_max) +
                                         " warm-up (until two in a row are within 5%)"
                                   : std::to_string(o.warmup) + " warm-up")
       << " (median)"
       << (o.rounds > 1 ? ", " + std::to_string(o.rounds) +
                              " rounds in turn (measured: median of the rounds; predicted: mean)"
                        : std::string())
       << "\n"
       << "# phases: predicted/measured ms; pp = send/recv + bubble; dp = the reduction alone, "
          "dpwait = waiting for the slowest DP rank before it (measured; not priced); memory: "
          "peak stage MiB\n"
       << "# band(ms): the fastest-slowest measured iteration of the plan over every round (the "
          "machine's noise)\n";
    if (o.calibrate) {
        os << "# --calibrate: each plan priced with the mean of the compute calibrations just "
              "before and just after its run (collectives: the one before planning); "
              "plan(ms) = its price at plan choice\n";
    }
    // An ep column (the all-to-alls) only when some plan has expert parallelism.
    const bool any_ep =
        std::any_of(r.plans.begin(), r.plans.end(), [](const auto& p) { return p.plan.ep > 1; });
    const auto col = [](const std::string& x) {  // one right-aligned 13-wide column and a space
        return std::string(x.size() < 13 ? 13 - x.size() : 0, ' ') + x + " ";
    };
    char line[512];
    std::snprintf(line,
                  sizeof line,
                  "# %-18s %-44s %s%9s %9s %6s %17s %13s %13s %13s %13s %s%8s %13s %13s\n",
                  "role",
                  "plan",
                  o.calibrate ? " plan(ms) " : "",
                  "pred(ms)",
                  "meas(ms)",
                  "err%",
                  "band(ms)",
                  "compute",
                  "tp",
                  "pp",
                  "dp",
                  any_ep ? col("ep").c_str() : "",
                  "dpwait",
                  "optimizer",
                  "mem(MiB)");
    os << line;
    for (const auto& p : r.plans) {
        const auto& a = p.predicted_phases;
        const auto& b = p.measured_phases;
        std::snprintf(
            line,
            sizeof line,
            "  %-18s %-44s %s%9.2f %9.2f %6.1f %17s %13s %13s %13s %13s %s%8s %13s %13s\n",
            p.role.c_str(),
            to_string(p.plan).c_str(),
            // The plan(ms) column only with --calibrate (otherwise it equals pred).
            o.calibrate ? fmt("%9.2f ", p.planned_s * 1e3).c_str() : "",
            p.predicted_s * 1e3,
            p.measured_s * 1e3,
            p.error_pct,
            (fmt("%.1f", p.measured_min_s * 1e3) + "-" + fmt("%.1f", p.measured_max_s * 1e3))
                .c_str(),
            pair_ms(a.compute_s, b.compute_s).c_str(),
            pair_ms(a.tp_comm_s, b.tp_comm_s).c_str(),
            pair_ms(a.pp_wait_s, b.pp_wait_s).c_str(),
            pair_ms(a.dp_comm_s, b.dp_comm_s).c_str(),
            any_ep ? col(pair_ms(a.ep_comm_s, b.ep_comm_s)).c_str() : "",
            fmt("%.1f", b.dp_wait_s * 1e3).c_str(),
            pair_ms(a.optimizer_s, b.optimizer_s).c_str(),
            (fmt("%.1f", p.predicted_memory_B / 1048576.0) + "/" +
             fmt("%.1f", p.measured_memory_B / 1048576.0))
                .c_str());
        os << line;
    }
    double worst = 0.0;
    for (const auto& p : r.plans) {
        worst = std::max(worst, p.error_pct);
    }
    os << "# MAPE " << fmt("%.1f", r.mape_pct) << "% (max " << fmt("%.1f", o.max_error_pct)
       << "%), largest plan error " << fmt("%.1f", worst) << "%, Spearman rank correlation "
       << fmt("%.3f", r.rank_correlation) << ", predicted fastest ("
       << r.plans[r.predicted_best].role << ") "
       << (r.predicted_best_is_measured_best ? "is" : "is NOT") << " the measured fastest ("
       << r.plans[r.measured_best].role << ")";
    if (!r.predicted_best_is_measured_best) {
        const calibrate::PlanResult& pb = r.plans[r.predicted_best];
        const calibrate::PlanResult& mb = r.plans[r.measured_best];
        os << ", " << fmt("%.1f", r.regret_pct) << "% slower";
        if (pb.measured_max_s > 0.0 && mb.measured_max_s > 0.0) {
            os << "; measured iterations " << fmt("%.1f", pb.measured_min_s * 1e3) << "-"
               << fmt("%.1f", pb.measured_max_s * 1e3) << " against "
               << fmt("%.1f", mb.measured_min_s * 1e3) << "-"
               << fmt("%.1f", mb.measured_max_s * 1e3) << " ms"
               << (r.best_within_noise ? ": they overlap, a tie within this machine's noise"
                                       : ": apart");
        }
    }
    os << "\n";
    if (r.uniform_bias) {
        os << "# every plan was predicted " << (r.signed_mean_pct > 0.0 ? "slower" : "faster")
           << " than it ran (signed mean " << fmt("%+.1f", r.signed_mean_pct) << "%, plans "
           << fmt("%+.1f", r.signed_min_pct) << " to " << fmt("%+.1f", r.signed_max_pct)
           << "%): the machine ran at another speed than the profile's. With that one factor (x"
           << fmt("%.3f", r.common_factor) << ") taken out the MAPE is "
           << fmt("%.1f", r.scale_free_mape_pct)
           << "%. Calibrate again, or validate --calibrate to calibrate around every run.\n";
    }
}

nlohmann::json validate_phases_json(const executor::PhaseTimes& p) {
    return {{"compute", p.compute_s},
            {"tp_comm", p.tp_comm_s},
            {"pp_wait", p.pp_wait_s},
            {"dp_comm", p.dp_comm_s},
            {"ep_comm", p.ep_comm_s},
            {"dp_wait", p.dp_wait_s},
            {"optimizer", p.optimizer_s}};
}

nlohmann::json
validate_json(const calibrate::ValidationReport& r, const ValidateOptions& o, const Inputs& in) {
    auto plans = nlohmann::json::array();
    for (const auto& p : r.plans) {
        nlohmann::json j = plan_to_json(p.plan, in.job);
        j["role"] = p.role;
        j["plan"] = to_string(p.plan);
        j["predicted_s"] = p.predicted_s;
        j["planned_s"] = p.planned_s;
        j["measured_s"] = p.measured_s;
        j["measured_min_s"] = p.measured_min_s;
        j["measured_max_s"] = p.measured_max_s;
        j["error_pct"] = p.error_pct;
        j["phases_s"] = {{"predicted", validate_phases_json(p.predicted_phases)},
                         {"measured", validate_phases_json(p.measured_phases)}};
        j["peak_memory_gib"] = {{"predicted", p.predicted_memory_B / 1073741824.0},
                                {"measured", p.measured_memory_B / 1073741824.0}};
        j["loss"] = p.loss;
        j["warmup_iterations"] = p.warmup_iterations;
        plans.push_back(j);
    }
    return {{"model", in.model.name},
            {"cluster", in.cluster.name},
            {"ranks", in.job.gpus},
            {"backend", o.backend},
            {"calibrated", o.calibrate},
            {"iters", o.iters},
            {"warmup", o.warmup},
            {"warmup_max", o.warmup_max},
            {"rounds", o.rounds},
            {"plans", plans},
            {"mape_pct", r.mape_pct},
            {"max_error_pct", o.max_error_pct},
            {"rank_correlation", r.rank_correlation},
            {"predicted_best_is_measured_best", r.predicted_best_is_measured_best},
            {"best_plan_regret_pct", r.regret_pct},
            {"best_plan_within_noise", r.best_within_noise},
            {"signed_mean_pct", r.signed_mean_pct},
            {"signed_min_pct", r.signed_min_pct},
            {"signed_max_pct", r.signed_max_pct},
            {"common_factor", r.common_factor},
            {"scale_free_mape_pct", r.scale_free_mape_pct},
            {"uniform_bias", r.uniform_bias}};
}

// --calibrate: the measurements around the runs, and the profiles made from them.
class Calibrator {
public:
    Calibrator(executor::Backend& be, const ValidateOptions& o, bool root, std::ostream& err)
        : be_(be)
        , root_(root)
        , err_(err) {
        bench_.quick = o.calibrate_quick;
        if (root) {
            bench_.progress = [&err](std::string_view what, int64_t done, int64_t total) {
                err << "\r# calibrate: " << what << " " << done << "/" << total
                    << (done == total ? "\n" : "") << std::flush;
            };
        }
    }

    // The whole machine, before planning: checkpoint 0.
    ClusterSpec measure_all() {
        if (root_) {
            err_ << "# validate: calibrating this machine (GEMM, memory, kernels, collectives)\n";
        }
        at_.push_back(calibrate::measure(be_, bench_));
        return profile(at_.back());
    }

    // Checkpoint i > 0: the compute side again (i == 0 is measure_all's).
    void checkpoint(size_t i) {
        if (i == 0) {
            return;
        }
        if (root_) {
            err_ << "# validate: calibrating the compute side again (checkpoint " << i << ")\n";
        }
        at_.push_back(calibrate::measure_compute(be_, bench_, at_.front()));
    }

    // Run i lies between checkpoints i and i + 1.
    [[nodiscard]] ClusterSpec around_run(size_t i) const {
        return profile(calibrate::mean_of(at_.at(i), at_.at(i + 1)));
    }

    [[nodiscard]] std::string first_profile_toml(const std::string& command) const {
        const calibrate::Summary s = calibrate::summarize(at_.front());
        return calibrate::profile_toml(
            at_.front(), s, calibrate::to_cluster(at_.front(), s, name()), {utc_now(), command});
    }

private:
    [[nodiscard]] std::string name() const { return "calibrated-" + at_.front().host; }

    [[nodiscard]] ClusterSpec profile(const calibrate::Calibration& c) const {
        return calibrate::to_cluster(c, calibrate::summarize(c), name());
    }

    executor::Backend& be_;
    bool root_;
    std::ostream& err_;
    calibrate::BenchOptions bench_;
    std::vector<calibrate::Calibration> at_;
};

}  // namespace

Validated validate(const JobOptions& job,
                   const ValidateOptions& o,
                   int rank,
                   int world,
                   std::ostream& err,
                   const ValidateProgressFn& progress) {
    const bool root = rank == 0;
    JobOptions jf = job;
    jf.gpus = world;
    Validated out;
    out.options = o;
    Inputs& in = out.inputs;
    calibrate::ValidationReport& r = out.report;
    std::string& first_profile = out.first_profile;
    {
        if (job.gpus > 0 && job.gpus != world) {
            throw ConfigError("--gpus " + std::to_string(job.gpus) + " but " +
                              std::to_string(world) +
                              " ranks run (mpirun -np N sets the count)");
        }
        if (o.calibrate && !job.cluster.empty()) {
            throw ConfigError("CLUSTER '" + job.cluster +
                              "' and --calibrate: --calibrate measures this machine instead, give "
                              "one or the other");
        }
        if (!o.calibrate && job.cluster.empty()) {
            throw ConfigError(
                "CLUSTER is required (a profile from cleave calibrate), or --calibrate");
        }
        if (!o.calibrate && (o.calibrate_quick || !o.save_profile.empty())) {
            throw ConfigError("--calibrate-quick and --save-profile need --calibrate");
        }
        in = load_inputs(jf, "megatron-2021");  // the executor's materialised attention
        in.job = calibrate::as_executed(in.job);
        executor::BackendOptions bo;
        bo.timeout_s = o.timeout_s;
        auto be = executor::make_backend(o.backend, bo);
        std::unique_ptr<Calibrator> cal;
        if (o.calibrate) {
            cal = std::make_unique<Calibrator>(*be, o, root, err);
            in.cluster = cal->measure_all();
        }
        const auto candidates = calibrate::choose_plans(in.model, in.cluster, in.job, o.top);
        executor::RunOptions ro;
        ro.iters = o.iters;
        ro.warmup = o.warmup;
        ro.warmup_max = o.warmup_max;
        calibrate::ValidateHooks hooks;
        // Plans run so far over all rounds.
        if (progress) {
            hooks.progress = [&](size_t round, size_t i, size_t n, const calibrate::Candidate& c) {
                progress(static_cast<int64_t>(round * n + i),
                         static_cast<int64_t>(static_cast<size_t>(o.rounds) * n),
                         c.role + ": " + to_string(c.plan));
            };
        }
        if (cal) {
            hooks.checkpoint = [&](size_t i) { cal->checkpoint(i); };
            hooks.reprice = [&](size_t i, const calibrate::Candidate& c) {
                return estimate(in.model, cal->around_run(i), in.job, c.plan);
            };
            first_profile = cal->first_profile_toml(
                "mpirun -np " + std::to_string(world) + " cleave validate --calibrate" +
                (o.calibrate_quick ? " --calibrate-quick" : "") + " (the profile it planned with)");
        }
        r = calibrate::validate_plans(*be, in.model, in.job, candidates, ro, hooks, o.rounds);
    }
    if (root && !o.save_profile.empty()) {
        std::ofstream f(o.save_profile);
        if (!(f << first_profile)) {
            throw ConfigError("--save-profile: cannot write '" + o.save_profile + "'");
        }
        err << "# validate: the profile it planned with is in " << o.save_profile << "\n";
    }
    return out;
}

nlohmann::json to_json(const Validated& v) {
    return validate_json(v.report, v.options, v.inputs);
}

void print_table(std::ostream& os, const Validated& v) {
    print_validate_table(os, v.report, v.options, v.inputs);
}

}  // namespace cleave::api
