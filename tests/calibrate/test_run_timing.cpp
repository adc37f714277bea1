// Issue 18: the executor's timing as validate relies on it: polling MPI without starving its
// progress, warm-up until the iteration time is stable, and waiting apart from moving bytes.
#include "core/load.hpp"
#include "executor/collect.hpp"
#include "executor/mpi_util.hpp"
#include "executor/registry.hpp"
#include "executor/run.hpp"
#include "tests/mpi_once.hpp"

#include <doctest/doctest.h>

using namespace cleave;

TEST_SUITE("calibrate") {
    TEST_CASE("poll_pause_us: a rank with a core of its own polls without sleeping") {
        using executor::detail::poll_pause_us;
        // Not oversubscribed: yield only (0), however long the wait: 0.5 s waited is still 0.
        CHECK(poll_pause_us(0.0, false) == 0);
        CHECK(poll_pause_us(0.05, false) == 0);
        CHECK(poll_pause_us(0.5, false) == 0);
        // Oversubscribed: yield for 2 ms, then 50 us sleeps up to 0.1 s, then 500 us.
        CHECK(poll_pause_us(1e-3, true) == 0);
        CHECK(poll_pause_us(5e-3, true) == 50);
        CHECK(poll_pause_us(0.2, true) == 500);
    }

    TEST_CASE("warmed_up: the last two warm-up iterations within the tolerance") {
        using executor::warmed_up;
        CHECK_FALSE(warmed_up({}, 0.05));
        CHECK_FALSE(warmed_up({1.0}, 0.05));
        // |1.30 - 1.00| = 0.30 > 0.05 x 1.30 = 0.065: not yet.
        CHECK_FALSE(warmed_up({1.30, 1.00}, 0.05));
        // |1.00 - 0.96| = 0.04 <= 0.05 x 1.00 = 0.05: stable (the first, slow one is ignored).
        CHECK(warmed_up({1.30, 1.00, 0.96}, 0.05));
        // |1.00 - 1.06| = 0.06 > 0.05 x 1.06 = 0.053: not yet.
        CHECK_FALSE(warmed_up({1.00, 1.06}, 0.05));
        CHECK(warmed_up({1.00, 1.06}, 0.06));  // 0.06 <= 0.06 x 1.06 = 0.0636
    }

    TEST_CASE("run_training: warm-up until stable and capped, exactly --warmup without a cap") {
        test::ensure_mpi();
        const ModelSpec m =
            load_model(std::string(CLEAVE_TEST_DATA_DIR) + "/tests/calibrate/data/tiny-gpt.toml");
        JobSpec j;
        j.gpus = 1;
        j.global_batch = 2;
        j.seq_len = 32;
        Plan p;
        auto be = executor::make_backend("cpu", {});
        executor::RunOptions o;
        o.iters = 2;
        o.warmup = 1;
        o.warmup_max = 0;
        const executor::Measurement fixed = executor::run_training(*be, m, j, p, o);
        CHECK(fixed.warmup_iterations == 1);
        CHECK(fixed.losses.size() == 3);  // 1 warm-up + 2 measured
        CHECK(fixed.iteration_times_s.size() == 2);
        CHECK(fixed.phases.dp_wait_s == 0.0);  // one rank: no DP group to wait for

        o.warmup_max = 4;
        o.stable_tolerance = 10.0;  // any two iterations agree: stops at the first pair
        const executor::Measurement loose = executor::run_training(*be, m, j, p, o);
        CHECK(loose.warmup_iterations == 2);
        CHECK(loose.losses.size() == 4);

        o.stable_tolerance = 0.0;  // two equal wall times never happen: runs to the cap
        const executor::Measurement capped = executor::run_training(*be, m, j, p, o);
        CHECK(capped.warmup_iterations == 4);
        CHECK(capped.losses.size() == 6);
        CHECK(capped.iteration_times_s.size() == 2);
        // The same seed and data: the first iteration's loss is the same whatever follows.
        CHECK(capped.losses.front() == fixed.losses.front());
    }
}
