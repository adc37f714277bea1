// Issue 17 on the GPU: bf16 / fp16 GEMMs on tensor cores against the fp32 CPU reference, with
// error bounds derived below; a bf16 training run against the fp32 CPU run; and the fused
// (flash-style) attention against the unfused path, forward and backward.
#include "core/load.hpp"
#include "executor/cpu/cpu_backend.hpp"
#include "executor/cuda/cuda_backend.hpp"
#include "executor/run.hpp"
#include "tests/cuda/cuda_fixture.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <doctest/doctest.h>

using namespace cleave;
using namespace cleave::executor;
using namespace cleave::executor::test;

namespace {

// Values in [-1, 1) on a 1/4096 grid: exact in fp32, mostly not in bf16 / fp16, so the
// tensor-core rounding shows.
std::vector<float> fine(int64_t n, int seed) {
    std::vector<float> v = ints(n, seed, 4096);
    for (float& x : v) {
        x /= 4096.0f;
    }
    return v;
}

// eighths() / 4: multiples of 1/32 in [-0.5, 0.5], exact in fp32; small enough that the scores
// (|q.k| / sqrt(hd) <= 0.25 hd / sqrt(hd) <= 3.2 at hd 160) leave the softmax far from one-hot,
// so every key's term shows in the comparison.
std::vector<float> quarter_eighths(int64_t n, int seed) {
    std::vector<float> v = eighths(n, seed);
    for (float& x : v) {
        x *= 0.25f;
    }
    return v;
}

// |fused - reference| <= 1e-4 (|ref| + max |ref|): both are fp32 and differ only in summation
// order and the online softmax's rescaling, a few ulps (2^-24 ~ 6e-8 relative) per term of sums
// of at most seq * head_dim = 11200 terms, i.e. at most ~7e-4 of the largest term in the worst
// case and ~1e-5 typically (random signs: sqrt(11200) * 6e-8 ~ 6e-6); dq and dk come from
// dS = P (dP - delta), a difference of nearly equal numbers, so the error is measured against
// the tensor's scale (max |ref|), not element by element.
void expect_close_to_scale(Fixture& f, const Pair& p, const std::string& what) {
    const auto [ref, got] = f.read(p);
    double scale = 0.0;
    for (const float x : ref) {
        scale = std::max(scale, std::fabs(static_cast<double>(x)));
    }
    f.expect_close(p, what, 1e-4, 1e-4 * scale);
}

BackendOptions with(GemmPrecision p, bool fused = false) {
    BackendOptions o;
    o.precision = p;
    o.fused_attention = fused;
    return o;
}

// Error bound of one GEMM element. Rounding an fp32 operand to a format with unit roundoff u
// gives x (1 + e), |e| <= u; a product of two rounded operands is ab (1 + e1)(1 + e2), off by at
// most (2u + u^2) |ab|; fp32 accumulation of k products adds at most k 2^-24 sum |ab| (Higham,
// "Accuracy and Stability of Numerical Algorithms", 2nd ed., eq. 3.4, gamma_k ~ k u_fp32). So
// |C_gpu - C_exact| <= (2u + u^2 + k 2^-24) sum_l |a_il b_lj|; the CPU's own fp32 error (k 2^-24
// sum |ab| again) is added for the comparison with the CPU result. bf16: u = 2^-8 (8 significant
// bits); fp16: u = 2^-11 (11 bits; the inputs lie well inside fp16's range).
double gemm_bound(double u, int64_t k, double sum_abs) {
    const double fp32_k = static_cast<double>(k) * std::ldexp(1.0, -24);
    return (2.0 * u + u * u + 2.0 * fp32_k) * sum_abs;
}

}  // namespace

TEST_SUITE("cuda") {

    TEST_CASE("cuda precision: bf16 and fp16 GEMMs are within the rounding bound, and round") {
        const int64_t m = 48;
        const int64_t n = 40;
        const int64_t k = 256;
        const std::vector<float> ha = fine(m * k, 80);
        const std::vector<float> hb = fine(k * n, 81);
        for (const auto& [p, u] : {std::pair{GemmPrecision::bf16, std::ldexp(1.0, -8)},
                                   std::pair{GemmPrecision::fp16, std::ldexp(1.0, -11)}}) {
            Fixture f(with(p));
            const Pair a = f.tensor(ha);
            const Pair b = f.tensor(hb);
            const Pair c = f.zeros(m * n);
            f.both([&](Backend& be, Side s) {
                be.gemm(Trans::no, Trans::no, m, n, k, 1.0f, a(s), b(s), 0.0f, c(s));
            });
            const auto [cpu, gpu] = f.read(c);
            int64_t bad = 0;
            double max_rel = 0.0;  // error relative to sum |ab|, the scale of the bound
            for (int64_t i = 0; i < m; ++i) {
                for (int64_t j = 0; j < n; ++j) {
                    double sum_abs = 0.0;
                    for (int64_t l = 0; l < k; ++l) {
                        sum_abs +=
                            std::fabs(static_cast<double>(ha[static_cast<size_t>(i * k + l)]) *
                                      hb[static_cast<size_t>(l * n + j)]);
                    }
                    const auto e = static_cast<size_t>(i * n + j);
                    const double err = std::fabs(static_cast<double>(gpu[e]) - cpu[e]);
                    bad += err > gemm_bound(u, k, sum_abs) ? 1 : 0;
                    max_rel = std::max(max_rel, err / sum_abs);
                }
            }
            CHECK(bad == 0);
            // And it did round: fp32 stays near sqrt(k) 2^-24 ~ 1e-6 of sum |ab| (below 0.05 u =
            // 2.4e-5 for fp16, 2e-4 for bf16); rounding both operands to the format, emulated in
            // double for exactly these inputs (round-to-nearest to 8 / 11 significant bits),
            // gives a largest error of 0.17 u of sum |ab| for bf16 and 0.18 u for fp16.
            CHECK(max_rel > 0.05 * u);
        }
    }

    TEST_CASE("cuda precision: a bf16 training run follows the fp32 CPU reference") {
        // tiny-gpt (tests/calibrate/data), 2 layers, seq 32, 2 sequences, 3 iterations at lr 1e-4.
        // Loss: the mean over T tokens of log-softmax terms; a bf16 GEMM perturbs each logit by
        // at most (2u + u^2) sum |w x| (bound above, u = 2^-8), and with the initial weights
        // (std 0.02) sum |w x| over a hidden row stays below ~1, so each logit moves by < 0.008
        // and the loss (a 1-Lipschitz function of the logit vector in the max norm, through
        // log-sum-exp and the target term: 2 x 0.008) by < 0.016 in absolute terms; loss ~
        // ln(vocab) ~ 6, so 0.3% relative. We allow 1% (2 to 3 layers of such perturbations
        // compound). Weights: Adam's update is lr * m / (sqrt(v) + eps), at most ~lr per element
        // per step whatever the gradient's error, so after 3 steps every weight is within
        // 2 * 3 * lr of the reference; the checksum sums N weights, so |diff| <= 6 lr N.
        ensure_mpi();
        const ModelSpec model =
            load_model(std::string(CLEAVE_TEST_DATA_DIR) + "/tests/calibrate/data/tiny-gpt.toml");
        JobSpec job;
        job.gpus = 1;
        job.global_batch = 2;
        job.seq_len = 32;
        Plan plan;
        plan.mbs = 1;
        RunOptions ro;
        ro.iters = 3;
        ro.warmup = 0;
        auto cpu = make_cpu_backend({});
        const Measurement ref = run_training(*cpu, model, job, plan, ro);
        auto gpu = make_cuda_backend(with(GemmPrecision::bf16));
        const Measurement got = run_training(*gpu, model, job, plan, ro);
        REQUIRE(got.losses.size() == ref.losses.size());
        for (size_t i = 0; i < ref.losses.size(); ++i) {
            CHECK(got.losses[i] == doctest::Approx(ref.losses[i]).epsilon(0.01));
        }
        const double n_weights = static_cast<double>(gpu->bytes_in_use()) / 4.0;  // > N: a bound
        CHECK(std::fabs(got.weights_checksum - ref.weights_checksum) <= 6.0 * 1e-4 * n_weights);
        CHECK(got.losses.back() != ref.losses.back());  // bf16 ran: not bit-identical to fp32
    }

    TEST_CASE("cuda fused attention: forward and backward match the unfused path") {
        // seq 70: three key tiles of 32 (the last partial) and five blocks of 16 query rows;
        // head_dim 16, 64, 96 and 160 cover 1, 2, 4 (guarded) and 8 (guarded) dims per lane.
        // Tolerance: expect_close_to_scale above.
        const int64_t seq = 70;
        const int64_t batch = 2;
        const int64_t heads = 4;
        for (const int64_t hd : {int64_t{16}, int64_t{64}, int64_t{96}, int64_t{160}}) {
            for (const int64_t kv_heads : {int64_t{4}, int64_t{2}, int64_t{1}}) {
                const std::string name = "fused hd=" + std::to_string(hd) +
                                         " kv_heads=" + std::to_string(kv_heads) + " ";
                Fixture f(with(GemmPrecision::fp32, true));
                CHECK(f.gpu().attention_saved_size(seq, batch, heads) == batch * heads * seq);
                const int64_t q_n = seq * batch * heads * hd;
                const int64_t kv_n = seq * batch * kv_heads * hd;
                const Pair q = f.tensor(quarter_eighths(q_n, 90));
                const Pair k = f.tensor(quarter_eighths(kv_n, 91));
                const Pair v = f.tensor(quarter_eighths(kv_n, 92));
                const Pair dout = f.tensor(quarter_eighths(q_n, 93));
                const Pair saved = f.zeros(batch * heads * seq * seq);  // enough for both
                const Pair out = f.zeros(q_n);
                const Pair dq = f.zeros(q_n);
                const Pair dk = f.tensor(eighths(kv_n, 94));  // overwritten, not accumulated
                const Pair dv = f.tensor(eighths(kv_n, 95));
                f.both([&](Backend& be, Side s) {
                    be.attention_fwd(
                        q(s), k(s), v(s), seq, batch, heads, kv_heads, hd, saved(s), out(s));
                    be.attention_bwd(q(s),
                                     k(s),
                                     v(s),
                                     saved(s),
                                     dout(s),
                                     seq,
                                     batch,
                                     heads,
                                     kv_heads,
                                     hd,
                                     dq(s),
                                     dk(s),
                                     dv(s));
                });
                expect_close_to_scale(f, out, name + "out");
                expect_close_to_scale(f, dq, name + "dq");
                expect_close_to_scale(f, dk, name + "dk");
                expect_close_to_scale(f, dv, name + "dv");
            }
        }
    }

    TEST_CASE("cuda fused attention on tensor cores (bf16): forward and backward vs unfused") {
        // On a bf16 run the fused forward computes Q K^T and P V with WMMA bf16 operands and
        // fp32 accumulation (kernels_attention_tc.cu). Inputs are multiples of 1/32 in
        // [-0.5, 0.5] (5 significant bits): exact in bf16, and every product q_d k_d is a
        // multiple of 2^-10, so the fp32 sums of at most 128 of them (|sum| <= 32, 15 bits) are
        // exact: the scores equal the fp32 reference's up to its own rounding of the scale. What
        // remains is P rounded to bf16, |P~ - P| <= 2^-9 P, so |out~ - out| <= sum_j |P~_ij -
        // P_ij| |v_j| / sum_j P_ij <= 2^-9 max |v| = 2^-9 x 0.5; we allow that plus the fp32
        // tolerance of expect_close_to_scale. The backward is the fp32 CUDA-core kernel, which
        // reads q, k, v, dout and the log-sum-exp only (delta_i = sum_j P_ij dP_ij, not from
        // out); the log-sum-exp sums the unrounded fp32 P, so dq, dk and dv agree within the
        // fp32 tolerance of expect_close_to_scale.
        const int64_t seq = 70;  // five key tiles of 16 (the last partial), two blocks of 64 rows
        const int64_t batch = 2;
        const int64_t heads = 4;
        const double u_half = std::ldexp(1.0, -9);
        for (const int64_t hd : {int64_t{16}, int64_t{64}, int64_t{128}}) {
            for (const int64_t kv_heads : {int64_t{4}, int64_t{2}}) {
                const std::string name = "tensor-core fused hd=" + std::to_string(hd) +
                                         " kv_heads=" + std::to_string(kv_heads) + " ";
                Fixture f(with(GemmPrecision::bf16, true));
                const int64_t q_n = seq * batch * heads * hd;
                const int64_t kv_n = seq * batch * kv_heads * hd;
                const Pair q = f.tensor(quarter_eighths(q_n, 80));
                const Pair k = f.tensor(quarter_eighths(kv_n, 81));
                const Pair v = f.tensor(quarter_eighths(kv_n, 82));
                const Pair dout = f.tensor(quarter_eighths(q_n, 83));
                const Pair saved = f.zeros(batch * heads * seq * seq);
                const Pair out = f.zeros(q_n);
                const Pair dq = f.zeros(q_n);
                const Pair dk = f.zeros(kv_n);
                const Pair dv = f.zeros(kv_n);
                f.both([&](Backend& be, Side s) {
                    be.attention_fwd(
                        q(s), k(s), v(s), seq, batch, heads, kv_heads, hd, saved(s), out(s));
                    be.attention_bwd(q(s),
                                     k(s),
                                     v(s),
                                     saved(s),
                                     dout(s),
                                     seq,
                                     batch,
                                     heads,
                                     kv_heads,
                                     hd,
                                     dq(s),
                                     dk(s),
                                     dv(s));
                });
                const double max_v = 0.5;
                const auto [ref_out, got_out] = f.read(out);
                double worst = 0.0;
                for (size_t i = 0; i < ref_out.size(); ++i) {
                    worst = std::max(worst, std::fabs(double{got_out[i]} - double{ref_out[i]}));
                }
                CHECK(worst > 0.0);  // P was rounded: not the fp32 result
                f.expect_close(out, name + "out", 1e-4, u_half * max_v + 1e-4 * max_v);
                expect_close_to_scale(f, dq, name + "dq");
                expect_close_to_scale(f, dk, name + "dk");
                expect_close_to_scale(f, dv, name + "dv");
            }
        }
    }

    TEST_CASE("cuda fused attention: a training run equals the unfused one within fp32 rounding") {
        ensure_mpi();
        const ModelSpec model =
            load_model(std::string(CLEAVE_TEST_DATA_DIR) + "/tests/calibrate/data/tiny-gpt.toml");
        JobSpec job;
        job.gpus = 1;
        job.global_batch = 2;
        job.seq_len = 64;
        Plan plan;
        plan.mbs = 1;
        RunOptions ro;
        ro.iters = 2;
        ro.warmup = 0;
        auto unfused = make_cuda_backend({});
        const Measurement a = run_training(*unfused, model, job, plan, ro);
        auto fused = make_cuda_backend(with(GemmPrecision::fp32, true));
        const Measurement b = run_training(*fused, model, job, plan, ro);
        REQUIRE(b.losses.size() == a.losses.size());
        for (size_t i = 0; i < a.losses.size(); ++i) {
            CHECK(b.losses[i] == doctest::Approx(a.losses[i]).epsilon(1e-5));
        }
        CHECK(b.weights_checksum == doctest::Approx(a.weights_checksum).epsilon(1e-5));
        CHECK(b.peak_memory_B < a.peak_memory_B);  // no seq x seq buffers
    }
}
