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
