// Overlap as the stack does it (costmodel/overlap.cpp) and where estimate() uses it; each value
// worked by hand in the comment.
#include "costmodel/collectives.hpp"
#include "costmodel/estimate.hpp"
#include "costmodel/overlap.hpp"
#include "tests/costmodel/fixtures.hpp"

#include <doctest/doctest.h>

using namespace cleave;

TEST_SUITE("costmodel") {
    TEST_CASE("overlap: bucketed DP traffic exposes one bucket plus what compute cannot cover") {
        // total 100 ms, one bucket 10 ms, behind 60 ms of backward: 10 + max(0, 100 - 10 - 60)
        // = 40 ms; behind 200 ms: 10 ms; without overlap all 100 ms.
        CHECK(to_ms(exposed_bucketed(ms(100), ms(10), ms(60), true)) == doctest::Approx(40.0));
        CHECK(to_ms(exposed_bucketed(ms(100), ms(10), ms(200), true)) == doctest::Approx(10.0));
        CHECK(to_ms(exposed_bucketed(ms(100), ms(10), ms(200), false)) == doctest::Approx(100.0));
        // A bucket larger than the whole: only the whole (5 ms) can be exposed.
        CHECK(to_ms(exposed_bucketed(ms(5), ms(10), ms(200), true)) == doctest::Approx(5.0));
    }

    TEST_CASE("overlap: FSDP prefetch exposes the first unit's traffic, without it every gather") {
        // gathers 80 ms + reduce-scatters 40 ms over 10 units behind 100 ms of backward:
        // first = 120 / 10 = 12 ms; 12 + max(0, 120 - 12 - 100) = 20 ms.
        CHECK(to_ms(fsdp_exposed(ms(80), ms(40), ms(100), 10.0, true)) == doctest::Approx(20.0));
        // DeepSpeed stage 3 (no prefetch in backward): 80 + max(0, 40 - 100) = 80 ms.
        CHECK(to_ms(fsdp_exposed(ms(80), ms(40), ms(100), 10.0, false)) == doctest::Approx(80.0));
        // Forward, 24 ms of gathers over 8 units behind 100 ms: 3 ms.
        CHECK(to_ms(fsdp_exposed(ms(24), Seconds{}, ms(100), 8.0, true)) == doctest::Approx(3.0));
    }

    TEST_CASE("overlap: hidden traffic slows the compute it hides behind by its SM share") {
        // 100 ms of traffic, 40 ms exposed: 60 ms hidden x 0.15 of the SMs = 9 ms more compute.
        CHECK(to_ms(overlap_slowdown(ms(100), ms(40), 0.15)) == doctest::Approx(9.0));
        CHECK(to_ms(overlap_slowdown(ms(100), ms(100), 0.15)) == doctest::Approx(0.0));
        CHECK(to_ms(overlap_slowdown(ms(100), ms(10), 0.0)) == doctest::Approx(0.0));
    }

    TEST_CASE("overlap: each virtual stage's send/recv pays the stack's p2p overhead") {
        const ModelSpec m = test::seed13b();
        const ClusterSpec c = test::dgx_a100();
        JobSpec job = test::job(64, 256);
        Plan p = test::plan(4, 8, 2);  // pp 2, interleaved with v = 4: 2 x 4 = 8 send/recv per
        p.schedule = Schedule::interleaved;  // micro-batch on the critical path
        p.vpp = 4;
        const Estimate e0 = estimate(m, c, job, p);
        job.stack.p2p_overhead_us = 20.0;
        const Estimate e1 = estimate(m, c, job, p);
        // One transfer (pp_p2p) grows by 20 us; the exposed PP time by 20 us x 8 x m (m = 64).
        REQUIRE(e0.microbatches == 64);
        CHECK(to_us(e1.pp_p2p - e0.pp_p2p) == doctest::Approx(20.0));
        CHECK(to_us(e1.time.pp_comm - e0.time.pp_comm) == doctest::Approx(20.0 * 8.0 * 64.0));
    }

    TEST_CASE("overlap: a TP collective pipelined with its GEMM exposes only the excess") {
        // 5 ms of all-gather behind a 3 ms GEMM: 2 ms; behind 8 ms: 0; not overlapped: 5 ms.
        CHECK(to_ms(exposed_behind_gemm(ms(5), ms(3), true)) == doctest::Approx(2.0));
        CHECK(to_ms(exposed_behind_gemm(ms(5), ms(8), true)) == doctest::Approx(0.0));
        CHECK(to_ms(exposed_behind_gemm(ms(5), ms(3), false)) == doctest::Approx(5.0));
    }

    TEST_CASE("overlap: ZeRO-2 reduce-scatters the grads once per micro-batch") {
        const ModelSpec m = test::seed13b();
        const ClusterSpec c = test::dgx_a100();
        const JobSpec job = test::job(64, 256);
        Plan p = test::plan(8, 8, 1);  // dp 8, m = 256 / 8 = 32 micro-batches
        p.zero = 1;
        const Estimate z1 = estimate(m, c, job, p);
        p.zero = 2;
        const Estimate z2 = estimate(m, c, job, p);
        REQUIRE(z1.microbatches == 32);
        // ZeRO-1 sends each grad byte once per iteration ((n-1)/n of the unsharded fp32 grads,
        // z1.memory.grads); ZeRO-2 32 times: the difference is 31 x 7/8 x grads.
        const double g = z1.memory.grads.value();
        CHECK(z2.comm_bytes_per_gpu.dp.value() - z1.comm_bytes_per_gpu.dp.value() ==
              doctest::Approx(31.0 * 7.0 / 8.0 * g));
        // The exposed part of each micro-batch's reduce-scatter lands in its backward.
        CHECK(z2.time.dp_comm > z1.time.dp_comm);
    }

    TEST_CASE("overlap: --overlap-param-gather hides the ZeRO-1 weight all-gather behind forward") {
        const ModelSpec m = test::seed13b();
        const ClusterSpec c = test::dgx_a100();
        JobSpec job = test::job(64, 256);
        Plan p = test::plan(8, 8, 1);
        p.zero = 1;
        const Estimate off = estimate(m, c, job, p);
        job.stack.overlap_param_gather = true;
        const Estimate on = estimate(m, c, job, p);
        // Weights per GPU: 13.05e9 / 8 x 2 B = 3.26 GB, gathered over 8 ranks on different
        // nodes (tp 8 fills a node) at 24 GB/s: about 119 ms; one 40M-param bucket (80 MB)
        // about 3 ms. One micro-batch's forward (~52 ms) hides only part of the rest, so
        // exposed = bucket + (whole - bucket - fwd) and the saving is exactly fwd (the
        // smaller of whole - bucket and fwd).
        const Bytes wb = off.memory.weights;
        const GroupLink link = plan_links(c, p).dp;
        const Seconds whole = collective_time(Collective::all_gather, wb, 8, link);
        const Seconds bucket = collective_time(Collective::all_gather, bytes(40e6 * 2.0), 8, link);
        const Seconds fwd = off.stage[0].fwd;  // incl. its exposed TP comm (NVLink, not IB)
        CHECK(to_ms(whole) == doctest::Approx(119.0).epsilon(0.03));
        CHECK(to_ms(off.time.optimizer - on.time.optimizer) ==
              doctest::Approx(to_ms(min(whole - bucket, fwd))).epsilon(1e-9));
    }
}
