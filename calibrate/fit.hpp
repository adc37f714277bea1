#pragma once
// Statistics of calibration and validation: the alpha-beta fit of collective times, the Spearman
// rank correlation and the mean absolute percentage error. Pure functions (STYLE S2.2).

#include "core/units.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace cleave::calibrate {

/// One timed collective in the form the alpha-beta model sees it: `steps` sequential latency
/// steps (costmodel ring_steps) and `wire_B` = S * busbw factor bytes (nccl-tests' busbw
/// convention, so that 1/beta is the inverse bus bandwidth).
struct AlphaBetaSample {
    double steps = 0.0;
    double wire_B = 0.0;
    double t_s = 0.0;

    bool operator==(const AlphaBetaSample&) const = default;
};

struct AlphaBetaFit {
    Seconds alpha;               // latency per ring step
    BytesPerSecond beta;         // bus bandwidth
    double rms_rel_error = 0.0;  // sqrt(mean((t_fit - t) / t)^2) over the samples
    int64_t samples = 0;

    bool operator==(const AlphaBetaFit&) const = default;
};

/// Least-squares fit of t = alpha * steps + wire_B / beta, each row weighted by 1 / t so the
/// fit minimises relative error (times span several decades). When the unconstrained alpha comes
/// out negative (noise at tiny sizes), alpha = 0 and beta is refit alone. Throws ConfigError when
/// fewer than two samples have t > 0 or no sample moves bytes.
[[nodiscard]] AlphaBetaFit fit_alpha_beta(std::span<const AlphaBetaSample> samples);

/// Predicted time of one sample under a fit.
[[nodiscard]] double fitted_time_s(const AlphaBetaFit& f, const AlphaBetaSample& s);

/// Ranks 1..n of `x` (ties get the mean of the ranks they span).
[[nodiscard]] std::vector<double> ranks(std::span<const double> x);

/// Spearman's rank correlation of two equally long series: the Pearson correlation of their
/// ranks (ties averaged). Returns 1 for fewer than two values or when either series is constant
/// in rank and the other is too, 0 when only one of them is constant.
/// Precondition: a.size() == b.size().
[[nodiscard]] double spearman(std::span<const double> a, std::span<const double> b);

/// 100 * |predicted - measured| / measured.
[[nodiscard]] double error_pct(double predicted, double measured);

/// Mean of error_pct over the pairs (0 for none). Precondition: equal sizes, measured > 0.
[[nodiscard]] double mape_pct(std::span<const double> predicted, std::span<const double> measured);

}  // namespace cleave::calibrate
