#include "calibrate/validate.hpp"
#include "core/load.hpp"
#include "executor/registry.hpp"
#include "executor/run.hpp"
#include "tests/mpi_once.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include <doctest/doctest.h>

using namespace cleave;
using namespace cleave::calibrate;

namespace {

PlanResult result(const char* role, double predicted, double measured) {
    PlanResult r;
    r.role = role;
    r.predicted_s = predicted;
    r.measured_s = measured;
    return r;
}

}  // namespace

TEST_SUITE("calibrate") {
    TEST_CASE("summarize: errors, MAPE, rank correlation and the best-plan check") {
        const ValidationReport r =
            summarize({result("a", 1.0, 1.1), result("b", 2.0, 1.8), result("c", 1.5, 2.0)});
        // Errors: 0.1 / 1.1 = 9.0909%, 0.2 / 1.8 = 11.1111%, 0.5 / 2 = 25%.
        CHECK(r.plans[0].error_pct == doctest::Approx(100.0 / 11.0).epsilon(1e-12));
        CHECK(r.plans[1].error_pct == doctest::Approx(100.0 / 9.0).epsilon(1e-12));
        CHECK(r.plans[2].error_pct == doctest::Approx(25.0).epsilon(1e-12));
        CHECK(r.mape_pct ==
              doctest::Approx((100.0 / 11.0 + 100.0 / 9.0 + 25.0) / 3.0).epsilon(1e-12));
        // Predicted ranks a1 c2 b3, measured a1 b2 c3: sum d^2 = 2, rho = 1 - 6*2/(3*8) = 0.5.
        CHECK(r.rank_correlation == doctest::Approx(0.5).epsilon(1e-12));
        CHECK(r.predicted_best == 0);
        CHECK(r.measured_best == 0);
        CHECK(r.predicted_best_is_measured_best);
        CHECK(r.regret_pct == 0.0);

        const ValidationReport w = summarize({result("a", 1.0, 2.0), result("b", 1.5, 1.0)});
        CHECK_FALSE(w.predicted_best_is_measured_best);
        // Following the prediction runs a (2.0 s) instead of b (1.0 s): 100% regret.
        CHECK(w.regret_pct == doctest::Approx(100.0).epsilon(1e-12));
        CHECK(w.rank_correlation == doctest::Approx(-1.0).epsilon(1e-12));
        CHECK_FALSE(w.best_within_noise);  // no ranges: a (2.0) > b (1.0)
        CHECK(r.best_within_noise);
    }

    TEST_CASE("summarize: one speed factor over every plan is told apart from the plans") {
        // Predicted 1.3, 2.6, 3.9 against measured 1.0, 2.0, 3.2: signed errors +30, +30,
        // +21.875 (mean 27.292); the factor exp(mean ln(m / p)) = exp((2 ln(1/1.3) + ln(3.2/3.9))
        // / 3) = 0.78597; the spread 30 - 21.875 = 8.125 < 27.292 and one sign: uniform.
        const ValidationReport u =
            summarize({result("a", 1.3, 1.0), result("b", 2.6, 2.0), result("c", 3.9, 3.2)});
        CHECK(u.signed_mean_pct == doctest::Approx((30.0 + 30.0 + 21.875) / 3.0).epsilon(1e-12));
        CHECK(u.signed_min_pct == doctest::Approx(21.875).epsilon(1e-12));
        CHECK(u.signed_max_pct == doctest::Approx(30.0).epsilon(1e-12));
        const double f = std::exp((2.0 * std::log(1.0 / 1.3) + std::log(3.2 / 3.9)) / 3.0);
        CHECK(u.common_factor == doctest::Approx(f).epsilon(1e-12));
        CHECK(u.common_factor == doctest::Approx(0.78597).epsilon(1e-4));
        // Scaled predictions 1.3 f, 2.6 f, 3.9 f: errors |1.3 f - 1| / 1 = 2.176 %, the same for
        // b, and |3.9 f - 3.2| / 3.2 = 4.215 %.
        const double e1 = 100.0 * std::abs(1.3 * f - 1.0);
        const double e3 = 100.0 * std::abs(3.9 * f - 3.2) / 3.2;
        CHECK(u.scale_free_mape_pct == doctest::Approx((2.0 * e1 + e3) / 3.0).epsilon(1e-12));
        CHECK(u.scale_free_mape_pct < 3.0);
        CHECK(u.uniform_bias);
        // Errors of both signs (+10, -10): no common factor to blame.
        const ValidationReport m = summarize({result("a", 1.1, 1.0), result("b", 1.8, 2.0)});
        CHECK(m.signed_mean_pct == doctest::Approx(0.0).epsilon(1e-12));
        CHECK_FALSE(m.uniform_bias);
        // One sign but spread wider than the mean (+2 and +40, mean 21): the plans differ.
        CHECK_FALSE(summarize({result("a", 1.02, 1.0), result("b", 1.4, 1.0)}).uniform_bias);
        // One plan: nothing to compare.
        CHECK_FALSE(summarize({result("a", 1.3, 1.0)}).uniform_bias);
    }

    TEST_CASE("summarize: the best-plan check within the measured noise") {
        // a predicted fastest, measured 1.02 s (iterations 1.00-1.05); b measured fastest, 1.01
        // s (0.99-1.03): a's fastest iteration (1.00) is faster than b's slowest (1.03), so the
        // measurement does not order them; regret 100 x 0.01 / 1.01 = 0.990%.
        PlanResult a = result("a", 1.0, 1.02);
        a.measured_min_s = 1.00;
        a.measured_max_s = 1.05;
        PlanResult b = result("b", 1.1, 1.01);
        b.measured_min_s = 0.99;
        b.measured_max_s = 1.03;
        const ValidationReport tie = summarize({a, b});
        CHECK_FALSE(tie.predicted_best_is_measured_best);
        CHECK(tie.regret_pct == doctest::Approx(100.0 / 101.0).epsilon(1e-12));
        CHECK(tie.best_within_noise);
        // b's iterations 0.99-0.999: a's fastest (1.00) is slower than all of them.
        b.measured_max_s = 0.999;
        CHECK_FALSE(summarize({a, b}).best_within_noise);
    }

    TEST_CASE("as_executed: the executor's job is fp32 throughout") {
        JobSpec j;
        j.gpus = 2;
        j.global_batch = 8;
        const JobSpec e = as_executed(j);
        CHECK(e.compute == Dtype::fp32);
        CHECK(e.weights == Dtype::fp32);
        CHECK(e.grads == Dtype::fp32);
        CHECK_FALSE(e.master_weights);
        CHECK(e.gpus == 2);
        CHECK(e.global_batch == 8);
    }

    TEST_CASE("choose_plans: top plans, one per missing shape, and the poor one") {
        const ModelSpec m =
            load_model(std::string(CLEAVE_TEST_DATA_DIR) + "/tests/calibrate/data/tiny-gpt.toml");
        const ClusterSpec c = load_cluster("dgx-h100");
        JobSpec j;
        j.gpus = 2;
        j.global_batch = 4;
        j.seq_len = 32;
        j = as_executed(j);
        const auto cands = choose_plans(m, c, j, 2);
        REQUIRE(cands.size() >= 4);
        CHECK(cands[0].role == "top-1");
        CHECK(cands[1].role == "top-2");
        CHECK(cands.back().role == "poor");
        std::set<std::tuple<int64_t, int64_t, int64_t>> shapes;
        for (const auto& x : cands) {
            shapes.insert({x.plan.dp, x.plan.tp, x.plan.pp});
            CHECK_NOTHROW(executor::check_executable(m, j, x.plan, 2));
            CHECK(x.estimate.fits);
            // The planner ranks by time: top-1 is the fastest listed, poor the slowest.
            CHECK(cands[0].estimate.iteration_time <= x.estimate.iteration_time);
            CHECK(cands.back().estimate.iteration_time >= x.estimate.iteration_time);
        }
        CHECK(shapes.size() == 3);  // dp2, tp2 and pp2 all present
    }

    TEST_CASE("choose_plans: an MoE model's table has an EP plan the executor runs") {
        // Issue 16: ep (and etp) are part of a plan's shape, so the best executable dp2 ep2
        // plan is listed beside the dense-grid ones, named after its expert grid.
        const ModelSpec m =
            load_model(std::string(CLEAVE_TEST_DATA_DIR) + "/tests/calibrate/data/small-moe.toml");
        JobSpec j;
        j.gpus = 2;
        j.global_batch = 8;
        j.seq_len = 128;
        j = as_executed(j);
        const auto cands = choose_plans(m, load_cluster("dgx-h100"), j, 1);
        bool ep_plan = false;
        for (const auto& x : cands) {
            CHECK_NOTHROW(executor::check_executable(m, j, x.plan, 2));
            if (x.plan.ep == 2 && x.plan.dp == 2) {
                ep_plan = true;
                CHECK(x.role.find("ep2") != std::string::npos);
            }
        }
        CHECK(ep_plan);
    }

    TEST_CASE("predicted_phases: pp_wait is exposed send/recv plus the bubble") {
        Estimate e;
        e.time.compute = seconds(1.0);
        e.time.tp_comm = seconds(0.25);
        e.time.pp_comm = seconds(0.125);
        e.time.bubble = seconds(0.5);
        e.time.dp_comm = seconds(0.0625);
        e.time.optimizer = seconds(0.03125);
        const executor::PhaseTimes p = predicted_phases(e);
        CHECK(p.compute_s == 1.0);
        CHECK(p.tp_comm_s == 0.25);
        CHECK(p.pp_wait_s == 0.625);
        CHECK(p.dp_comm_s == 0.0625);
        CHECK(p.optimizer_s == 0.03125);
    }

    TEST_CASE("validate_plans: checkpoints bracket every run and reprice sets the prediction") {
        test::ensure_mpi();
        const ModelSpec m =
            load_model(std::string(CLEAVE_TEST_DATA_DIR) + "/tests/calibrate/data/tiny-gpt.toml");
        JobSpec j;
        j.gpus = 1;
        j.global_batch = 2;
        j.seq_len = 32;
        j = as_executed(j);
        auto cands = choose_plans(m, load_cluster("dgx-h100"), j, 2);
        REQUIRE(cands.size() >= 2);
        cands.resize(2);
        auto be = executor::make_backend("cpu", {});
        executor::RunOptions ro;
        ro.iters = 1;
        ro.warmup = 0;
        std::vector<std::string> calls;
        ValidateHooks hooks;
        hooks.checkpoint = [&](size_t i) { calls.push_back("checkpoint " + std::to_string(i)); };
        hooks.progress = [&](size_t round, size_t i, size_t n, const Candidate&) {
            calls.push_back("run " + std::to_string(i) + "/" + std::to_string(n) + " round " +
                            std::to_string(round));
        };
        hooks.reprice = [&](size_t i, const Candidate& c) {
            calls.push_back("reprice " + std::to_string(i));
            Estimate e = c.estimate;
            e.iteration_time = seconds(0.5 + static_cast<double>(i));  // 0.5 s, 1.5 s
            e.time.compute = seconds(0.25);
            e.memory.total = bytes(1024.0 * static_cast<double>(i + 1));
            return e;
        };
        const ValidationReport r = validate_plans(*be, m, j, cands, ro, hooks);
        CHECK(calls == std::vector<std::string>{"checkpoint 0",
                                                "run 0/2 round 0",
                                                "checkpoint 1",
                                                "run 1/2 round 0",
                                                "checkpoint 2",
                                                "reprice 0",
                                                "reprice 1"});
        REQUIRE(r.plans.size() == 2);
        for (size_t i = 0; i < 2; ++i) {
            const PlanResult& p = r.plans[i];
            CHECK(p.plan == cands[i].plan);
            CHECK(p.planned_s == cands[i].estimate.iteration_time.value());
            CHECK(p.predicted_s == 0.5 + static_cast<double>(i));
            CHECK(p.predicted_phases.compute_s == 0.25);
            CHECK(p.predicted_memory_B == 1024.0 * static_cast<double>(i + 1));
            CHECK(p.measured_s > 0.0);
            CHECK(p.error_pct ==
                  doctest::Approx(100.0 * std::abs(p.predicted_s - p.measured_s) / p.measured_s)
                      .epsilon(1e-12));
        }
        // Two rounds in turn: run k is candidate k % 2 of round k / 2; its prediction is the
        // mean of its rounds' (0.5 and 2.5 s for candidate 0: 1.5 s; 1.5 and 3.5: 2.5 s).
        calls.clear();
        const ValidationReport two = validate_plans(*be, m, j, cands, ro, hooks, 2);
        CHECK(calls == std::vector<std::string>{"checkpoint 0",
                                                "run 0/2 round 0",
                                                "checkpoint 1",
                                                "run 1/2 round 0",
                                                "checkpoint 2",
                                                "run 0/2 round 1",
                                                "checkpoint 3",
                                                "run 1/2 round 1",
                                                "checkpoint 4",
                                                "reprice 0",
                                                "reprice 2",
                                                "reprice 1",
                                                "reprice 3"});
        CHECK(two.plans[0].predicted_s == doctest::Approx(1.5).epsilon(1e-12));
        CHECK(two.plans[1].predicted_s == doctest::Approx(2.5).epsilon(1e-12));
        CHECK(two.plans[0].predicted_phases.compute_s == doctest::Approx(0.25).epsilon(1e-12));
        CHECK(two.plans[1].predicted_memory_B == 4096.0);  // max of k = 1, 3: 2048, 4096
        CHECK(two.plans[0].measured_s > 0.0);
        for (const PlanResult& p : two.plans) {
            // The median of the rounds' medians lies within the range of every iteration.
            CHECK(p.measured_min_s > 0.0);
            CHECK(p.measured_min_s <= p.measured_s);
            CHECK(p.measured_s <= p.measured_max_s);
        }

        // Without hooks the prediction is the estimate from plan choice.
        const ValidationReport plain = validate_plans(*be, m, j, cands, ro);
        CHECK(plain.plans[1].predicted_s == cands[1].estimate.iteration_time.value());
        CHECK(plain.plans[1].planned_s == plain.plans[1].predicted_s);
    }
}
