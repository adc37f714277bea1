#include "costmodel/estimate.hpp"
#include "costmodel/pipeline.hpp"
#include "tests/costmodel/fixtures.hpp"

#include <doctest/doctest.h>

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
