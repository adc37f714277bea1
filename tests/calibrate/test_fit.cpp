#include "calibrate/fit.hpp"
#include "core/errors.hpp"

#include <cmath>
#include <vector>

#include <doctest/doctest.h>

using namespace cleave;
using namespace cleave::calibrate;

namespace {

// Ring all-reduce samples of n ranks: 2(n-1) steps, S * 2(n-1)/n bytes on the wire.
std::vector<AlphaBetaSample> synthetic(double alpha_s, double beta_Bps, double noise) {
    std::vector<AlphaBetaSample> out;
    int i = 0;
    for (const double n : {2.0, 4.0, 8.0}) {
        for (double s = 4096.0; s <= 16.0 * 1024 * 1024; s *= 4.0) {
            const double steps = 2.0 * (n - 1.0);
            const double wire = s * 2.0 * (n - 1.0) / n;
            const double sign = (i++ % 2 == 0) ? 1.0 : -1.0;  // deterministic +-noise
            out.push_back(
                {steps, wire, (alpha_s * steps + wire / beta_Bps) * (1.0 + sign * noise)});
        }
    }
    return out;
}

}  // namespace

TEST_SUITE("calibrate") {
    TEST_CASE("fit_alpha_beta: recovers alpha and beta from exact synthetic timings") {
        // alpha = 5 us per step, beta = 2 GB/s.
        const auto s = synthetic(5e-6, 2e9, 0.0);
        const AlphaBetaFit f = fit_alpha_beta(s);
        CHECK(f.alpha.value() == doctest::Approx(5e-6).epsilon(1e-9));
        CHECK(f.beta.value() == doctest::Approx(2e9).epsilon(1e-9));
        CHECK(f.rms_rel_error < 1e-9);
        CHECK(f.samples == static_cast<int64_t>(s.size()));
        // One sample by hand: n = 4, S = 1 MiB: 6 steps * 5 us + 1572864 B / 2e9 B/s
        // = 30 us + 786.432 us = 816.432 us.
        CHECK(fitted_time_s(f, {6.0, 1572864.0, 0.0}) == doctest::Approx(816.432e-6).epsilon(1e-9));
    }

    TEST_CASE("fit_alpha_beta: +-2% noise moves the fit by a few percent at most") {
        const AlphaBetaFit f = fit_alpha_beta(synthetic(20e-6, 5e9, 0.02));
        CHECK(f.alpha.value() == doctest::Approx(20e-6).epsilon(0.05));
        CHECK(f.beta.value() == doctest::Approx(5e9).epsilon(0.05));
        CHECK(f.rms_rel_error == doctest::Approx(0.02).epsilon(0.25));
    }

    TEST_CASE("fit_alpha_beta: a negative latency is clamped to zero and beta refit") {
        // Pure bandwidth (alpha = 0) with the small messages measured 10% fast: unconstrained
        // least squares would give alpha < 0.
        std::vector<AlphaBetaSample> s = synthetic(0.0, 1e9, 0.0);
        for (auto& x : s) {
            if (x.wire_B < 100000.0) {
                x.t_s *= 0.9;
            }
        }
        const AlphaBetaFit f = fit_alpha_beta(s);
        CHECK(f.alpha.value() == 0.0);
        CHECK(f.beta.value() > 1e9);
        CHECK(f.beta.value() < 1.1e9);
    }

    TEST_CASE("fit_alpha_beta: too few samples is an error") {
        const std::vector<AlphaBetaSample> one{{2.0, 1000.0, 1e-6}};
        CHECK_THROWS_AS((void)fit_alpha_beta(one), ConfigError);
        const std::vector<AlphaBetaSample> no_bytes{{2.0, 0.0, 1e-6}, {4.0, 0.0, 2e-6}};
        CHECK_THROWS_AS((void)fit_alpha_beta(no_bytes), ConfigError);
    }

    TEST_CASE("spearman: hand-computed values") {
        // d = (0-1, 1-0, ...) ranks differ by 1 in four places: sum d^2 = 4,
        // rho = 1 - 6 * 4 / (5 * (25 - 1)) = 0.8.
        const std::vector<double> a{1, 2, 3, 4, 5};
        const std::vector<double> b{2, 1, 4, 3, 5};
        CHECK(spearman(a, b) == doctest::Approx(0.8).epsilon(1e-12));
        // Rank-based: any increasing transform gives 1, any decreasing one -1.
        CHECK(spearman(a, std::vector<double>{10, 100, 1000, 1e4, 1e5}) ==
              doctest::Approx(1.0).epsilon(1e-12));
        CHECK(spearman(a, std::vector<double>{5, 4, 3, 2, 1}) ==
              doctest::Approx(-1.0).epsilon(1e-12));
        // Ties: ranks of {1, 2, 2, 3} are {1, 2.5, 2.5, 4}; centred {-1.5, 0, 0, 1.5} against
        // {-1.5, -0.5, 0.5, 1.5}: 4.5 / sqrt(4.5 * 5) = 0.9486833.
        CHECK(spearman(std::vector<double>{1, 2, 2, 3}, std::vector<double>{1, 2, 3, 4}) ==
              doctest::Approx(4.5 / std::sqrt(22.5)).epsilon(1e-12));
        CHECK(spearman(std::vector<double>{3.0}, std::vector<double>{7.0}) == 1.0);
    }

    TEST_CASE("ranks: ties share the mean rank") {
        const auto r = ranks(std::vector<double>{0.3, 0.1, 0.3, 0.2});
        CHECK(r == std::vector<double>{3.5, 1.0, 3.5, 2.0});
    }

    TEST_CASE("mape_pct: mean of absolute percentage errors") {
        // |1.1 - 1| / 1 = 10%, |0.9 - 1| / 1 = 10%, |3 - 2| / 2 = 50%: mean 70 / 3.
        const std::vector<double> p{1.1, 0.9, 3.0};
        const std::vector<double> m{1.0, 1.0, 2.0};
        CHECK(mape_pct(p, m) == doctest::Approx(70.0 / 3.0).epsilon(1e-12));
        CHECK(error_pct(3.0, 2.0) == doctest::Approx(50.0).epsilon(1e-12));
        CHECK(mape_pct(std::vector<double>{}, std::vector<double>{}) == 0.0);
    }
}
