#include "costmodel/estimate.hpp"
#include "costmodel/pipeline.hpp"
#include "tests/costmodel/fixtures.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace cleave;

TEST_SUITE("costmodel") {
    TEST_CASE("pipeline: p=8 m=4 bubble is 7 of 11 not the seed 47 percent") {
        const Plan p = test::plan(1, 1, 8);
        // (p-1)/(m+p-1) = 7/(4+7) = 0.63636...
        CHECK(bubble_fraction(p, 4) == doctest::Approx(7.0 / 11.0).epsilon(1e-12));
        // m = 64: 7/71
        CHECK(bubble_fraction(p, 64) == doctest::Approx(7.0 / 71.0).epsilon(1e-12));
    }

    TEST_CASE("pipeline: interleaving divides the bubble by v") {
        Plan p = test::plan(1, 8, 8);
        p.schedule = Schedule::interleaved;
        p.vpp = 3;
        // (p-1)/(v m + p-1) = 7/(3*64 + 7) = 7/199
        CHECK(bubble_fraction(p, 64) == doctest::Approx(7.0 / 199.0).epsilon(1e-12));
    }

    TEST_CASE("pipeline: micro-batches in flight per schedule") {
        Plan p = test::plan(1, 1, 8);
        // 1F1B: stage s holds min(m, p - s)
        CHECK(inflight_microbatches(p, 64, 0) == 8.0);
        CHECK(inflight_microbatches(p, 64, 7) == 1.0);
        CHECK(inflight_microbatches(p, 4, 0) == 4.0);
        // GPipe holds all m
        p.schedule = Schedule::gpipe;
        CHECK(inflight_microbatches(p, 64, 3) == 64.0);
        // interleaved, v=3, first stage: p + (p-1)/v = 8 + 7/3 = p (1 + (p-1)/(p v))
        p.schedule = Schedule::interleaved;
        p.vpp = 3;
        CHECK(inflight_microbatches(p, 64, 0) == doctest::Approx(8.0 + 7.0 / 3.0).epsilon(1e-12));
        CHECK(inflight_microbatches(p, 64, 0) ==
              doctest::Approx(8.0 * (1.0 + 7.0 / 24.0)).epsilon(1e-12));
    }

    TEST_CASE("pipeline: time of equal stages is (m + (p-1)/v) t") {
        Plan p = test::plan(1, 1, 4);
        // 1F1B, 4 stages of 1 s, m = 8: sum 4 s + (8-1) x 1 s = 11 s = (m + p - 1) t
        CHECK(pipeline_time(p, 8, seconds(4), seconds(1)).value() == doctest::Approx(11.0));
        p.schedule = Schedule::interleaved;
        p.vpp = 2;
        // 4/2 + (8 - 1/2) = 9.5 = (8 + 3/2) x 1
        CHECK(pipeline_time(p, 8, seconds(4), seconds(1)).value() == doctest::Approx(9.5));
        // uneven stages: the slowest paces the steady state
        Plan q = test::plan(1, 1, 2);
        CHECK(pipeline_time(q, 4, seconds(3), seconds(2)).value() ==
              doctest::Approx(3.0 + 3 * 2.0));
    }
}

TEST_SUITE("costmodel") {
    TEST_CASE("pipeline: DualPipe's bubble and idle fraction, the README's formula") {
        // (p/2 - 1)(F&B + B - 3W): p = 16, F&B = 80 ms, B = 50 ms, W = 25 ms:
        // 7 x (80 + 50 - 75) = 385 ms.
        CHECK(dualpipe_bubble(16, seconds(0.080), seconds(0.050), seconds(0.025)).value() ==
              doctest::Approx(0.385));
        // p = 2 has no bubble ((2/2 - 1) = 0); never negative.
        CHECK(dualpipe_bubble(2, seconds(0.080), seconds(0.050), seconds(0.025)).value() == 0.0);
        CHECK(dualpipe_bubble(8, seconds(0.010), seconds(0.010), seconds(0.020)).value() == 0.0);
        // Idle fraction with B = 2F, W = B/2, F&B = F + B: (p - 2) / (3m + p - 2);
        // p = 16, m = 120: 14 / 374 = 0.0374 (1F1B: 15 / 135 = 0.111).
        Plan p = test::plan(1, 1, 16);
        p.schedule = Schedule::dualpipe;
        CHECK(bubble_fraction(p, 120) == doctest::Approx(14.0 / 374.0).epsilon(1e-12));
        // One micro-batch of one stage in flight: the ranks are folded in the estimate.
        CHECK(inflight_microbatches(p, 120, 0) == 1.0);
        // DualPipeV, p = 8 ranks of 16 stages, stage times F, B = 2F, W = F, F&B = 3F: bubble
        // (16/2 - 1)(3F + 2F - 3F) = 14F over 32 x 2 x 3F of work: 7 / (96 + 7) = 7/103.
        Plan v = test::plan(1, 1, 8);
        v.schedule = Schedule::dualpipev;
        CHECK(bubble_fraction(v, 32) == doctest::Approx(7.0 / 103.0).epsilon(1e-12));
    }

    TEST_CASE("pipeline: the dualpipe rule asks for an even pp and micro-batches, at least 2 pp") {
        const ModelSpec m = test::gpt3();
        // 64 GPUs, tp 8, pp 4, dp 2, mbs 1: GBS 16 -> 8 micro-batches = 2 pp: kept.
        JobSpec j = test::job(64, 16);
        Plan p = test::plan(2, 8, 4);
        p.schedule = Schedule::dualpipe;
        CHECK(keeps(Rule::dualpipe_shape, m, j, p));
        // GBS 12 -> 6 micro-batches < 2 pp = 8.
        j.global_batch = 12;
        CHECK_FALSE(keeps(Rule::dualpipe_shape, m, j, p));
        // GBS 18 -> 9, odd.
        j.global_batch = 18;
        CHECK_FALSE(keeps(Rule::dualpipe_shape, m, j, p));
        // pp 3: odd ranks.
        j.global_batch = 24;
        Plan q = test::plan(2, 8, 3);
        q.schedule = Schedule::dualpipe;
        const auto v = plan_violations(m, j, q);
        REQUIRE_FALSE(v.empty());
        CHECK(std::find_if(v.begin(), v.end(), [](const Violation& x) {
                  return x.rule == Rule::dualpipe_shape &&
                         x.message == "dualpipe needs an even pp >= 2, not pp=3";
              }) != v.end());
        // CPU activation offload: DualPipe's reference has none.
        j.global_batch = 16;
        p.offload_layers = 2;
        CHECK_FALSE(keeps(Rule::dualpipe_shape, m, j, p));
        // DualPipeV: any pp >= 2, at least 2 pp micro-batches (odd is fine), 2 pp equal stages.
        // pp 3 (dp 2, tp 8 on 48 GPUs): 96 layers / 6 stages = 16; GBS 14 -> 7 micro-batches.
        JobSpec jv = test::job(48, 14);
        Plan pv = test::plan(2, 8, 3);
        pv.schedule = Schedule::dualpipev;
        CHECK(keeps(Rule::dualpipe_shape, m, jv, pv));
        jv.global_batch = 10;  // 5 < 2 pp = 6
        CHECK_FALSE(keeps(Rule::dualpipe_shape, m, jv, pv));
        jv.global_batch = 14;
        Plan p5 = test::plan(2, 8, 5);  // 96 layers over 10 stages: uneven
        p5.schedule = Schedule::dualpipev;
        const auto bad = plan_violations(m, test::job(80, 20), p5);
        CHECK(std::find_if(bad.begin(), bad.end(), [](const Violation& x) {
                  return x.rule == Rule::dualpipe_shape &&
                         x.message.find("dualpipev runs 2 pp = 10 equal stages: layers=96") == 0;
              }) != bad.end());
    }

    TEST_CASE("estimate: DualPipe holds two stages per rank and hides the pipeline sends") {
        // GPT-3 175B (96 equal layers) on 64 A100s, tp 8, pp 4, dp 2, mbs 1, GBS 64: 32
        // micro-batches; ZeRO 1. Ranks fold stage r and stage 3 - r.
        const ModelSpec m = test::gpt3();
        const ClusterSpec c = test::dgx_a100();
        const JobSpec j = test::job(64, 64);
        Plan one = test::plan(2, 8, 4);
        one.zero = 1;
        Plan dual = one;
        dual.schedule = Schedule::dualpipe;
        const Estimate a = estimate(m, c, j, one);
        const Estimate b = estimate(m, c, j, dual);
        // Rank 1 (a middle rank) holds stages 1 and 2, alike: twice the weights and grads, the
        // optimizer states of one stage (each stage's sharded over the two ranks that hold it),
        // 48 layers.
        const MemoryBreakdown& s1 = a.stage[1].memory;
        const MemoryBreakdown& r1 = b.stage[1].memory;
        CHECK(r1.weights.value() == doctest::Approx(2.0 * s1.weights.value()));
        CHECK(r1.grads.value() == doctest::Approx(2.0 * s1.grads.value()));
        CHECK(r1.optimizer.value() == doctest::Approx(s1.optimizer.value()));
        CHECK(b.stage[1].layers == 48);
        // Activations: p + 1 = 5 micro-batches of one stage, 5/3 of 1F1B's stage 1 (which holds
        // p - 1 = 3); no recomputation, so nothing is held once.
        CHECK(r1.activations.value() == doctest::Approx(s1.activations.value() * 5.0 / 3.0));
        // Time: a rank runs 32 micro-batches, half through each of its stages, a forward and a
        // backward overlapped with the sends hidden (no EP): per micro-batch the mean of its two
        // stages' fwd + bwd (rank 0: stages 0 and 3, rank 1: 1 and 2). The slower rank paces
        // it, then (p/2 - 1) = 1 bubble of F&B + B - 3W with W = B / 2: t + B - 1.5 B.
        const auto fb = [](const StageCost& s) { return (s.fwd + s.bwd).value(); };
        const double t0 = (fb(b.stage[0]) + fb(b.stage[2])) / 2.0;
        const double b0 = (b.stage[0].bwd + b.stage[2].bwd).value() / 2.0;
        const double t1 = fb(b.stage[1]);
        const double b1 = b.stage[1].bwd.value();
        const double t = std::max(t0, t1);
        const double bw = t0 >= t1 ? b0 : b1;
        CHECK(b.time.pp_comm.value() == 0.0);
        CHECK(b.time.bubble.value() == doctest::Approx(t + bw - 1.5 * bw).epsilon(1e-9));
        CHECK((b.iteration_time - b.time.dp_comm - b.time.optimizer).value() ==
              doctest::Approx(32.0 * t + (t + bw - 1.5 * bw)).epsilon(1e-9));
        CHECK(b.bubble_ratio < a.bubble_ratio);
        // Both stages' grads reduced on every rank: rank 0's are stages 0 and 3.
        CHECK(b.time.dp_comm.value() ==
              doctest::Approx((b.stage[0].dp_grad_sync + b.stage[2].dp_grad_sync).value())
                  .epsilon(1e-9));
        // The hidden sends hold SMs: with comm_sm_fraction 0.15 (20 of 132 SMs) each of the 32
        // micro-batches loses 0.15 x its p2p time (pp_p2p is half the per-micro-batch p2p),
        // shown under ep_comm: 32 x 0.15 x 2 pp_p2p.
        CHECK(b.time.ep_comm.value() == 0.0);
        JobSpec jf = j;
        jf.stack.comm_sm_fraction = 0.15;
        const Estimate f = estimate(m, c, jf, dual);
        REQUIRE(f.pp_p2p.value() > 0.0);
        CHECK(f.time.ep_comm.value() ==
              doctest::Approx(32.0 * 0.15 * 2.0 * f.pp_p2p.value()).epsilon(1e-9));
    }

    TEST_CASE("estimate: DualPipeV folds 2 pp stages into pp ranks in a V, one copy of each") {
        // GPT-3 175B on 64 A100s, tp 8, pp 4 ranks of 8 stages (12 layers each), dp 2, GBS 64:
        // 32 micro-batches. Rank 0 holds stages 0 and 7 (the embedding and the output layer),
        // rank 1 stages 1 and 6, rank 3 stages 3 and 4.
        const ModelSpec m = test::gpt3();
        const ClusterSpec c = test::dgx_a100();
        const JobSpec j = test::job(64, 64);
        Plan v = test::plan(2, 8, 4);
        v.zero = 1;
        v.schedule = Schedule::dualpipev;
        // The 8-stage 1F1B view of the same model prices one stage of 12 layers.
        Plan eight = test::plan(2, 8, 8);
        eight.zero = 1;
        JobSpec j8 = j;
        j8.gpus = 128;
        const Estimate s = estimate(m, c, j8, eight);
        const Estimate e = estimate(m, c, j, v);
        CHECK(e.stage[0].layers == 24);
        CHECK(e.stage[1].layers == 24);
        CHECK(e.stage[2].layers == 24);
        // A middle rank: two middle stages' states, one copy (ZeRO-1 over dp 2 as in 1F1B), and
        // 2 pp + 1 = 9 micro-batches of one stage's activations; the 8-stage 1F1B's stage 1
        // holds p - 1 = 7 of them.
        const MemoryBreakdown& mid = e.stage[1].memory;
        const MemoryBreakdown& one = s.stage[1].memory;
        CHECK(mid.weights.value() == doctest::Approx(2.0 * one.weights.value()));
        CHECK(mid.optimizer.value() == doctest::Approx(2.0 * one.optimizer.value()));
        CHECK(mid.activations.value() == doctest::Approx(one.activations.value() * 9.0 / 7.0));
        // Rank 0 also holds the output layer: more than a middle rank.
        CHECK(e.stage[0].memory.weights > mid.weights);
        // Time: every micro-batch crosses both of a rank's stages; the bubble is the README's
        // for 8 stages at one stage's F&B, B, W: (8/2 - 1)(t/2 + B/2 - 3B/4), t and B the
        // slowest rank's per micro-batch.
        CHECK(e.time.pp_comm.value() == 0.0);
        CHECK(e.bubble_ratio < s.bubble_ratio);
        CHECK(e.mfu > 0.0);
        // MFU over the 64 GPUs launched, not the 128 of the 8-stage view: same FLOPs per step.
        CHECK(e.tflops_per_gpu ==
              doctest::Approx(e.model_flops.value() / e.iteration_time.value() / 64.0 / 1e12));
    }
}

TEST_SUITE("partial recomputation") {
    TEST_CASE("block and uniform --recompute-num-layers, Megatron's units") {
        using namespace cleave;
        using namespace cleave::test;
        // GPT-3 on 64 A100s, tp 8, pp 8: 12 layers per stage; stage 1 of 1F1B holds p - s = 7
        // micro-batches (m = 64). Per layer: N = activations kept without recompute, F = with
        // full (the layer input). From the plain estimates:
        //   none: 12 N * 7;   full (uniform 1): 12 F * 7 + (N - F) (one layer rematerialised).
        // Block 2 checkpoints 2 of the 12 layers: (2 F + 10 N) * 7 + (N - F); uniform 3 keeps
        // one input per group of 3 and rematerialises a group: 4 F * 7 + (3 N - F).
        const ModelSpec m = gpt3();
        const ClusterSpec c = dgx_a100();
        const JobSpec j = job(64, 64);
        Plan p = plan(1, 8, 8);
        p.recompute = Recompute::none;
        const Estimate none = estimate(m, c, j, p);
        p.recompute = Recompute::full;
        const Estimate full = estimate(m, c, j, p);
        p.recompute_method = RecomputeMethod::block;
        p.recompute_layers = 2;
        REQUIRE(check_plan(m, j, p).empty());
        const Estimate block = estimate(m, c, j, p);
        p.recompute_method = RecomputeMethod::uniform;
        p.recompute_layers = 3;
        const Estimate uni = estimate(m, c, j, p);
        const double an = to_gib(none.stage[1].memory.activations);
        const double af = to_gib(full.stage[1].memory.activations);
        const double n = an / 84.0;
        const double f = (af - n) / 83.0;  // 84 F + N - F
        CHECK(to_gib(block.stage[1].memory.activations) ==
              doctest::Approx((2.0 * f + 10.0 * n) * 7.0 + (n - f)));
        CHECK(to_gib(uni.stage[1].memory.activations) ==
              doctest::Approx(4.0 * f * 7.0 + (3.0 * n - f)));
        // Time: block recomputes 2 of 12 layers' forwards: bwd = none + 2/12 (full - none);
        // uniform recomputes every layer, as full does.
        const double bn = none.stage[1].bwd.value();
        const double bf = full.stage[1].bwd.value();
        CHECK(block.stage[1].bwd.value() == doctest::Approx(bn + (bf - bn) * 2.0 / 12.0));
        CHECK(uni.stage[1].bwd.value() == doctest::Approx(bf));
        // Selective takes no --recompute-num-layers; 13 layers is more than a stage holds.
        p.recompute = Recompute::selective;
        CHECK(plan_violations(m, j, p).front().rule == Rule::recompute_layers);
        p.recompute = Recompute::full;
        p.recompute_layers = 13;
        CHECK(plan_violations(m, j, p).front().rule == Rule::recompute_layers);
    }
}
