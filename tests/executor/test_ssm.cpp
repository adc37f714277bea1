// The Mamba-2 host kernels (executor/ssm_kernels.hpp): the chunked SSD scan against values worked
// by hand and against the plain sequential recurrence; every backward against central finite
// differences of its own forward.
#include "executor/registry.hpp"
#include "executor/ssm_kernels.hpp"
#include "tests/mpi_once.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <doctest/doctest.h>

using namespace cleave::executor;

namespace {

using Vecf = std::vector<float>;

// A deterministic value in [-1, 1] (a hash of seed and index; no global RNG state).
float pm1(uint64_t seed, uint64_t i) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ULL + i * 0xBF58476D1CE4E5B9ULL + 0x94D049BB133111EBULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return static_cast<float>(static_cast<double>(z >> 11) / static_cast<double>(1ULL << 52) - 1.0);
}

Vecf filled(uint64_t seed, int64_t n, float scale = 1.0f, float offset = 0.0f) {
    Vecf v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        v[static_cast<size_t>(i)] = offset + scale * pm1(seed, static_cast<uint64_t>(i));
    }
    return v;
}

// The recurrence of Mamba-2 position by position, in double (Dao & Gu 2024, eq. (1) with the
// scalar-times-identity A of Sec. 3): state_t = exp(dt_t A) state_{t-1} + dt_t x_t B_t^T,
// y_t = state_t C_t + D x_t.
Vecf ssd_reference(const SsdShape& s,
                   const Vecf& x,
                   const Vecf& dt_raw,
                   const Vecf& dt_bias,
                   const Vecf& a_log,
                   const Vecf& b,
                   const Vecf& c,
                   const Vecf& d) {
    Vecf y(x.size());
    const int64_t per_group = s.heads / s.groups;
    for (int64_t bi = 0; bi < s.batch; ++bi) {
        for (int64_t h = 0; h < s.heads; ++h) {
            const int64_t g = h / per_group;
            const double a = -std::exp(static_cast<double>(a_log[static_cast<size_t>(h)]));
            std::vector<double> st(static_cast<size_t>(s.head_dim * s.state), 0.0);
            for (int64_t t = 0; t < s.seq; ++t) {
                const int64_t row = t * s.batch + bi;
                const double u = dt_raw[static_cast<size_t>(row * s.heads + h)] +
                                 dt_bias[static_cast<size_t>(h)];
                const double dt = std::log1p(std::exp(u));
                const double decay = std::exp(dt * a);
                for (int64_t p = 0; p < s.head_dim; ++p) {
                    const double xv = x[static_cast<size_t>(row * s.heads * s.head_dim +
                                                            h * s.head_dim + p)];
                    double out = d[static_cast<size_t>(h)] * xv;
                    for (int64_t n = 0; n < s.state; ++n) {
                        const size_t bc = static_cast<size_t>(row * s.groups * s.state +
                                                              g * s.state + n);
                        double& sv = st[static_cast<size_t>(p * s.state + n)];
                        sv = decay * sv + dt * xv * b[bc];
                        out += sv * c[bc];
                    }
                    y[static_cast<size_t>(row * s.heads * s.head_dim + h * s.head_dim + p)] =
                        static_cast<float>(out);
                }
            }
        }
    }
    return y;
}

// The directional derivative of f along a random direction in `v`, by central differences,
// against the projection of the analytic gradient `g` on that direction.
void check_direction(const char* what,
                     Vecf& v,
                     const Vecf& g,
                     const std::function<double()>& f,
                     uint64_t seed,
                     double h = 1e-2) {
    const std::string name = what;
    CAPTURE(name);
    REQUIRE(g.size() == v.size());
    std::vector<double> u(v.size());
    double norm = 0.0;
    for (size_t i = 0; i < u.size(); ++i) {
        u[i] = pm1(seed, i);
        norm += u[i] * u[i];
    }
    norm = std::sqrt(norm);
    double proj = 0.0;
    double gnorm = 0.0;
    for (size_t i = 0; i < u.size(); ++i) {
        u[i] /= norm;
        proj += u[i] * g[i];
        gnorm += static_cast<double>(g[i]) * g[i];
    }
    gnorm = std::sqrt(gnorm);
    const Vecf orig = v;
    const auto shifted = [&](double t) {
        for (size_t i = 0; i < v.size(); ++i) {
            v[i] = static_cast<float>(orig[i] + t * u[i]);
        }
        return f();
    };
    const double fd = (shifted(h) - shifted(-h)) / (2.0 * h);
    v = orig;
    // fp32 forward of a loss of order 1-10: rounding ~1e-6, over 2h = 2e-2 ~5e-5; truncation
    // h^2 f''' / 6 ~2e-5. A wrong term of the backward is off by a share of |g|.
    if (std::getenv("GRADCHECK_VERBOSE") != nullptr) {
        std::printf("%-8s |g| %.4e proj %.6e fd %.6e\n", what, gnorm, proj, fd);
    }
    CHECK(gnorm > 1e-3);
    CHECK(std::abs(fd - proj) <= 2e-3 * gnorm + 2e-4);
}

double dot(const Vecf& a, const Vecf& b) {
    double s = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        s += static_cast<double>(a[i]) * b[i];
    }
    return s;
}

}  // namespace

TEST_SUITE("executor") {
    TEST_CASE("ssd_fwd: two steps worked by hand, chunk 1 and chunk 2") {
        // One head, P = N = 1. dt_raw = dt_bias = 0: dt = softplus(0) = ln 2 = 0.693147;
        // a_log = 0: A = -1, so exp(dt A) = 1/2. x = (1, 2), B = C = 1, D = 0.5.
        //   state_1 = ln 2 * 1 = 0.693147,            y_1 = 0.693147 + 0.5 * 1 = 1.193147
        //   state_2 = 0.5 * 0.693147 + ln 2 * 2 = 1.732868,  y_2 = 1.732868 + 0.5 * 2 = 2.732868
        for (const int64_t chunk : {1, 2}) {
            CAPTURE(chunk);
            const SsdShape s{.seq = 2, .batch = 1, .heads = 1, .head_dim = 1, .groups = 1,
                             .state = 1, .chunk = chunk};
            const Vecf x{1.0f, 2.0f};
            const Vecf dt_raw{0.0f, 0.0f};
            const Vecf zero{0.0f};
            const Vecf ones{1.0f, 1.0f};
            const Vecf d{0.5f};
            Vecf y(2);
            host::ssd_fwd(s, x.data(), dt_raw.data(), zero.data(), zero.data(), ones.data(),
                          ones.data(), d.data(), y.data());
            CHECK(y[0] == doctest::Approx(1.193147).epsilon(1e-6));
            CHECK(y[1] == doctest::Approx(2.732868).epsilon(1e-6));
        }
    }

    TEST_CASE("ssd_fwd: the chunked scan equals the sequential recurrence (uneven last chunk)") {
        // seq 7 in chunks of 3 (3, 3, 1); 4 heads in 2 groups; two batch elements interleaved.
        for (const int64_t chunk : {1, 3, 7, 16}) {
            CAPTURE(chunk);
            const SsdShape s{.seq = 7, .batch = 2, .heads = 4, .head_dim = 3, .groups = 2,
                             .state = 5, .chunk = chunk};
            const int64_t rows = s.rows();
            const Vecf x = filled(1, rows * s.heads * s.head_dim);
            const Vecf dt_raw = filled(2, rows * s.heads, 1.5f);
            const Vecf dt_bias = filled(3, s.heads, 0.5f);
            const Vecf a_log = filled(4, s.heads, 1.0f);
            const Vecf b = filled(5, rows * s.groups * s.state);
            const Vecf c = filled(6, rows * s.groups * s.state);
            const Vecf d = filled(7, s.heads);
            Vecf y(x.size());
            host::ssd_fwd(s, x.data(), dt_raw.data(), dt_bias.data(), a_log.data(), b.data(),
                          c.data(), d.data(), y.data());
            const Vecf ref = ssd_reference(s, x, dt_raw, dt_bias, a_log, b, c, d);
            double worst = 0.0;
            for (size_t i = 0; i < y.size(); ++i) {
                worst = std::max(worst, static_cast<double>(std::abs(y[i] - ref[i])));
            }
            CHECK(worst < 1e-5);
            CHECK(dot(ref, ref) > 1.0);  // not a trivial zero output
        }
    }

    TEST_CASE("ssd_bwd: every input's gradient matches finite differences") {
        for (const int64_t chunk : {2, 3}) {
            CAPTURE(chunk);
            const SsdShape s{.seq = 5, .batch = 2, .heads = 4, .head_dim = 2, .groups = 2,
                             .state = 3, .chunk = chunk};
            const int64_t rows = s.rows();
            Vecf x = filled(11, rows * s.heads * s.head_dim);
            Vecf dt_raw = filled(12, rows * s.heads, 1.0f);
            Vecf dt_bias = filled(13, s.heads, 0.5f);
            Vecf a_log = filled(14, s.heads, 0.7f);
            Vecf b = filled(15, rows * s.groups * s.state);
            Vecf c = filled(16, rows * s.groups * s.state);
            Vecf d = filled(17, s.heads);
            const Vecf dy = filled(18, static_cast<int64_t>(x.size()));
            const auto loss = [&] {
                Vecf y(x.size());
                host::ssd_fwd(s, x.data(), dt_raw.data(), dt_bias.data(), a_log.data(), b.data(),
                              c.data(), d.data(), y.data());
                return dot(y, dy);
            };
            Vecf dx(x.size(), -9.0f);  // overwritten
            Vecf ddt(dt_raw.size(), -9.0f);
            Vecf db(b.size(), -9.0f);
            Vecf dc(c.size(), -9.0f);
            Vecf ddt_bias(dt_bias.size(), 0.0f);  // accumulated
            Vecf da_log(a_log.size(), 0.0f);
            Vecf dd(d.size(), 0.0f);
            host::ssd_bwd(s, x.data(), dt_raw.data(), dt_bias.data(), a_log.data(), b.data(),
                          c.data(), d.data(), dy.data(), dx.data(), ddt.data(), db.data(),
                          dc.data(), ddt_bias.data(), da_log.data(), dd.data());
            check_direction("x", x, dx, loss, 21);
            check_direction("dt_raw", dt_raw, ddt, loss, 22);
            check_direction("b", b, db, loss, 23);
            check_direction("c", c, dc, loss, 24);
            check_direction("dt_bias", dt_bias, ddt_bias, loss, 25);
            check_direction("a_log", a_log, da_log, loss, 26);
            check_direction("d", d, dd, loss, 27);
            // Accumulated: a second call adds the same again.
            Vecf dd2 = dd;
            host::ssd_bwd(s, x.data(), dt_raw.data(), dt_bias.data(), a_log.data(), b.data(),
                          c.data(), d.data(), dy.data(), dx.data(), ddt.data(), db.data(),
                          dc.data(), ddt_bias.data(), da_log.data(), dd2.data());
            CHECK(dd2[0] == doctest::Approx(2.0 * dd[0]).epsilon(1e-5));
        }
    }

    TEST_CASE("causal_conv1d: worked by hand, and its backward matches finite differences") {
        // One channel, kernel 3, w = (w0, w1, w2) = (1, 2, 3), bias 0.5, x = (1, 10, 100):
        //   y_0 = 0.5 + 3*1 = 3.5;  y_1 = 0.5 + 2*1 + 3*10 = 32.5;
        //   y_2 = 0.5 + 1*1 + 2*10 + 3*100 = 321.5 (tap k = kernel-1 is the current position).
        {
            const Vecf x{1.0f, 10.0f, 100.0f};
            const Vecf w{1.0f, 2.0f, 3.0f};
            const Vecf bias{0.5f};
            Vecf y(3);
            host::causal_conv1d_fwd(x.data(), 3, 1, 1, 3, w.data(), bias.data(), y.data());
            CHECK(y[0] == doctest::Approx(3.5));
            CHECK(y[1] == doctest::Approx(32.5));
            CHECK(y[2] == doctest::Approx(321.5));
        }
        const int64_t seq = 6;
        const int64_t batch = 2;
        const int64_t ch = 3;
        const int64_t k = 4;
        Vecf x = filled(31, seq * batch * ch);
        Vecf w = filled(32, k * ch);
        Vecf bias = filled(33, ch);
        const Vecf dy = filled(34, seq * batch * ch);
        const auto loss = [&] {
            Vecf y(x.size());
            host::causal_conv1d_fwd(x.data(), seq, batch, ch, k, w.data(), bias.data(), y.data());
            return dot(y, dy);
        };
        Vecf dx(x.size(), 7.0f);
        Vecf dw(w.size(), 0.0f);
        Vecf dbias(bias.size(), 0.0f);
        host::causal_conv1d_bwd(x.data(), dy.data(), seq, batch, ch, k, w.data(), dx.data(),
                                dw.data(), dbias.data());
        check_direction("x", x, dx, loss, 41);
        check_direction("w", w, dw, loss, 42);
        check_direction("bias", bias, dbias, loss, 43);
    }

    TEST_CASE("gated RMSNorm, SiLU and squared ReLU: values by hand and backward by finite "
              "differences") {
        // Squared ReLU: (-2, 0.5, 3) -> (0, 0.25, 9); d/dx at dy = 1: (0, 1, 6).
        {
            const Vecf x{-2.0f, 0.5f, 3.0f};
            const Vecf one{1.0f, 1.0f, 1.0f};
            Vecf y(3);
            Vecf g(3);
            host::squared_relu_fwd(x.data(), 3, y.data());
            host::squared_relu_bwd(x.data(), one.data(), 3, g.data());
            CHECK(y[0] == 0.0f);
            CHECK(y[1] == doctest::Approx(0.25));
            CHECK(y[2] == doctest::Approx(9.0));
            CHECK(g[0] == 0.0f);
            CHECK(g[1] == doctest::Approx(1.0));
            CHECK(g[2] == doctest::Approx(6.0));
        }
        // SiLU(1) = 1 * sigmoid(1) = 0.731059; silu'(1) = s (1 + 1 (1 - s)) = 0.927671.
        {
            const Vecf x{1.0f};
            const Vecf one{1.0f};
            Vecf y(1);
            Vecf g(1);
            host::silu_fwd(x.data(), 1, y.data());
            host::silu_bwd(x.data(), one.data(), 1, g.data());
            CHECK(y[0] == doctest::Approx(0.731059).epsilon(1e-5));
            CHECK(g[0] == doctest::Approx(0.927671).epsilon(1e-5));
        }
        // Gated norm, one group of 2: y = (1, 2), z = (1, 1), gamma = (1, 2), eps = 0:
        // v = y silu(1) = (0.731059, 1.462117); rms = sqrt((0.534447 + 2.137788) / 2) = 1.155903;
        // out = v / rms * gamma = (0.632456, 2.529822) (= (1, 2) / sqrt(2.5) * gamma).
        {
            const Vecf y{1.0f, 2.0f};
            const Vecf z{1.0f, 1.0f};
            const Vecf gamma{1.0f, 2.0f};
            Vecf out(2);
            Vecf rstd(1);
            host::gated_rmsnorm_fwd(y.data(), z.data(), 1, 2, 2, gamma.data(), 0.0f, out.data(),
                                    rstd.data());
            CHECK(out[0] == doctest::Approx(0.632456).epsilon(1e-5));
            CHECK(out[1] == doctest::Approx(2.529822).epsilon(1e-5));
            CHECK(rstd[0] == doctest::Approx(1.0 / 1.155903).epsilon(1e-5));
        }
        // The backward: 3 rows x 6 columns in groups of 3.
        const int64_t rows = 3;
        const int64_t cols = 6;
        const int64_t group = 3;
        Vecf y = filled(51, rows * cols);
        Vecf z = filled(52, rows * cols, 2.0f);
        Vecf gamma = filled(53, cols, 0.5f, 1.0f);
        const Vecf dout = filled(54, rows * cols);
        const auto loss = [&] {
            Vecf out(y.size());
            Vecf rstd(static_cast<size_t>(rows * cols / group));
            host::gated_rmsnorm_fwd(y.data(), z.data(), rows, cols, group, gamma.data(), 1e-5f,
                                    out.data(), rstd.data());
            return dot(out, dout);
        };
        Vecf out(y.size());
        Vecf rstd(static_cast<size_t>(rows * cols / group));
        host::gated_rmsnorm_fwd(y.data(), z.data(), rows, cols, group, gamma.data(), 1e-5f,
                                out.data(), rstd.data());
        Vecf dy(y.size(), 3.0f);
        Vecf dz(z.size(), 3.0f);
        Vecf dgamma(gamma.size(), 0.0f);
        host::gated_rmsnorm_bwd(dout.data(), y.data(), z.data(), rows, cols, group, gamma.data(),
                                rstd.data(), dy.data(), dz.data(), dgamma.data());
        check_direction("y", y, dy, loss, 61, 1e-3);
        check_direction("z", z, dz, loss, 62, 1e-3);
        check_direction("gamma", gamma, dgamma, loss, 63, 1e-3);
    }

    TEST_CASE("Mamba-2 ops: Backend's host defaults (the CUDA backend's path) equal the CPU "
              "backend's own") {
        // The CPU backend overrides every op; a GPU backend runs Backend's defaults
        // (executor/backend_host.cpp), which copy through host memory. Called non-virtually on
        // the CPU backend, the defaults must give the same bits.
        cleave::test::ensure_mpi();
        const auto be = make_backend("cpu", BackendOptions{});
        Backend& b = *be;
        const auto dev = [&](const Vecf& v) {
            Buffer x(b, static_cast<int64_t>(v.size()));
            b.upload(x, v);
            return x;
        };
        const auto host = [&](const Buffer& x) {
            Vecf v(static_cast<size_t>(x.size()));
            b.download(v, x);
            return v;
        };
        const SsdShape s{.seq = 7, .batch = 2, .heads = 4, .head_dim = 2, .groups = 2,
                         .state = 3, .chunk = 3};
        const int64_t rows = s.rows();
        const Buffer x = dev(filled(71, rows * 8));
        const Buffer dt = dev(filled(72, rows * 4));
        const Buffer dtb = dev(filled(73, 4, 0.5f));
        const Buffer al = dev(filled(74, 4, 0.5f));
        const Buffer bm = dev(filled(75, rows * 6));
        const Buffer cm = dev(filled(76, rows * 6));
        const Buffer dd = dev(filled(77, 4));
        const Buffer dy = dev(filled(78, rows * 8));
        Buffer y1(b, rows * 8);
        Buffer y2(b, rows * 8);
        b.ssd_fwd(s, x, dt, dtb, al, bm, cm, dd, y1);
        b.Backend::ssd_fwd(s, x, dt, dtb, al, bm, cm, dd, y2);
        CHECK(host(y1) == host(y2));
        // Backward: overwritten outputs and accumulated ones (started from the same values).
        std::vector<Buffer> g1;
        std::vector<Buffer> g2;
        for (const int64_t n : {rows * 8, rows * 4, rows * 6, rows * 6, int64_t{4}, int64_t{4},
                                int64_t{4}}) {
            g1.push_back(dev(filled(79, n)));
            g2.push_back(dev(filled(79, n)));
        }
        b.ssd_bwd(s, x, dt, dtb, al, bm, cm, dd, dy, g1[0], g1[1], g1[2], g1[3], g1[4], g1[5],
                  g1[6]);
        b.Backend::ssd_bwd(s, x, dt, dtb, al, bm, cm, dd, dy, g2[0], g2[1], g2[2], g2[3], g2[4],
                           g2[5], g2[6]);
        for (size_t i = 0; i < g1.size(); ++i) {
            CAPTURE(i);
            CHECK(host(g1[i]) == host(g2[i]));
        }
        // Conv (x as 8 channels), SiLU, squared ReLU, the gated norm (groups of 4 columns).
        const Buffer w = dev(filled(80, 4 * 8));
        const Buffer wb = dev(filled(81, 8));
        b.causal_conv1d_fwd(x, 7, 2, 8, 4, w, wb, y1);
        b.Backend::causal_conv1d_fwd(x, 7, 2, 8, 4, w, wb, y2);
        CHECK(host(y1) == host(y2));
        Buffer dx1 = dev(filled(82, rows * 8));
        Buffer dx2 = dev(filled(82, rows * 8));
        Buffer dw1 = dev(filled(83, 32));
        Buffer dw2 = dev(filled(83, 32));
        Buffer db1 = dev(filled(84, 8));
        Buffer db2 = dev(filled(84, 8));
        b.causal_conv1d_bwd(x, dy, 7, 2, 8, 4, w, dx1, dw1, db1);
        b.Backend::causal_conv1d_bwd(x, dy, 7, 2, 8, 4, w, dx2, dw2, db2);
        CHECK(host(dx1) == host(dx2));
        CHECK(host(dw1) == host(dw2));
        CHECK(host(db1) == host(db2));
        b.silu_fwd(x, y1);
        b.Backend::silu_fwd(x, y2);
        CHECK(host(y1) == host(y2));
        b.silu_bwd(x, dy, y1);
        b.Backend::silu_bwd(x, dy, y2);
        CHECK(host(y1) == host(y2));
        b.squared_relu_fwd(x, y1);
        b.Backend::squared_relu_fwd(x, y2);
        CHECK(host(y1) == host(y2));
        b.squared_relu_bwd(x, dy, y1);
        b.Backend::squared_relu_bwd(x, dy, y2);
        CHECK(host(y1) == host(y2));
        const Buffer gamma = dev(filled(85, 8, 0.5f, 1.0f));
        Buffer r1(b, rows * 2);
        Buffer r2(b, rows * 2);
        b.gated_rmsnorm_fwd(x, dy, rows, 8, 4, gamma, 1e-5f, y1, r1);
        b.Backend::gated_rmsnorm_fwd(x, dy, rows, 8, 4, gamma, 1e-5f, y2, r2);
        CHECK(host(y1) == host(y2));
        CHECK(host(r1) == host(r2));
        Buffer dz1(b, rows * 8);
        Buffer dz2(b, rows * 8);
        Buffer dg1 = dev(filled(86, 8));
        Buffer dg2 = dev(filled(86, 8));
        b.gated_rmsnorm_bwd(dy, x, dy, rows, 8, 4, gamma, r1, dx1, dz1, dg1);
        b.Backend::gated_rmsnorm_bwd(dy, x, dy, rows, 8, 4, gamma, r2, dx2, dz2, dg2);
        CHECK(host(dx1) == host(dx2));
        CHECK(host(dz1) == host(dz2));
        CHECK(host(dg1) == host(dg2));
        CHECK(host(dg1) != filled(86, 8));  // accumulated into
    }
}
