// The CUDA kernels against the CPU reference: norms, activations, RoPE, attention (MHA, GQA and
// MQA), vocab-parallel cross-entropy and Adam. These involve exp / tanh / rsqrt and differently
// ordered float sums, so results are compared with a tight tolerance (|d| <= 1e-5 + 1e-4 |cpu|);
// inputs are multiples of 1/8, exact on both sides. Row lengths above 256 exercise the
// multi-pass loops of the one-block-per-row kernels.
#include "tests/cuda/cuda_fixture.hpp"

#include <cmath>
#include <string>

#include <doctest/doctest.h>

using namespace cleave;
using namespace cleave::executor;
using namespace cleave::executor::test;

TEST_SUITE("cuda") {

    TEST_CASE("cuda kernels: layernorm and rmsnorm forward and backward") {
        Fixture f;
        const int64_t rows = 7;
        const int64_t cols = 300;
        for (const NormType type : {NormType::layernorm, NormType::rmsnorm}) {
            const std::string name = type == NormType::layernorm ? "layernorm " : "rmsnorm ";
            const Pair x = f.tensor(eighths(rows * cols, 20));
            const Pair gamma = f.tensor(eighths(cols, 21));
            const Pair beta = f.tensor(eighths(cols, 22));
            const Pair y = f.zeros(rows * cols);
            const Pair mean = f.zeros(rows);
            const Pair rstd = f.zeros(rows);
            const Pair dy = f.tensor(eighths(rows * cols, 23));
            const Pair dx = f.zeros(rows * cols);
            const Pair dgamma = f.tensor(eighths(cols, 24));
            const Pair dbeta = f.tensor(eighths(cols, 25));
            f.both([&](Backend& be, Side s) {
                be.norm_fwd(
                    type, x(s), rows, cols, gamma(s), beta(s), 1e-5f, y(s), mean(s), rstd(s));
                be.norm_bwd(type,
                            dy(s),
                            x(s),
                            rows,
                            cols,
                            gamma(s),
                            mean(s),
                            rstd(s),
                            dx(s),
                            dgamma(s),
                            dbeta(s));
            });
            f.expect_close(y, name + "y");
            f.expect_close(mean, name + "mean");
            f.expect_close(rstd, name + "rstd");
            f.expect_close(dx, name + "dx");
            f.expect_close(dgamma, name + "dgamma");
            f.expect_close(dbeta, name + "dbeta");
        }
    }

    TEST_CASE("cuda kernels: GeLU and SwiGLU forward and backward") {
        Fixture f;
        const int64_t n = 1000;
        const Pair x = f.tensor(eighths(n, 30));
        const Pair up = f.tensor(eighths(n, 31));
        const Pair dy = f.tensor(eighths(n, 32));
        const Pair y = f.zeros(n);
        const Pair dx = f.zeros(n);
        const Pair sy = f.zeros(n);
        const Pair dgate = f.zeros(n);
        const Pair dup = f.zeros(n);
        f.both([&](Backend& be, Side s) {
            be.gelu_fwd(x(s), y(s));
            be.gelu_bwd(x(s), dy(s), dx(s));
            be.swiglu_fwd(x(s), up(s), sy(s));
            be.swiglu_bwd(x(s), up(s), dy(s), dgate(s), dup(s));
        });
        f.expect_close(y, "gelu");
        f.expect_close(dx, "gelu'");
        f.expect_close(sy, "swiglu");
        f.expect_close(dgate, "swiglu dgate");
        f.expect_close(dup, "swiglu dup");
    }

    TEST_CASE("cuda kernels: RoPE forward, inverse, and inverse undoes forward") {
        Fixture f;
        const int64_t seq = 5;
        const int64_t batch = 2;
        const int64_t heads = 3;
        const int64_t hd = 8;
        const std::vector<float> init = eighths(seq * batch * heads * hd, 40);
        const Pair x = f.tensor(init);
        f.both([&](Backend& be, Side s) { be.rope(x(s), seq, batch, heads, hd, 3, false); });
        f.expect_close(x, "rope");
        f.both([&](Backend& be, Side s) { be.rope(x(s), seq, batch, heads, hd, 3, true); });
        f.expect_close(x, "rope inverse");
        const auto [c, g] = f.read(x);
        for (size_t i = 0; i < init.size(); ++i) {
            CHECK(g[i] == doctest::Approx(init[i]).epsilon(1e-5));
        }
    }

    TEST_CASE("cuda kernels: causal attention forward and backward (MHA, GQA, MQA)") {
        Fixture f;
        const int64_t seq = 6;
        const int64_t batch = 2;
        const int64_t heads = 4;
        const int64_t hd = 8;
        for (const int64_t kv_heads : {int64_t{4}, int64_t{2}, int64_t{1}}) {
            const std::string name = "attention kv_heads=" + std::to_string(kv_heads) + " ";
            const int64_t q_n = seq * batch * heads * hd;
            const int64_t kv_n = seq * batch * kv_heads * hd;
            const Pair q = f.tensor(eighths(q_n, 50));
            const Pair k = f.tensor(eighths(kv_n, 51));
            const Pair v = f.tensor(eighths(kv_n, 52));
            const Pair dout = f.tensor(eighths(q_n, 53));
            const Pair probs = f.zeros(batch * heads * seq * seq);
            const Pair out = f.zeros(q_n);
            const Pair dq = f.zeros(q_n);
            const Pair dk = f.tensor(eighths(kv_n, 54));  // overwritten, not accumulated
            const Pair dv = f.tensor(eighths(kv_n, 55));
            f.both([&](Backend& be, Side s) {
                be.attention_fwd(
                    q(s), k(s), v(s), seq, batch, heads, kv_heads, hd, probs(s), out(s));
                be.attention_bwd(q(s),
                                 k(s),
                                 v(s),
                                 probs(s),
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
            f.expect_close(probs, name + "probs");
            f.expect_close(out, name + "out");
            f.expect_close(dq, name + "dq");
            f.expect_close(dk, name + "dk");
            f.expect_close(dv, name + "dv");
            const auto [c, g] = f.read(probs);
            CHECK(g[1] == 0.0f);  // row 0 attends to position 0 only
            CHECK(g[0] == doctest::Approx(1.0));
        }
    }

    TEST_CASE("cuda kernels: vocab-parallel cross-entropy pieces") {
        Fixture f;
        const int64_t rows = 5;
        const int64_t cols = 300;
        const int64_t col_begin = 100;  // this rank holds vocabulary columns [100, 400)
        const std::vector<int32_t> targets{100, 399, 50, 250, 400};  // 50 and 400 are elsewhere
        const Pair logits = f.tensor(eighths(rows * cols, 60));
        const Pair row_max = f.zeros(rows);
        const Pair sum_exp = f.zeros(rows);
        const Pair target_logit = f.tensor(eighths(rows, 61));
        const Pair dlogits = f.zeros(rows * cols);
        f.both([&](Backend& be, Side s) {
            be.xent_row_max(logits(s), rows, cols, row_max(s));
            be.xent_partial(
                logits(s), rows, cols, col_begin, targets, row_max(s), sum_exp(s), target_logit(s));
            be.xent_bwd(logits(s),
                        rows,
                        cols,
                        col_begin,
                        targets,
                        row_max(s),
                        sum_exp(s),
                        0.125f,
                        dlogits(s));
        });
        f.expect_equal(row_max, "row_max");
        f.expect_close(sum_exp, "sum_exp");
        f.expect_equal(target_logit, "target_logit");
        f.expect_close(dlogits, "dlogits");
        // In place (dlogits aliasing logits).
        f.both([&](Backend& be, Side s) {
            be.xent_bwd(logits(s),
                        rows,
                        cols,
                        col_begin,
                        targets,
                        row_max(s),
                        sum_exp(s),
                        0.125f,
                        logits(s));
        });
        f.expect_close(logits, "dlogits in place");
    }

    TEST_CASE("cuda kernels: Adam steps with weight decay") {
        Fixture f;
        const int64_t n = 1000;
        const Pair w = f.tensor(eighths(n, 70));
        const Pair m = f.zeros(n);
        const Pair v = f.zeros(n);
        for (int64_t step = 1; step <= 3; ++step) {
            const Pair g = f.tensor(eighths(n, 70 + static_cast<int>(step)));
            f.both([&](Backend& be, Side s) {
                be.adam(w(s), g(s), m(s), v(s), 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
            });
        }
        f.expect_close(w, "adam w");
        f.expect_close(m, "adam m");
        f.expect_close(v, "adam v");
    }

}  // TEST_SUITE
