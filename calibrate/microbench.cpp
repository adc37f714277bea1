#include "calibrate/microbench.hpp"

#include "calibrate/profile.hpp"

#include "executor/collect.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace cleave::calibrate {

namespace {

using executor::Backend;
using executor::Buffer;
using executor::Group;
using executor::ReduceOp;
using executor::Trans;
using executor::View;

// Shared clocks: every rank agrees on repetition counts and reports the slowest rank's time.
class Clock {
public:
    Clock(Backend& be, Group group)
        : be_(be)
        , group_(group)
        , cell_(be, 1) {}

    // Max of `v` over the group (also a barrier).
    double max(double v) {
        be_.fill(cell_, static_cast<float>(v));
        be_.all_reduce(group_, cell_, ReduceOp::max);
        std::array<float, 1> out{};
        be_.download(out, cell_);
        return static_cast<double>(out[0]);
    }

    void barrier() { (void)max(0.0); }

    // Median over `trials` of the slowest rank's mean time of one call of f, with the repetition
    // count chosen so that one trial lasts about target_s. The median, as `cleave validate`
    // reports the executor's median iteration: on a shared machine the best of short trials
    // catches the moments a rank has a core to itself, and a prediction from it is 1.5x faster
    // than the median iteration the same machine runs under the same load.
    template <class F>
    double time(int trials, double target_s, F&& f) {
        return time_each(
            trials, target_s, 1, [&](size_t) { f(); }, [](int) {})[0];
    }

    // time() for n calls f(0) .. f(n-1) taking turns (medians_of_passes), after a first pass
    // that fixes each one's repetition count. Timed one after another, all of an item's trials
    // could fall inside one slow spell: a calibrate on the 2-core VM measured its two 33.5 MFLOP
    // shapes at 23 and 25 GFLOP/s between neighbours at 38-40, and so priced the run's 256^3
    // GEMMs, measured at 39.6, at 24. `pass(t)` is called before trial t (progress).
    template <class F, class P>
    std::vector<double> time_each(int trials, double target_s, size_t n, F&& f, P&& pass) {
        std::vector<int64_t> reps(n);
        for (size_t i = 0; i < n; ++i) {
            barrier();
            const double t0 = be_.clock_s();
            f(i);  // warm-up, and a first estimate
            be_.synchronize();
            const double once_s = max(be_.clock_s() - t0);
            reps[i] = static_cast<int64_t>(
                std::clamp(std::ceil(target_s / std::max(once_s, 1e-9)), 1.0, 100000.0));
        }
        return medians_of_passes(trials, n, [&](int t, size_t i) {
            if (i == 0) {
                pass(t);
            }
            barrier();
            const double t0 = be_.clock_s();
            for (int64_t r = 0; r < reps[i]; ++r) {
                f(i);
            }
            be_.synchronize();
            return max((be_.clock_s() - t0) / static_cast<double>(reps[i]));
        });
    }

private:
    Backend& be_;
    Group group_;
    Buffer cell_;
};

void report(const BenchOptions& o, std::string_view what, int64_t done, int64_t total) {
    if (o.progress) {
        o.progress(what, done, total);
    }
}

Group world_group(Backend& be) {
    return be.create_group(0, be.world_rank(), "calibrate-world");
}

void fill_pattern(Backend& be, View v) {
    std::vector<float> host(static_cast<size_t>(v.size));
    for (size_t i = 0; i < host.size(); ++i) {
        host[i] = static_cast<float>(static_cast<int64_t>(i % 17) - 8) / 16.0f;
    }
    be.upload(v, host);
}

}  // namespace

std::vector<double>
medians_of_passes(int trials, size_t n, const std::function<double(int, size_t)>& trial) {
    std::vector<std::vector<double>> per_item(n);
    for (int t = 0; t < trials; ++t) {
        for (size_t i = 0; i < n; ++i) {
            per_item[i].push_back(trial(t, i));
        }
    }
    std::vector<double> out;
    out.reserve(n);
    for (std::vector<double>& v : per_item) {
        out.push_back(executor::median(std::move(v)));
    }
    return out;
}

std::vector<GemmSample> gemm_shapes(bool quick, bool gpu) {
    // Transformer-layer shapes (T x h) * (h x n) with T = 2h tokens: MLP in (n = 4h) and out
    // (4h -> h), QKV (n = 3h) and the projection (n = h), for h = 32..512, covering per-GEMM
    // sizes from 65 kFLOP to 2 GFLOP (quick: h to 128). The CPU executor runs exactly such
    // shapes; square GEMMs of some sizes (192^3, 256^3 with page-aligned buffers, two ranks on
    // the two hardware threads) run at a third of the speed of transformer shapes of the same
    // FLOPs, so a CPU curve of squares would mis-price the layers. A GPU sweep adds the squares
    // 32..1024 of the usual cuBLAS sweeps, and 1024..8192 where a GPU reaches its peak.
    const std::vector<int64_t> hidden =
        quick ? std::vector<int64_t>{32, 64, 128}
              : std::vector<int64_t>{32, 48, 64, 96, 128, 192, 256, 384, 512};
    std::vector<GemmSample> out;
    if (gpu) {
        const std::vector<int64_t> squares =
            quick ? std::vector<int64_t>{32, 64, 128, 256, 512, 1024, 2048}
                  : std::vector<int64_t>{32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
        for (const int64_t s : squares) {
            out.push_back({s, s, s, 0.0});
        }
    }
    for (const int64_t h : hidden) {
        out.push_back({2 * h, 4 * h, h, 0.0});
        out.push_back({2 * h, h, 4 * h, 0.0});
        out.push_back({2 * h, 3 * h, h, 0.0});
        out.push_back({2 * h, h, h, 0.0});
    }
    std::sort(out.begin(), out.end(), [](const GemmSample& a, const GemmSample& b) {
        return a.flop() < b.flop();
    });
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::vector<GemmSample> bench_gemm(Backend& be, const BenchOptions& options) {
    const Group world = world_group(be);
    Clock clock(be, world);
    std::vector<GemmSample> out = gemm_shapes(options.quick, be.name() != "cpu");
    const double target_s = options.quick ? 0.01 : 0.08;
    const int trials = options.quick ? 3 : 5;
    // One set of buffers for every shape, each shape's operands at their starts (the layout of
    // buffers of its own size: the same leading dimensions and alignment), so that the shapes
    // can take turns (Clock::time_each).
    int64_t a_elems = 0;
    int64_t b_elems = 0;
    int64_t c_elems = 0;
    for (const GemmSample& g : out) {
        a_elems = std::max(a_elems, g.m * g.k);
        b_elems = std::max(b_elems, g.k * g.n);
        c_elems = std::max(c_elems, g.m * g.n);
    }
    Buffer a(be, a_elems);
    Buffer b(be, b_elems);
    Buffer c(be, c_elems);
    fill_pattern(be, a);
    fill_pattern(be, b);
    const auto total = static_cast<int64_t>(out.size()) * (trials + 1);
    report(options, "gemm", 0, total);
    // The three variants of a training step: forward NN, data gradient NT, weight gradient TN
    // (the same FLOPs with transposed operands).
    const auto three = [&](size_t i) {
        const GemmSample& g = out[i];
        const View av = a.view().slice(0, g.m * g.k);
        const View bv = b.view().slice(0, g.k * g.n);
        const View cv = c.view().slice(0, g.m * g.n);
        be.gemm(Trans::no, Trans::no, g.m, g.n, g.k, 1.0f, av, bv, 0.0f, cv);
        be.gemm(Trans::no, Trans::yes, g.m, g.n, g.k, 1.0f, av, bv, 0.0f, cv);
        be.gemm(Trans::yes, Trans::no, g.m, g.n, g.k, 1.0f, av, bv, 0.0f, cv);
    };
    const std::vector<double> t = clock.time_each(trials, target_s, out.size(), three, [&](int p) {
        report(options, "gemm", static_cast<int64_t>(out.size()) * (p + 1), total);
    });
    for (size_t i = 0; i < out.size(); ++i) {
        out[i].t_s = t[i] / 3.0;
    }
    report(options, "gemm", total, total);
    return out;
}

double SyncSample::wait_fraction() const {
    if (segments <= 0 || without_sync_s <= 0.0) {
        return 0.0;
    }
    const double f = round_fractions.empty()
                         ? (with_sync_s - without_sync_s - collectives_s) / without_sync_s
                         : executor::median(round_fractions);
    return std::clamp(f, 0.0, 0.99);
}

SyncSample bench_sync(Backend& be, const BenchOptions& options) {
    SyncSample out;
    if (be.world_size() < 2) {
        return out;
    }
    const Group world = world_group(be);
    Clock clock(be, world);
    const int64_t side = 256;
    Buffer a(be, side * side);
    Buffer b(be, side * side);
    Buffer c(be, side * side);
    Buffer cell(be, 1);
    fill_pattern(be, a);
    fill_pattern(be, b);
    const int rounds = options.quick ? 5 : 9;
    const int64_t segments = options.quick ? 64 : 256;
    const auto segment = [&] {
        be.gemm(Trans::no, Trans::no, side, side, side, 1.0f, a, b, 0.0f, c);
    };
    const auto sync = [&] { be.all_reduce(world, cell, ReduceOp::sum); };
    // Slowest rank's wall time of f.
    const auto wall = [&](auto&& f) {
        clock.barrier();
        const double t0 = be.clock_s();
        f();
        be.synchronize();
        return clock.max(be.clock_s() - t0);
    };
    segment();  // warm-up
    for (int r = 0; r < rounds; ++r) {
        report(options, "sync", r, rounds);
        const double with_sync = wall([&] {
            for (int64_t i = 0; i < segments; ++i) {
                segment();
                sync();
            }
        });
        const double without_sync = wall([&] {
            for (int64_t i = 0; i < segments; ++i) {
                segment();
            }
        });
        const double collectives = wall([&] {
            for (int64_t i = 0; i < segments; ++i) {
                sync();
            }
        });
        out.with_sync_s += with_sync;
        out.without_sync_s += without_sync;
        out.collectives_s += collectives;
        out.round_fractions.push_back((with_sync - without_sync - collectives) / without_sync);
        out.segments += segments;
    }
    report(options, "sync", rounds, rounds);
    return out;
}

std::vector<StreamSample> bench_memory(Backend& be, const BenchOptions& options) {
    const Group world = world_group(be);
    Clock clock(be, world);
    const int64_t elems = (options.quick ? 32 : 128) * 1024 * 1024 / 4;
    Buffer x(be, elems);
    Buffer y(be, elems);
    fill_pattern(be, x);
    fill_pattern(be, y);
    const double target_s = options.quick ? 0.05 : 0.3;
    const int trials = options.quick ? 3 : 5;
    std::vector<StreamSample> out = {
        {"copy", 8.0, elems, 0.0}, {"axpy", 12.0, elems, 0.0}, {"scale", 8.0, elems, 0.0}};
    const auto run = [&](size_t i) {
        switch (i) {
        case 0:
            be.copy(y, x);
            break;
        case 1:
            be.axpy(1e-3f, x, y);
            break;
        default:
            be.scale(y, 0.999f);
            break;
        }
    };
    const std::vector<double> t = clock.time_each(
        trials, target_s, out.size(), run, [&](int p) { report(options, "memory", p, trials); });
    for (size_t i = 0; i < out.size(); ++i) {
        out[i].t_s = t[i];
    }
    report(options, "memory", trials, trials);
    return out;
}

std::vector<StreamSample> bench_kernels(Backend& be, const BenchOptions& options) {
    const Group world = world_group(be);
    Clock clock(be, world);
    // 1 Mi elements (4 MiB): the size of one activation of a small model, where the executor's
    // element-wise kernels run (often from cache).
    const int64_t cols = 256;
    const int64_t rows = 4096;
    const int64_t n = rows * cols;
    Buffer x(be, n);
    Buffer y(be, n);
    Buffer dy(be, n);
    Buffer m(be, n);
    Buffer v(be, n);
    Buffer z(be, n);
    Buffer gamma(be, cols);
    Buffer beta(be, cols);
    Buffer dgamma(be, cols);
    Buffer dbeta(be, cols);
    Buffer mean(be, rows);
    Buffer rstd(be, rows);
    fill_pattern(be, x);
    fill_pattern(be, dy);
    fill_pattern(be, m);
    be.fill(gamma, 1.0f);
    const AttentionShape a = attention_bench_shape;
    const int64_t q_elems = a.seq * a.batch * a.heads * a.head_dim;
    Buffer q(be, q_elems);
    Buffer k(be, q_elems);
    Buffer val(be, q_elems);
    Buffer probs(be, a.scores());
    Buffer ctx(be, q_elems);
    Buffer dq(be, q_elems);
    Buffer dk(be, q_elems);
    Buffer dv(be, q_elems);
    fill_pattern(be, q);
    fill_pattern(be, k);
    fill_pattern(be, val);
    // Cross-entropy over a rows x vocab block of logits (1 Mi logits, 2048 columns).
    const int64_t xent_rows = 512;
    const int64_t vocab = n / xent_rows;
    std::vector<int32_t> targets(static_cast<size_t>(xent_rows));
    for (size_t i = 0; i < targets.size(); ++i) {
        targets[i] = static_cast<int32_t>((i * 7919) % static_cast<size_t>(vocab));
    }
    Buffer stats(be, 2 * xent_rows);
    const View row_max = stats.view().slice(0, xent_rows);
    const View sum_exp = stats.view().slice(xent_rows, xent_rows);
    Buffer target_logit(be, xent_rows);
    const double target_s = options.quick ? 0.02 : 0.1;
    const int trials = options.quick ? 3 : 5;
    const auto ln = executor::NormType::layernorm;
    constexpr int64_t total = 12;
    std::vector<StreamSample> out;
    const auto add = [&](const char* name, double bytes_per_elem, int64_t elems, auto&& f) {
        report(options, "kernels", static_cast<int64_t>(out.size()), total);
        out.push_back({name, bytes_per_elem, elems, clock.time(trials, target_s, f)});
    };
    // Bytes per element as costmodel/compute.cpp counts them at 4-byte activations (see
    // kernel_class_of in profile.hpp for the class each kernel measures).
    // Norm: reads x and writes y (2 x 4) forward, reads x and dy and writes dx (3 x 4) backward.
    add("norm_fwd", 8.0, n, [&] {
        be.norm_fwd(ln, x, rows, cols, gamma, beta, 1e-5f, y, mean, rstd);
    });
    add("norm_bwd", 12.0, n, [&] {
        be.norm_bwd(ln, dy, x, rows, cols, gamma, mean, rstd, y, dgamma, dbeta);
    });
    // Bias-dropout-add: x, residual, out + a 1-B mask forward (13 B), dy + mask read and dx
    // written backward (9 B); the executor runs add_bias + the residual axpy, and bias_grad +
    // the residual axpy.
    add("bias_residual_fwd", 13.0, n, [&] {
        be.add_bias(y, rows, cols, beta);
        be.axpy(1.0f, x, y);
    });
    add("bias_residual_bwd", 9.0, n, [&] {
        be.bias_grad(dy, rows, cols, dbeta);
        be.axpy(1.0f, dy, y);
    });
    // Activations: GeLU in, out (8 B) / in, dy, dx (12 B); SwiGLU gate, up, out (12 B) / gate,
    // up, dy, dgate, dup (20 B).
    add("gelu_fwd", 8.0, n, [&] { be.gelu_fwd(x, y); });
    add("gelu_bwd", 12.0, n, [&] { be.gelu_bwd(x, dy, y); });
    add("swiglu_fwd", 12.0, n, [&] { be.swiglu_fwd(x, dy, y); });
    add("swiglu_bwd", 20.0, n, [&] { be.swiglu_bwd(x, dy, m, y, z); });
    // Attention core, forward + backward, with its GEMMs (summarize() subtracts the cost model's
    // price of those): scale-mask-softmax + attention dropout 17 B per score forward, 21 B
    // backward.
    add("attention", 38.0, a.scores(), [&] {
        be.attention_fwd(q, k, val, a.seq, a.batch, a.heads, a.heads, a.head_dim, probs, ctx);
        be.attention_bwd(
            q, k, val, probs, ctx, a.seq, a.batch, a.heads, a.heads, a.head_dim, dq, dk, dv);
    });
    // Vocab-parallel cross-entropy: row max, exp-sum and target logit, then the gradient (the
    // cost model: cast + max + exp-sum + stored softmax 20 B per logit forward, 8 B backward).
    add("cross_entropy", 28.0, n, [&] {
        be.xent_row_max(y, xent_rows, vocab, row_max);
        be.xent_partial(y, xent_rows, vocab, 0, targets, row_max, sum_exp, target_logit);
        be.xent_bwd(y, xent_rows, vocab, 0, targets, row_max, sum_exp, 1e-3f, dy);
    });
    // Adam per fp32 parameter: w, g read + w written, m and v read + written (32 B).
    int64_t step = 0;
    add("adam", 32.0, n, [&] { be.adam(y, dy, m, v, 1e-6f, 0.9f, 0.95f, 1e-8f, 0.0f, ++step); });
    // A Mamba-2 layer's own kernels (executor/mamba.cpp's order), their bytes as the cost model
    // counts the ssm class (profile.hpp ssm_bench_bytes_per_token; summarize() subtracts the
    // price of the scan's products).
    const SsmShape sh = ssm_bench_shape;
    const int64_t T = sh.tokens();
    const int64_t di = sh.d_inner();
    const int64_t bc = sh.bc();
    const int64_t K = sh.conv_kernel;
    const executor::SsdShape ssd{sh.seq, sh.batch, sh.heads, sh.head_dim, sh.groups, sh.state, sh.chunk};
    struct Stream {
        int64_t ch;
        Buffer raw, pre, act, w, bias, dact, dpre, draw, dw, dbias;
    };
    std::vector<Stream> streams;
    for (const int64_t ch : {di, bc, bc}) {
        streams.push_back({ch, Buffer(be, T * ch), Buffer(be, T * ch), Buffer(be, T * ch),
                           Buffer(be, K * ch), Buffer(be, ch), Buffer(be, T * ch),
                           Buffer(be, T * ch), Buffer(be, T * ch), Buffer(be, K * ch),
                           Buffer(be, ch)});
        fill_pattern(be, streams.back().raw);
        fill_pattern(be, streams.back().w);
        fill_pattern(be, streams.back().dact);
    }
    Buffer dt(be, T * sh.heads);
    Buffer dt_bias(be, sh.heads);
    Buffer a_log(be, sh.heads);
    Buffer dskip(be, sh.heads);
    Buffer yscan(be, T * di);
    Buffer zgate(be, T * di);
    Buffer gout(be, T * di);
    Buffer grstd(be, T * sh.groups);
    Buffer ggamma(be, di);
    Buffer dgout(be, T * di);
    Buffer dscan(be, T * di);
    Buffer dz(be, T * di);
    Buffer dgamma_g(be, di);
    Buffer ddt(be, T * sh.heads);
    Buffer ddt_bias(be, sh.heads);
    Buffer da_log(be, sh.heads);
    Buffer dd(be, sh.heads);
    fill_pattern(be, dt);
    fill_pattern(be, zgate);
    fill_pattern(be, dgout);
    be.fill(dt_bias, 0.1f);
    be.fill(a_log, 0.0f);
    be.fill(dskip, 1.0f);
    be.fill(ggamma, 1.0f);
    const auto conv_silu = [&] {
        for (Stream& st : streams) {
            be.causal_conv1d_fwd(st.raw, sh.seq, sh.batch, st.ch, K, st.w, st.bias, st.pre);
            be.silu_fwd(st.pre, st.act);
        }
    };
    add("ssm", ssm_bench_bytes_per_token(), T, [&] {
        conv_silu();
        be.ssd_fwd(ssd, streams[0].act, dt, dt_bias, a_log, streams[1].act, streams[2].act, dskip,
                   yscan);
        be.gated_rmsnorm_fwd(yscan, zgate, T, di, di / sh.groups, ggamma, 1e-5f, gout, grstd);
        be.gated_rmsnorm_bwd(dgout, yscan, zgate, T, di, di / sh.groups, ggamma, grstd, dscan, dz,
                             dgamma_g);
        conv_silu();  // recomputed in backward from the in_proj outputs
        be.ssd_bwd(ssd, streams[0].act, dt, dt_bias, a_log, streams[1].act, streams[2].act, dskip,
                   dscan, streams[0].dact, ddt, streams[1].dact, streams[2].dact, ddt_bias, da_log,
                   dd);
        for (Stream& st : streams) {
            be.silu_bwd(st.pre, st.dact, st.dpre);
            be.causal_conv1d_bwd(st.raw, st.dpre, sh.seq, sh.batch, st.ch, K, st.w, st.draw, st.dw,
                                 st.dbias);
        }
    });
    report(options, "kernels", total, total);
    return out;
}

std::vector<int64_t> group_sizes(int64_t world) {
    std::vector<int64_t> out;
    for (int64_t n = 2; n <= world; n *= 2) {
        out.push_back(n);
    }
    if (world >= 2 && out.back() != world) {
        out.push_back(world);
    }
    return out;
}

namespace {

// Issue 18: up to 256 MiB, the whole fp32 gradient of the models validate runs on a CPU (the
// 4-layer 1024-wide GPT's DP all-reduce is 236 MB), which the executor reduces in one call: a
// fit that stopped at 16 MiB priced a 110 MB all-reduce from sizes 7x smaller.
std::vector<double> message_sizes(bool quick) {
    std::vector<double> out;
    const double top = quick ? 4.0 * 1024 * 1024 : 256.0 * 1024 * 1024;
    for (double s = 4096.0; s <= top; s *= 4.0) {
        out.push_back(s);
    }
    return out;
}

// Groups of n consecutive ranks: rank r joins group r / n; ranks beyond the last full group get
// a group of their own, idle, and still take part in the clock's barriers.
struct BenchGroup {
    Group g;
    bool active = false;
};

BenchGroup make_bench_group(Backend& be, int64_t n) {
    const int64_t rank = be.world_rank();
    const int64_t full = be.world_size() / n * n;
    const bool active = rank < full;
    return {be.create_group(static_cast<int>(active ? rank / n : full + rank),
                            static_cast<int>(rank % n),
                            "bench" + std::to_string(n)),
            active};
}

double time_collective(Backend& be,
                       Clock& clock,
                       Collective op,
                       const BenchGroup& bg,
                       int64_t n,
                       double size_B,
                       const BenchOptions& options) {
    const Group g = bg.g;
    const bool active = bg.active;
    const auto count = static_cast<int64_t>(size_B / 4.0);
    const int64_t shard = count / n;
    Buffer big(be, count);
    Buffer small(be, std::max<int64_t>(shard, 1));
    const int me = be.group_rank(g);
    const int peer = me ^ 1;
    const auto one = [&] {
        if (!active) {
            return;
        }
        switch (op) {
        case Collective::all_reduce:
            be.all_reduce(g, big, ReduceOp::sum);
            break;
        case Collective::all_gather:
            be.all_gather(g, small.view().slice(0, shard), big.view().slice(0, shard * n));
            break;
        case Collective::reduce_scatter:
            be.reduce_scatter(g, big.view().slice(0, shard * n), small.view().slice(0, shard));
            break;
        default:  // send_recv: a ping-pong, two one-way transfers
            if (peer < be.group_size(g)) {
                if (me % 2 == 0) {
                    be.send(g, big, peer, 1);
                    be.recv(g, big, peer, 2);
                } else {
                    be.recv(g, big, peer, 1);
                    be.send(g, big, peer, 2);
                }
                be.synchronize();
            }
            break;
        }
    };
    const double target_s = options.quick ? 0.01 : 0.05;
    const double t = clock.time(options.quick ? 3 : 5, target_s, one);
    return op == Collective::send_recv ? t / 2.0 : t;
}

}  // namespace

std::vector<CollectiveSample> bench_collectives(Backend& be, const BenchOptions& options) {
    std::vector<CollectiveSample> out;
    if (be.world_size() < 2) {
        return out;
    }
    const Group world = world_group(be);
    Clock clock(be, world);
    const std::vector<double> sizes = message_sizes(options.quick);
    std::vector<CollectiveSample> plan;
    for (const Collective op :
         {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter}) {
        for (const int64_t n : group_sizes(be.world_size())) {
            for (const double s : sizes) {
                plan.push_back({op, n, s, 0.0});
            }
        }
    }
    for (const double s : sizes) {
        plan.push_back({Collective::send_recv, 2, s, 0.0});
    }
    std::vector<std::pair<int64_t, BenchGroup>> groups;
    for (const int64_t n : group_sizes(be.world_size())) {
        groups.emplace_back(n, make_bench_group(be, n));
    }
    const auto group_of = [&](int64_t n) {
        return std::find_if(
                   groups.begin(), groups.end(), [n](const auto& e) { return e.first == n; })
            ->second;
    };
    for (size_t i = 0; i < plan.size(); ++i) {
        report(options, "collectives", static_cast<int64_t>(i), static_cast<int64_t>(plan.size()));
        CollectiveSample c = plan[i];
        c.t_s = time_collective(be, clock, c.op, group_of(c.ranks), c.ranks, c.size_B, options);
        out.push_back(c);
    }
    report(options,
           "collectives",
           static_cast<int64_t>(plan.size()),
           static_cast<int64_t>(plan.size()));
    return out;
}

}  // namespace cleave::calibrate
