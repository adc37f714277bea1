#include "costmodel/train_cost.hpp"

#include <cmath>

#include <doctest/doctest.h>

using namespace cleave;

namespace {

/// 1e12 tokens at 1e6 tokens/s on 1000 GPUs; 700 W, PUE 1.2, $2 per GPU-hour.
TrainCostOptions base_options() {
    TrainCostOptions o;
    o.tokens = 1e12;
    o.gpu_power_w = 700.0;
    o.pue = 1.2;
    o.price_per_gpu_hour_usd = 2.0;
    o.checkpoint_interval = Seconds{2.0 * 3600.0};
    o.restart_time = Seconds{0.5 * 3600.0};
    return o;
}

}  // namespace

TEST_SUITE("costmodel") {
    TEST_CASE("train cost: Llama 3's interruption rate") {
        // 419 / (54 days * 24 h * 16384 GPUs) = 419 / 21,233,664 = 1.97328e-5 per GPU-hour
        CHECK(llama3_interruptions_per_gpu_hour == doctest::Approx(1.97328e-5).epsilon(1e-5));
    }

    TEST_CASE("train cost: days, GPU-hours, energy and cost without interruptions") {
        TrainCostOptions o = base_options();
        o.interruptions_per_gpu_hour = 0.0;
        const TrainCost c = train_cost(o, 1e6, 1000);
        // C = 1e12 / 1e6 = 1e6 s = 11.574 days = 277.78 h
        CHECK(c.compute_time.value() == doctest::Approx(1e6));
        CHECK(c.wall_time.value() == doctest::Approx(1e6));
        CHECK(c.wall_time.value() / 86400.0 == doctest::Approx(11.5741).epsilon(1e-4));
        CHECK(c.lost_time.value() == doctest::Approx(0.0));
        CHECK(c.interruptions == doctest::Approx(0.0));
        // GPU-hours = 1000 * 1e6 / 3600 = 277,777.8
        CHECK(c.gpu_hours == doctest::Approx(277777.78).epsilon(1e-6));
        // energy = 700 W * 1.2 * 277,777.8 GPU-h = 233,333,333 Wh = 233.33 MWh
        CHECK(c.energy_mwh == doctest::Approx(233.3333).epsilon(1e-6));
        // cost = $2 * 277,777.8 = $555,555.6
        CHECK(c.cost_usd == doctest::Approx(555555.56).epsilon(1e-6));
        CHECK(c.finishes);
    }

    TEST_CASE("train cost: interruptions stretch the run") {
        TrainCostOptions o = base_options();
        o.interruptions_per_gpu_hour = 1e-4;
        // L = 2 h / 2 + 0.5 h = 1.5 h (Young 1974: half an interval of rework + restart)
        CHECK(loss_per_interruption(o).value() == doctest::Approx(1.5 * 3600.0));
        const TrainCost c = train_cost(o, 1e6, 1000);
        // rate = 1e-4 * 1000 = 0.1 per hour; lost fraction = 0.1 * 1.5 = 0.15
        // W = 1e6 / (1 - 0.15) = 1,176,470.59 s = 13.617 days; lost = 176,470.59 s = 2.042 days
        CHECK(c.wall_time.value() == doctest::Approx(1176470.59).epsilon(1e-8));
        CHECK(c.wall_time.value() / 86400.0 == doctest::Approx(13.6166).epsilon(1e-4));
        CHECK(c.lost_time.value() == doctest::Approx(176470.59).epsilon(1e-8));
        CHECK(c.compute_time.value() == doctest::Approx(1e6));
        // interruptions = 0.1 / h * 326.797 h = 32.68; their loss 32.68 * 1.5 h = 49.02 h = lost
        CHECK(c.interruptions == doctest::Approx(32.6797).epsilon(1e-5));
        CHECK(c.interruptions * 1.5 * 3600.0 == doctest::Approx(c.lost_time.value()));
        // GPU-hours = 1000 * 326.797 h = 326,797.4; cost = $653,594.8
        CHECK(c.gpu_hours == doctest::Approx(326797.39).epsilon(1e-7));
        CHECK(c.cost_usd == doctest::Approx(653594.77).epsilon(1e-7));
        // energy = 0.84 kW * 326,797.4 GPU-h = 274.51 MWh
        CHECK(c.energy_mwh == doctest::Approx(274.5098).epsilon(1e-6));
    }

    TEST_CASE("train cost: a run that never finishes, and unknown price and power") {
        TrainCostOptions o = base_options();
        o.interruptions_per_gpu_hour = 1e-3;  // 1 per hour on 1000 GPUs, each losing 1.5 h
        const TrainCost c = train_cost(o, 1e6, 1000);
        CHECK_FALSE(c.finishes);
        CHECK(std::isinf(c.wall_time.value()));
        o.interruptions_per_gpu_hour = 0.0;
        o.price_per_gpu_hour_usd = 0.0;
        o.gpu_power_w = 0.0;
        const TrainCost d = train_cost(o, 1e6, 1000);
        CHECK(d.cost_usd == 0.0);
        CHECK(d.energy_mwh == 0.0);
        CHECK(d.gpu_hours == doctest::Approx(277777.78).epsilon(1e-6));
    }
}
