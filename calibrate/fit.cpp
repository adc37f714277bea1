#include "calibrate/fit.hpp"

#include "core/errors.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <Eigen/Dense>

namespace cleave::calibrate {

namespace {

double rms_rel(const AlphaBetaFit& f, std::span<const AlphaBetaSample> samples) {
    double sum = 0.0;
    int64_t n = 0;
    for (const auto& s : samples) {
        if (s.t_s > 0.0) {
            const double r = (fitted_time_s(f, s) - s.t_s) / s.t_s;
            sum += r * r;
            ++n;
        }
    }
    return n > 0 ? std::sqrt(sum / static_cast<double>(n)) : 0.0;
}

}  // namespace

AlphaBetaFit fit_alpha_beta(std::span<const AlphaBetaSample> samples) {
    std::vector<AlphaBetaSample> use;
    for (const auto& s : samples) {
        if (s.t_s > 0.0 && s.steps >= 0.0 && s.wire_B >= 0.0) {
            use.push_back(s);
        }
    }
    const bool moves_bytes =
        std::any_of(use.begin(), use.end(), [](const auto& s) { return s.wire_B > 0.0; });
    if (use.size() < 2 || !moves_bytes) {
        throw ConfigError("alpha-beta fit needs at least two timed samples that move bytes (got " +
                          std::to_string(use.size()) + ")");
    }
    // Weighted least squares: row i scaled by 1/t_i, so the residual is the relative error.
    const auto n = static_cast<Eigen::Index>(use.size());
    Eigen::MatrixXd a(n, 2);
    Eigen::VectorXd y(n);
    for (Eigen::Index i = 0; i < n; ++i) {
        const auto& s = use[static_cast<size_t>(i)];
        a(i, 0) = s.steps / s.t_s;
        a(i, 1) = s.wire_B / s.t_s;
        y(i) = 1.0;
    }
    Eigen::Vector2d x = a.colPivHouseholderQr().solve(y);
    if (!(x(0) >= 0.0) || !(x(1) > 0.0)) {
        // alpha = 0: minimise sum (w_i / beta / t_i - 1)^2 for 1/beta alone.
        const Eigen::VectorXd col = a.col(1);
        x(0) = 0.0;
        x(1) = col.dot(y) / col.dot(col);
    }
    AlphaBetaFit f;
    f.alpha = seconds(x(0));
    f.beta = BytesPerSecond{1.0 / x(1)};
    f.samples = static_cast<int64_t>(use.size());
    f.rms_rel_error = rms_rel(f, use);
    return f;
}

double fitted_time_s(const AlphaBetaFit& f, const AlphaBetaSample& s) {
    return f.alpha.value() * s.steps + s.wire_B / f.beta.value();
}

std::vector<double> ranks(std::span<const double> x) {
    std::vector<size_t> order(x.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) { return x[i] < x[j]; });
    std::vector<double> r(x.size());
    size_t i = 0;
    while (i < order.size()) {
        size_t j = i;
        while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) {
            ++j;
        }
        const double mean_rank = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
        for (size_t k = i; k <= j; ++k) {
            r[order[k]] = mean_rank;
        }
        i = j + 1;
    }
    return r;
}

double spearman(std::span<const double> a, std::span<const double> b) {
    CLEAVE_ASSERT(a.size() == b.size(), "spearman: series of different lengths");
    if (a.size() < 2) {
        return 1.0;
    }
    const std::vector<double> ra = ranks(a);
    const std::vector<double> rb = ranks(b);
    const double n = static_cast<double>(a.size());
    const double mean = (n + 1.0) / 2.0;
    double sab = 0.0;
    double saa = 0.0;
    double sbb = 0.0;
    for (size_t i = 0; i < ra.size(); ++i) {
        sab += (ra[i] - mean) * (rb[i] - mean);
        saa += (ra[i] - mean) * (ra[i] - mean);
        sbb += (rb[i] - mean) * (rb[i] - mean);
    }
    if (saa == 0.0 || sbb == 0.0) {
        return saa == sbb ? 1.0 : 0.0;
    }
    return sab / std::sqrt(saa * sbb);
}

double error_pct(double predicted, double measured) {
    return 100.0 * std::abs(predicted - measured) / measured;
}

double mape_pct(std::span<const double> predicted, std::span<const double> measured) {
    CLEAVE_ASSERT(predicted.size() == measured.size(), "mape_pct: series of different lengths");
    if (predicted.empty()) {
        return 0.0;
    }
    double sum = 0.0;
    for (size_t i = 0; i < predicted.size(); ++i) {
        sum += error_pct(predicted[i], measured[i]);
    }
    return sum / static_cast<double>(predicted.size());
}

}  // namespace cleave::calibrate
