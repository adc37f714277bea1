#pragma once
// Time, GPU-hours, energy and money to train on a number of tokens at a plan's throughput, with
// the time expected to be lost to unplanned interruptions shown apart (docs/costmodel.md,
// "Time and cost to train").

#include "core/units.hpp"

#include <cstdint>

namespace cleave {

/// Unexpected interruptions per GPU-hour in Meta's Llama 3 405B pre-training: 419 in a 54-day
/// snapshot on 16,384 H100 GPUs (Dubey et al. 2024, "The Llama 3 Herd of Models", Sec. 3.3.4,
/// Table 5): 419 / (54 * 24 * 16384) = 419 / 21,233,664 = 1.9733e-5.
inline constexpr double llama3_interruptions_per_gpu_hour = 419.0 / (54.0 * 24.0 * 16384.0);

/// What a training run costs beyond the plan itself.
struct TrainCostOptions {
    double tokens = 0.0;                  // tokens to train on; 0 = no estimate
    double price_per_gpu_hour_usd = 0.0;  // 0 = unknown (no cost)
    double gpu_power_w = 0.0;             // board power of one GPU; 0 = unknown (no energy)
    double pue = 1.0;                     // facility power / IT power; 1 = the GPUs alone
    double interruptions_per_gpu_hour = llama3_interruptions_per_gpu_hour;
    /// Work since the last checkpoint is lost at an interruption: half an interval on average.
    /// Default one hour, the period Huawei MindCluster's resumable-training guide assumes
    /// (hiascend.com MindCluster 7.3.0 "Performance Description": "saved once an hour").
    Seconds checkpoint_interval{3600.0};
    /// Time from an interruption to training again (reschedule, init, load). A guess: 15 min.
    Seconds restart_time{900.0};

    bool operator==(const TrainCostOptions&) const = default;
};

struct TrainCost {
    Seconds compute_time;        // tokens / tokens_per_s, no interruptions
    Seconds lost_time;           // expected time lost to interruptions (rework + restarts)
    Seconds wall_time;           // compute_time + lost_time
    double interruptions = 0.0;  // expected count over the whole run
    double gpu_hours = 0.0;      // gpus * wall_time (GPUs stay reserved while lost)
    double energy_mwh = 0.0;     // gpus * power * pue * wall_time; 0 when power is unknown
    double cost_usd = 0.0;       // gpu_hours * price; 0 when the price is unknown
    /// false: interruptions come faster than the run recovers (lambda * gpus * loss >= 1), so
    /// the expected time is unbounded; wall_time, lost_time, gpu_hours, energy and cost are inf.
    bool finishes = true;

    bool operator==(const TrainCost&) const = default;
};

/// Expected time lost per interruption: half a checkpoint interval of rework plus the restart
/// (first-order model, Young 1974, "A first order approximation to the optimum checkpoint
/// interval", CACM 17(9): a failure lands uniformly inside an interval).
[[nodiscard]] Seconds loss_per_interruption(const TrainCostOptions& o);

/// Time and money to train o.tokens at `tokens_per_s` on `gpus` GPUs. Interruptions arrive at
/// rate lambda = o.interruptions_per_gpu_hour * gpus per hour of wall time, each costing L =
/// loss_per_interruption(o); wall time W solves W = C + lambda * W * L, so W = C / (1 - lambda L).
/// Pure. Precondition: tokens_per_s > 0, gpus > 0.
[[nodiscard]] TrainCost train_cost(const TrainCostOptions& o, double tokens_per_s, int64_t gpus);

}  // namespace cleave
