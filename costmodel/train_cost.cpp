#include "costmodel/train_cost.hpp"

#include <limits>

namespace cleave {

Seconds loss_per_interruption(const TrainCostOptions& o) {
    // Young 1974: the expected rework is half the checkpoint interval.
    return o.checkpoint_interval * 0.5 + o.restart_time;
}

TrainCost train_cost(const TrainCostOptions& o, double tokens_per_s, int64_t gpus) {
    constexpr double s_per_h = 3600.0;
    const auto n = static_cast<double>(gpus);
    TrainCost c;
    c.compute_time = Seconds{o.tokens / tokens_per_s};
    // Interruptions per second of wall time, and the fraction of wall time they eat.
    const double rate_per_s = o.interruptions_per_gpu_hour * n / s_per_h;
    const double lost_fraction = rate_per_s * loss_per_interruption(o).value();
    if (lost_fraction >= 1.0) {
        const double inf = std::numeric_limits<double>::infinity();
        c.finishes = false;
        c.wall_time = c.lost_time = Seconds{inf};
        c.interruptions = c.gpu_hours = inf;
        c.energy_mwh = o.gpu_power_w > 0.0 ? inf : 0.0;
        c.cost_usd = o.price_per_gpu_hour_usd > 0.0 ? inf : 0.0;
        return c;
    }
    // W = C + rate * W * L  =>  W = C / (1 - rate * L).
    c.wall_time = c.compute_time / (1.0 - lost_fraction);
    c.lost_time = c.wall_time - c.compute_time;
    c.interruptions = rate_per_s * c.wall_time.value();
    c.gpu_hours = n * c.wall_time.value() / s_per_h;
    // Energy: board power at every GPU for the whole wall time, times the facility's PUE;
    // W * h = Wh, / 1e6 = MWh.
    c.energy_mwh = o.gpu_power_w * o.pue * c.gpu_hours / 1e6;
    c.cost_usd = o.price_per_gpu_hour_usd * c.gpu_hours;
    return c;
}

}  // namespace cleave
