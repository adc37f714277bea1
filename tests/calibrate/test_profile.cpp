#include "calibrate/microbench.hpp"
#include "calibrate/profile.hpp"
#include "core/errors.hpp"
#include "core/load.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <doctest/doctest.h>

using namespace cleave;
using namespace cleave::calibrate;

namespace {

// alpha = 10 us per step, beta = 1 GB/s; exact ring-model times.
double ring_time(Collective op, int64_t n, double s) {
    return 10e-6 * static_cast<double>(ring_steps(op, n)) + s * busbw_factor(op, n) / 1e9;
}

Calibration synthetic() {
    Calibration c;
    c.backend = "cpu";
    c.device = "Test CPU";
    c.host = "testhost";
    c.ranks = 2;
    c.ranks_per_host = 2;
    c.host_memory_B = 16.0 * 1073741824.0;
    // 2 n^3 FLOP at 10, 20 and 40 GFLOP/s: 65536 / 1e10, 524288 / 2e10, 4194304 / 4e10 seconds.
    c.gemm = {{32, 32, 32, 65536.0 / 1e10},
              {64, 64, 64, 524288.0 / 2e10},
              {128, 128, 128, 4194304.0 / 4e10}};
    // copy 8 GB/s, axpy 6 GB/s.
    c.memory = {{"copy", 8.0, 1000000, 1e-3}, {"axpy", 12.0, 1000000, 2e-3}};
    // Executor kernels: 8e6 B in 2 ms and 32e6 B in 8 ms: 40e6 B / 10 ms = 4 GB/s.
    c.kernels = {{"norm_fwd", 8.0, 1000000, 2e-3}, {"adam", 32.0, 1000000, 8e-3}};
    for (const Collective op :
         {Collective::all_reduce, Collective::all_gather, Collective::send_recv}) {
        for (const double s : {4096.0, 65536.0, 1048576.0}) {
            c.collectives.push_back({op, 2, s, ring_time(op, 2, s)});
        }
    }
    return c;
}

}  // namespace

TEST_SUITE("calibrate") {
    TEST_CASE("summarize: peak, efficiency curve, memory and the collective fit") {
        const Summary s = summarize(synthetic());
        CHECK(s.peak.value() == doctest::Approx(4e10).epsilon(1e-12));
        REQUIRE(s.curve.size() == 3);
        CHECK(s.curve[0].size.value() == 65536.0);
        CHECK(s.curve[0].efficiency == doctest::Approx(0.25).epsilon(1e-12));
        CHECK(s.curve[1].efficiency == doctest::Approx(0.5).epsilon(1e-12));
        CHECK(s.curve[2].efficiency == doctest::Approx(1.0).epsilon(1e-12));
        CHECK(s.memory_peak.value() == doctest::Approx(8e9).epsilon(1e-12));
        CHECK(s.kernels_bw.value() == doctest::Approx(4e9).epsilon(1e-12));
        CHECK(s.memory_efficiency == doctest::Approx(0.5).epsilon(1e-12));  // 4 / 8 GB/s
        REQUIRE(s.link_measured);
        CHECK(s.link.alpha.value() == doctest::Approx(10e-6).epsilon(1e-9));
        CHECK(s.link.beta.value() == doctest::Approx(1e9).epsilon(1e-9));
        REQUIRE(s.per_collective.size() == 3);  // reduce-scatter was not measured
        CHECK(s.per_collective[1].op == Collective::all_gather);
        CHECK(s.per_collective[1].fit.beta.value() == doctest::Approx(1e9).epsilon(1e-9));
    }

    TEST_CASE("mean_of: every sample's time is the mean of the two calibrations'") {
        const Calibration a = synthetic();
        Calibration b = a;
        b.host = "other";
        for (auto& g : b.gemm) {
            g.t_s *= 2.0;
        }
        b.memory[1].t_s = 4e-3;       // axpy: 2 ms and 4 ms -> 3 ms
        b.kernels[0].t_s = 1e-3;      // norm_fwd: 2 ms and 1 ms -> 1.5 ms
        b.collectives[0].t_s *= 3.0;  // -> twice a's
        const Calibration m = mean_of(a, b);
        CHECK(m.host == "testhost");  // everything but the times is a's
        REQUIRE(m.gemm.size() == 3);
        for (size_t i = 0; i < 3; ++i) {
            CHECK(m.gemm[i].t_s == doctest::Approx(1.5 * a.gemm[i].t_s).epsilon(1e-15));
            CHECK(m.gemm[i].m == a.gemm[i].m);
        }
        CHECK(m.memory[0].t_s == doctest::Approx(1e-3).epsilon(1e-15));
        CHECK(m.memory[1].t_s == doctest::Approx(3e-3).epsilon(1e-15));
        CHECK(m.kernels[0].t_s == doctest::Approx(1.5e-3).epsilon(1e-15));
        CHECK(m.kernels[1].t_s == doctest::Approx(8e-3).epsilon(1e-15));
        CHECK(m.collectives[0].t_s == doctest::Approx(2.0 * a.collectives[0].t_s).epsilon(1e-15));
        // The profile of the mean: the GEMM peak is the 128^3 point at 40 GFLOP/s over 1.5.
        CHECK(summarize(m).peak.value() == doctest::Approx(4e10 / 1.5).epsilon(1e-12));

        Calibration other_shape = b;
        other_shape.gemm[1].k = 65;
        CHECK_THROWS_AS((void)mean_of(a, other_shape), ConfigError);
        Calibration fewer = b;
        fewer.kernels.pop_back();
        CHECK_THROWS_AS((void)mean_of(a, fewer), ConfigError);
        Calibration other_size = b;
        other_size.collectives[2].size_B = 1.0;
        CHECK_THROWS_AS((void)mean_of(a, other_size), ConfigError);
    }

    TEST_CASE("SyncSample: the wait as a share of the segments, the median round") {
        SyncSample s;
        CHECK(s.wait_fraction() == 0.0);  // one rank: nothing measured
        // No rounds kept: the sums' share. 256 segments: 0.3 s with all-reduces, 0.25 s
        // without, 0.0044 s of all-reduces alone: (0.3 - 0.25 - 0.0044) / 0.25 = 0.1824.
        s = {256, 0.3, 0.25, 0.0044, {}};
        CHECK(s.wait_fraction() == doctest::Approx(0.1824).epsilon(1e-9));
        // Rounds kept: their median, whatever the sums say. {0.02, 0.5, 0.01, 0.03, 0.04}
        // sorted is {0.01, 0.02, 0.03, 0.04, 0.5}: 0.03 (the stalled round, 0.5, is left out).
        s.round_fractions = {0.02, 0.5, 0.01, 0.03, 0.04};
        CHECK(s.wait_fraction() == doctest::Approx(0.03).epsilon(1e-12));
        // An even count: the mean of the middle two, {0.01, 0.02, 0.04, 0.5} -> 0.03.
        s.round_fractions = {0.04, 0.5, 0.01, 0.02};
        CHECK(s.wait_fraction() == doctest::Approx(0.03).epsilon(1e-12));
        // Faster with the all-reduces than without (noise): no negative wait.
        s.round_fractions = {-0.02, -0.01, 0.005};
        CHECK(s.wait_fraction() == 0.0);

        Calibration c = synthetic();
        c.sync = {256, 0.3, 0.25, 0.0044, {0.02, 0.5, 0.01, 0.03, 0.04}};
        const Summary sum = summarize(c);
        CHECK(sum.sync_wait_fraction == doctest::Approx(0.03).epsilon(1e-12));
        const ClusterSpec k = to_cluster(c, sum, "synthetic");
        CHECK(k.node.sync_wait_fraction == sum.sync_wait_fraction);
        CHECK(k.node.sync_wait.value() == 0.0);  // no per-collective constant any more
        // The profile writes it and the loader reads it back (to the printed digits).
        const ClusterSpec back = parse_cluster_toml(
            profile_toml(c, sum, k, {"2026-11-30T00:00:00Z", "test"}), "sync.toml");
        CHECK(back.node.sync_wait_fraction == doctest::Approx(0.03).epsilon(1e-5));
        // A share of 0 is not written (the key's absence means 0; the loader wants (0, 1]).
        Calibration quiet = c;
        quiet.sync.round_fractions = {-0.01, 0.0, -0.02};
        const Summary qs = summarize(quiet);
        const std::string text =
            profile_toml(quiet, qs, to_cluster(quiet, qs, "quiet"), {"2026-11-30T00:00:00Z", "test"});
        CHECK(text.find("sync_wait_fraction") == std::string::npos);
        CHECK(parse_cluster_toml(text, "quiet.toml").node.sync_wait_fraction == 0.0);
        // The per-collective fits become the node's own bandwidths: every synthetic sample was
        // timed at beta = 1 GB/s (ring_time), and reduce-scatter has no samples (stays 0).
        CHECK(k.node.collective_bw.all_reduce.value() == doctest::Approx(1e9).epsilon(1e-6));
        CHECK(k.node.collective_bw.all_gather.value() == doctest::Approx(1e9).epsilon(1e-6));
        CHECK(k.node.collective_bw.send_recv.value() == doctest::Approx(1e9).epsilon(1e-6));
        CHECK(k.node.collective_bw.reduce_scatter.value() == 0.0);
        CHECK(back.node.collective_bw.all_gather.value() == doctest::Approx(1e9).epsilon(1e-5));
        CHECK(back.node.collective_bw.reduce_scatter.value() == 0.0);
        // mean_of keeps the first calibration's sync sample (the collectives are measured once).
        Calibration later = c;
        later.sync = {256, 0.5, 0.25, 0.0044, {0.2}};
        CHECK(mean_of(c, later).sync == c.sync);
    }

    TEST_CASE("alpha_beta_samples: steps and wire bytes from the shared busbw table") {
        // all-gather of S = 1 MiB on 4 ranks: 3 steps, 3/4 * 1048576 = 786432 bytes.
        const auto v = alpha_beta_samples({{Collective::all_gather, 4, 1048576.0, 1e-3}});
        REQUIRE(v.size() == 1);
        CHECK(v[0].steps == 3.0);
        CHECK(v[0].wire_B == 786432.0);
        CHECK(v[0].t_s == 1e-3);
    }

    TEST_CASE("profile_toml: round trip through the cluster loader") {
        const Calibration c = synthetic();
        const Summary s = summarize(c);
        const ClusterSpec k = to_cluster(c, s, "calibrated-test");
        CHECK(k.node.gpus_per_node == 2);
        CHECK(to_gib(k.gpu.memory) == doctest::Approx(8.0).epsilon(1e-12));  // 16 GiB / 2 ranks
        const std::string text = profile_toml(c, s, k, {"2026-11-29T22:00:00Z", "mpirun -np 2 x"});
        CHECK(text.find("measured by cleave calibrate on 2026-11-29T22:00:00Z") !=
              std::string::npos);
        CHECK(text.find("command: mpirun -np 2 x") != std::string::npos);

        const auto dir = std::filesystem::temp_directory_path();
        const auto path = dir / "cleave-test-calibrated.toml";
        std::ofstream(path) << text;
        const ClusterSpec back = load_cluster(path.string());
        std::filesystem::remove(path);
        CHECK(back.name == "calibrated-test");
        CHECK(back.gpu.peak_fp32.value() == doctest::Approx(4e10).epsilon(1e-5));
        CHECK(back.gpu.hbm_bw.value() == doctest::Approx(8e9).epsilon(1e-5));
        CHECK(back.gpu.hbm_efficiency == doctest::Approx(0.5).epsilon(1e-3));
        REQUIRE(back.gpu.gemm_efficiency.size() == 3);
        CHECK(back.gpu.gemm_efficiency[0].size.value() == doctest::Approx(65536.0).epsilon(1e-5));
        CHECK(back.gpu.gemm_efficiency[0].efficiency == doctest::Approx(0.25).epsilon(1e-3));
        CHECK(back.node.intra_bw.value() == doctest::Approx(1e9).epsilon(1e-5));
        CHECK(back.node.intra_latency.value() == doctest::Approx(10e-6).epsilon(1e-5));
        CHECK(back.node.gpus_per_node == 2);
        CHECK(back.network.inter_bw.value() == doctest::Approx(1e9).epsilon(1e-5));
    }

    TEST_CASE("summarize: kernels faster than the DRAM stream set the peak") {
        Calibration c = synthetic();
        c.kernels = {{"gelu_fwd", 8.0, 1000000, 0.5e-3}};  // 16 GB/s, from cache
        const Summary s = summarize(c);
        CHECK(s.memory_peak.value() == doctest::Approx(16e9).epsilon(1e-12));
        CHECK(s.memory_efficiency == doctest::Approx(1.0).epsilon(1e-12));
    }

    TEST_CASE("attention_gemm_s: the cost model's price of the attention benchmark's GEMMs") {
        const Summary s = summarize(synthetic());
        // 16 heads x batch of 128 x 128 x 32 GEMMs, 1048576 FLOP each. cpu: one at a time, at
        // the curve's efficiency for 1048576 FLOP: 0.5 + 0.5 x log(2) / log(8) = 2/3, so each
        // takes 1048576 / (4e10 x 2/3) = 39.3216 us; Q K^T + P V forward, twice that backward:
        // 3 x 2 x 16 x 39.3216 us = 3.7748736 ms.
        CHECK(attention_gemm_s("cpu", s.peak, s.curve) ==
              doctest::Approx(3.7748736e-3).epsilon(1e-12));
        // cuda: one batched kernel of 16777216 FLOP at efficiency 1: 3 x 2 x 419.4304 us.
        CHECK(attention_gemm_s("cuda", s.peak, s.curve) ==
              doctest::Approx(2.5165824e-3).epsilon(1e-12));
    }

    TEST_CASE("summarize: one efficiency per kernel class") {
        Calibration c = synthetic();
        // norm 8e6 B / 2 ms = 4 GB/s; GeLU 8e6 B / 16 ms = 0.5 GB/s; Adam 32e6 B / 8 ms = 4 GB/s;
        // attention: 38 B x 262144 scores = 9961472 B of softmax in 13.7363456 ms less the
        // 3.7748736 ms of its GEMMs = 9.961472 ms: 1 GB/s.
        c.kernels = {{"norm_fwd", 8.0, 1000000, 2e-3},
                     {"gelu_fwd", 8.0, 1000000, 16e-3},
                     {"attention", 38.0, 262144, 13.7363456e-3},
                     {"adam", 32.0, 1000000, 8e-3},
                     {"other", 8.0, 1000000, 1.0}};  // no class: ignored
        const Summary s = summarize(c);
        CHECK(s.memory_peak.value() == doctest::Approx(8e9).epsilon(1e-12));  // copy
        REQUIRE(s.classes.size() == 4);
        CHECK(s.classes[0].cls == KernelClass::norm);
        CHECK(s.classes[0].bw.value() == doctest::Approx(4e9).epsilon(1e-12));
        CHECK(s.classes[0].efficiency == doctest::Approx(0.5).epsilon(1e-12));
        CHECK(s.classes[1].cls == KernelClass::activation);
        CHECK(s.classes[1].efficiency == doctest::Approx(0.0625).epsilon(1e-12));
        CHECK(s.classes[2].cls == KernelClass::softmax);
        CHECK(s.classes[2].bw.value() == doctest::Approx(1e9).epsilon(1e-9));
        CHECK(s.classes[2].efficiency == doctest::Approx(0.125).epsilon(1e-9));
        CHECK(s.classes[3].cls == KernelClass::optimizer);
        CHECK(s.classes[3].efficiency == doctest::Approx(0.5).epsilon(1e-12));
        // The mix: 57961472 B in 35.961472 ms = 1.61176 GB/s, / 8 GB/s.
        CHECK(s.memory_efficiency ==
              doctest::Approx(57961472.0 / 35.961472e-3 / 8e9).epsilon(1e-9));

        const ClusterSpec k = to_cluster(c, s, "classes");
        CHECK(k.gpu.norm_efficiency == doctest::Approx(0.5).epsilon(1e-12));
        CHECK(k.gpu.elementwise_efficiency == 0.0);  // not measured: hbm_efficiency prices it
        CHECK_FALSE(k.gpu.batched_gemm_fused);       // cpu backend
        const ClusterSpec back = parse_cluster_toml(profile_toml(c, s, k, {"d", "c"}), "x.toml");
        CHECK(back.gpu.norm_efficiency == doctest::Approx(0.5).epsilon(1e-3));
        CHECK(back.gpu.activation_efficiency == doctest::Approx(0.0625).epsilon(1e-3));
        CHECK(back.gpu.softmax_efficiency == doctest::Approx(0.125).epsilon(1e-3));
        CHECK(back.gpu.optimizer_efficiency == doctest::Approx(0.5).epsilon(1e-3));
        CHECK(back.gpu.elementwise_efficiency == 0.0);
        CHECK(back.gpu.cross_entropy_efficiency == 0.0);
        CHECK_FALSE(back.gpu.batched_gemm_fused);
    }

    TEST_CASE("summarize: an attention sample its GEMM price explains leaves softmax unmeasured") {
        Calibration c = synthetic();
        // 3.9 ms measured, 3.7748736 ms of GEMMs: 3.2% left, under the 5% floor.
        c.kernels = {{"norm_fwd", 8.0, 1000000, 2e-3}, {"attention", 38.0, 262144, 3.9e-3}};
        const Summary s = summarize(c);
        REQUIRE(s.classes.size() == 1);
        CHECK(s.classes[0].cls == KernelClass::norm);
        CHECK(s.memory_efficiency == doctest::Approx(0.5).epsilon(1e-12));  // norm alone
    }

    TEST_CASE("summarize: the ssm sample less its scan products, kept out of the mix") {
        // ssm_bench_shape (256 tokens, 8 heads of 16, 2 groups of state 16, chunk 32; fp32), the
        // cost model's ssm bytes per token (compute.cpp mamba_traffic): d_inner 128, x B C 192,
        // states 4 x 8 x 16 x 16 / 32 = 256. Forward: gated norm 3 x 4 x 128 = 1536, conv 2 x 4
        // x 192 = 1536, scan reads 4 x (192 + 8 + 128) = 1312, states 4 x 256 = 1024: 5,408.
        // Backward: gated norm 5 x 4 x 128 = 2560, the conv recomputed 2 x 4 x 192 = 1536, its
        // gradient 3 x 4 x 192 = 2304, the scan 2 x 4 x 328 = 2624, states 6 x 256 = 1536:
        // 10,560. 15,968 B a token.
        CHECK(ssm_bench_bytes_per_token() == doctest::Approx(15968.0));
        // The scan's products: C B^T 16 of 2 x 32 x 32 x 16 = 32,768 FLOP, (C B^T o L) X 64 of
        // 32,768, B^T X and C h 64 each of 16,384: 4,718,592 FLOP, every one below the curve's
        // first point (65,536 FLOP at 0.25): 10 GFLOP/s, 471.8592 us; forward + twice backward
        // 1.4155776 ms.
        Calibration c = synthetic();
        const Summary s0 = summarize(c);
        CHECK(ssm_gemm_s("cpu", s0.peak, s0.curve) == doctest::Approx(1.4155776e-3).epsilon(1e-12));
        // 15,968 x 256 = 4,087,808 B at 1 GB/s = 4.087808 ms + the products: 5.5033856 ms.
        c.kernels.push_back({"ssm", 15968.0, 256, 5.5033856e-3});
        const Summary s = summarize(c);
        REQUIRE(s.classes.size() == 3);  // norm, optimizer, ssm
        CHECK(s.classes[2].cls == KernelClass::ssm);
        CHECK(s.classes[2].bw.value() == doctest::Approx(1e9).epsilon(1e-9));
        CHECK(s.classes[2].efficiency == doctest::Approx(0.125).epsilon(1e-9));
        CHECK(s.memory_efficiency == doctest::Approx(s0.memory_efficiency).epsilon(1e-12));
        const ClusterSpec k = to_cluster(c, s, "ssm");
        const ClusterSpec back = parse_cluster_toml(profile_toml(c, s, k, {"d", "c"}), "x.toml");
        CHECK(back.gpu.ssm_efficiency == doctest::Approx(0.125).epsilon(1e-3));
        CHECK(kernel_efficiency(back.gpu, KernelClass::ssm) == doctest::Approx(0.125).epsilon(1e-3));
    }

    TEST_CASE("kernel_class_of: the class each bench_kernels sample measures") {
        CHECK(kernel_class_of("norm_bwd") == KernelClass::norm);
        CHECK(kernel_class_of("bias_residual_fwd") == KernelClass::elementwise);
        CHECK(kernel_class_of("gelu_bwd") == KernelClass::activation);
        CHECK(kernel_class_of("swiglu_fwd") == KernelClass::gated_activation);
        CHECK(kernel_class_of("attention") == KernelClass::softmax);
        CHECK(kernel_class_of("cross_entropy") == KernelClass::cross_entropy);
        CHECK(kernel_class_of("adam") == KernelClass::optimizer);
        CHECK(kernel_class_of("ssm") == KernelClass::ssm);
        CHECK_FALSE(kernel_class_of("copy").has_value());
    }

    TEST_CASE("summarize: one rank has no collectives and estimates the link") {
        Calibration c = synthetic();
        c.ranks = 1;
        c.ranks_per_host = 1;
        c.collectives.clear();
        const Summary s = summarize(c);
        CHECK_FALSE(s.link_measured);
        CHECK(s.link.beta.value() == doctest::Approx(4e9).epsilon(1e-12));  // 8 GB/s copy / 2
        const ClusterSpec k = to_cluster(c, s, "one");
        const ClusterSpec back = parse_cluster_toml(profile_toml(c, s, k, {"d", "c"}), "x.toml");
        CHECK(back.node.gpus_per_node == 1);
    }
}

TEST_SUITE("calibrate") {
    TEST_CASE("gemm_shapes: sorted by FLOPs, no duplicates, a GPU sweep reaches 8192") {
        const auto cpu = gemm_shapes(false, false);
        REQUIRE(!cpu.empty());
        for (size_t i = 1; i < cpu.size(); ++i) {
            CHECK(cpu[i - 1].flop() <= cpu[i].flop());
            CHECK_FALSE(cpu[i - 1] == cpu[i]);
        }
        // h = 512: 1024 tokens x 512 -> 2048: 2 x 1024 x 2048 x 512 FLOP.
        CHECK(cpu.back().flop() == 2.0 * 1024 * 1024 * 1024);
        // 9 hidden sizes x 4 transformer shapes, every one T = 2h tokens, no squares.
        CHECK(cpu.size() == 36);
        for (const auto& g : cpu) {
            const int64_t h = std::min(g.n, g.k);
            CHECK(g.m == 2 * h);
            CHECK_FALSE((g.m == g.n && g.n == g.k));
        }
        const auto gpu = gemm_shapes(false, true);
        CHECK(gpu.back().m == 8192);
        CHECK(gpu.back().n == 8192);
        CHECK(gemm_shapes(true, false).size() < cpu.size());
    }

    TEST_CASE("medians_of_passes: a slow spell shorter than a pass leaves every median alone") {
        // 6 items x 5 trials, 30 timed calls in order (t, i); every call takes 1.0 except calls
        // 8..13 (a spell of 6 consecutive calls = one pass), which take 1.6. Taking turns, calls
        // 8..13 are pass 1's items 2..5 and pass 2's items 0..1: each item is hit at most once
        // of 5 trials, so every median stays 1.0. One item after another (all 5 trials of item
        // 0, then of item 1, ...), calls 8..13 would be item 1's trials 3-4 and all of item 2's:
        // item 2's median would be 1.6.
        int call = 0;
        std::vector<std::pair<int, size_t>> order;
        const std::vector<double> m = medians_of_passes(5, 6, [&](int t, size_t i) {
            order.emplace_back(t, i);
            const int k = call++;
            return k >= 8 && k < 14 ? 1.6 : 1.0;
        });
        REQUIRE(m.size() == 6);
        for (const double v : m) {
            CHECK(v == 1.0);
        }
        CHECK(call == 30);
        CHECK(order[6] == std::pair<int, size_t>{1, 0});  // pass 1 starts after all 6 items
        CHECK(order[29] == std::pair<int, size_t>{4, 5});
        // A spell of 3 passes (calls 6..23) hits each item in 3 of 5 trials: every median 1.6.
        call = 0;
        const std::vector<double> long_spell = medians_of_passes(5, 6, [&](int, size_t) {
            const int k = call++;
            return k >= 6 && k < 24 ? 1.6 : 1.0;
        });
        for (const double v : long_spell) {
            CHECK(v == 1.6);
        }
        // Even trial counts: the mean of the middle two (1.0, 3.0, 2.0, 4.0 -> 2.5).
        const std::vector<double> even = medians_of_passes(4, 1, [](int t, size_t) {
            return std::vector{1.0, 3.0, 2.0, 4.0}[t];
        });
        CHECK(even == std::vector<double>{2.5});
    }

    TEST_CASE("group_sizes: powers of two up to the world, and the world") {
        CHECK(group_sizes(1).empty());
        CHECK(group_sizes(2) == std::vector<int64_t>{2});
        CHECK(group_sizes(6) == std::vector<int64_t>{2, 4, 6});
        CHECK(group_sizes(8) == std::vector<int64_t>{2, 4, 8});
    }
}
