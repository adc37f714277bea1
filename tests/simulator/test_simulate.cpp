#include "core/errors.hpp"
#include "simulator/simulate.hpp"
#include "tests/simulator/sim_helpers.hpp"

#include <tuple>
#include <vector>

#include <doctest/doctest.h>

using namespace cleave;
using cleave::test::uniform_input;

namespace {

// Every stage's time splits into busy + idle + comm_wait over the whole iteration.
void check_accounting(const SimResult& r) {
    for (const auto& st : r.stages) {
        CHECK((st.busy + st.idle + st.comm_wait).value() ==
              doctest::Approx(r.iteration_time.value()).epsilon(1e-12));
        CHECK(st.idle.value() >= 0.0);
    }
}

}  // namespace

TEST_SUITE("simulator") {
    TEST_CASE("simulate: uniform stages, free comm: bubble is (p-1)/(m+p-1) for 1F1B and GPipe") {
        for (const auto& [p, m] :
             {std::pair<int64_t, int64_t>{2, 1}, {4, 8}, {8, 4}, {8, 32}, {3, 7}, {16, 5}}) {
            for (const auto s : {SimSchedule::one_f_one_b, SimSchedule::gpipe}) {
                CAPTURE(p);
                CAPTURE(m);
                CAPTURE(to_string(s));
                // f = 1, b = 2: the fill and drain each cost (p-1) slots, so the iteration is
                // (m + p - 1)(f + b) and each stage works m (f + b) of it.
                const auto r = simulate(uniform_input(s, p, m, 1, 1.0, 2.0));
                const double want = static_cast<double>(p - 1) / static_cast<double>(m + p - 1);
                CHECK(r.bubble_ratio == doctest::Approx(want).epsilon(1e-12));
                CHECK(r.iteration_time.value() ==
                      doctest::Approx(3.0 * static_cast<double>(m + p - 1)).epsilon(1e-12));
                for (const auto& st : r.stages) {
                    CHECK(st.bubble_ratio == doctest::Approx(want).epsilon(1e-12));
                    CHECK(st.comm_wait.value() == 0.0);
                }
                check_accounting(r);
            }
        }
    }

    TEST_CASE("simulate: interleaved bubble is (p-1)/(v m + p-1)") {
        for (const auto& [p, v, m] : {std::tuple<int64_t, int64_t, int64_t>{2, 2, 4},
                                      {4, 2, 8},
                                      {4, 4, 16},
                                      {8, 2, 16},
                                      {4, 3, 12},
                                      {4, 2, 4}}) {
            CAPTURE(p);
            CAPTURE(v);
            CAPTURE(m);
            // Each chunk costs f/v forward, b/v backward: the work per rank is m (f + b).
            const double f = 1.0 / static_cast<double>(v);
            const auto r = simulate(uniform_input(SimSchedule::interleaved, p, m, v, f, 2.0 * f));
            const double want = static_cast<double>(p - 1) / static_cast<double>(v * m + p - 1);
            CHECK(r.bubble_ratio == doctest::Approx(want).epsilon(1e-12));
            check_accounting(r);
        }
    }

    TEST_CASE("simulate: peak in-flight micro-batches match the memory model") {
        // 1F1B: stage s holds p - s micro-batches (Narayanan et al. 2021, Sec. 2.2.1).
        const auto r = simulate(uniform_input(SimSchedule::one_f_one_b, 8, 32, 1, 1.0, 2.0));
        for (int64_t s = 0; s < 8; ++s) {
            CHECK(r.stages[static_cast<size_t>(s)].peak_inflight_chunks == 8 - s);
            CHECK(r.stages[static_cast<size_t>(s)].peak_inflight_microbatches ==
                  8.0 - static_cast<double>(s));
        }
        // With fewer micro-batches than stages the warm-up stops at m.
        const auto few = simulate(uniform_input(SimSchedule::one_f_one_b, 8, 4, 1, 1.0, 2.0));
        CHECK(few.stages[0].peak_inflight_chunks == 4);
        CHECK(few.stages[7].peak_inflight_chunks == 1);
        // GPipe: every stage holds all m.
        const auto g = simulate(uniform_input(SimSchedule::gpipe, 4, 6, 1, 1.0, 2.0));
        for (const auto& st : g.stages) {
            CHECK(st.peak_inflight_chunks == 6);
        }
        // Interleaved: rank r holds its Megatron warm-up + 1 chunk activations,
        // 2 (p - r - 1) + (v - 1) p + 1; rank 0 that is v p + p - 1 chunks, i.e.
        // p (1 + (p - 1)/(p v)) micro-batches, DESIGN §2's factor. p = 4, v = 2, m = 8: rank 0
        // 11 chunks = 5.5 micro-batches, rank 3 5 chunks.
        const auto il = simulate(uniform_input(SimSchedule::interleaved, 4, 8, 2, 0.5, 1.0));
        CHECK(il.stages[0].peak_inflight_chunks == 11);
        CHECK(il.stages[0].peak_inflight_microbatches == 4.0 * (1.0 + 3.0 / 8.0));
        CHECK(il.stages[3].peak_inflight_chunks == 5);
    }

    TEST_CASE("simulate: uneven stages, the simulated time holds (2 stages by hand)") {
        // p = 2, m = 2, 1F1B, free comm. Stage 0: f = 1, b = 2; stage 1: f = 3, b = 6.
        // Stage 0 ops F0 F1 B0 B1, stage 1 F0 B0 F1 B1:
        //   s0 F0 [0,1]  F1 [1,2]
        //   s1 F0 [1,4]  B0 [4,10]  F1 [10,13]  B1 [13,19]
        //   s0 B0 [10,12] (needs s1 B0)  B1 [19,21]
        // Iteration 21; the closed form with the slowest stage, (m + p - 1)(f + b) = 27,
        // overstates it: only stage 1's m (f + b) = 18 plus stage 0's f + b = 3 are serial.
        auto in = uniform_input(SimSchedule::one_f_one_b, 2, 2, 1, 1.0, 2.0);
        in.ranks[1].chunks[0].fwd = seconds(3.0);
        in.ranks[1].chunks[0].bwd = seconds(6.0);
        const auto r = simulate(in, {.record_timeline = true});
        CHECK(r.iteration_time.value() == 21.0);
        CHECK(r.stages[0].busy.value() == 6.0);
        CHECK(r.stages[1].busy.value() == 18.0);
        CHECK(r.stages[0].idle.value() == 15.0);
        CHECK(r.stages[1].idle.value() == 3.0);
        // Bubble: 1 - (6 + 18) / (2 * 21) = 3/7.
        CHECK(r.bubble_ratio == doctest::Approx(3.0 / 7.0).epsilon(1e-12));
        std::vector<SimEvent> e0;  // compute stream: F0 F1 B0 B1 + optimizer (0 s)
        for (const auto& e : r.stages[0].events) {
            if (e.stream == SimStream::compute) {
                e0.push_back(e);
            }
        }
        REQUIRE(e0.size() == 5);
        CHECK(e0[2].phase == SimPhase::backward);
        CHECK(e0[2].start_s == 10.0);
        CHECK(e0[3].start_s == 19.0);
        check_accounting(r);
    }

    TEST_CASE("simulate: PP transfers delay the receiver and count as comm wait") {
        // p = 2, m = 1, f = b = 1, p2p 0.5 each way:
        //   s0 F0 [0,1], send act [1,1.5]; s1 F0 [1.5,2.5] B0 [2.5,3.5], send grad
        //   [3.5,4]; s0 B0 [4,5]. Iteration 5. s0 waits 1..4: 2.5 s for s1 to compute
        //   (idle), 0.5 s for the transfer (comm wait); s1 waits 0..1.5: 1 s idle, 0.5 s comm.
        const auto r = simulate(uniform_input(SimSchedule::one_f_one_b, 2, 1, 1, 1.0, 1.0, 0.5));
        CHECK(r.iteration_time.value() == 5.0);
        CHECK(r.stages[0].comm_wait.value() == 0.5);
        CHECK(r.stages[0].idle.value() == 2.5);
        CHECK(r.stages[1].comm_wait.value() == 0.5);
        CHECK(r.stages[1].idle.value() == 2.5);
        check_accounting(r);
    }

    TEST_CASE("simulate: DP buckets overlap the last backward (by hand)") {
        // p = 1, m = 2, f = 1, b = 2: F0 [0,1] B0 [1,3] F1 [3,4] B1 [4,6]. Two buckets of 1.5 s,
        // ready at 50 % and 100 % of B1: 5 and 6. DP stream: [5,6.5] then [6.5,8]; optimizer
        // 0.25 s at 8. Iteration 8.25; the exposed DP tail 8 - 6 = 2 s is comm wait.
        auto in = uniform_input(SimSchedule::one_f_one_b, 1, 2, 1, 1.0, 2.0);
        in.ranks[0].dp_buckets = {{0, 0.5, seconds(1.5)}, {0, 1.0, seconds(1.5)}};
        in.ranks[0].optimizer = seconds(0.25);
        const auto r = simulate(in);
        CHECK(r.iteration_time.value() == 8.25);
        CHECK(r.stages[0].dp_end.value() == 8.0);
        CHECK(r.stages[0].comm_wait.value() == 2.0);
        CHECK(r.stages[0].busy.value() == 6.25);
        CHECK(r.stages[0].idle.value() == 0.0);
        // Without overlap both buckets wait for the backward: [6,7.5] [7.5,9], optimizer at 9.
        in.dp_overlap = false;
        CHECK(simulate(in).iteration_time.value() == 9.25);
    }

    TEST_CASE("simulate: the optimizer waits for every rank's DP reduction when synchronized") {
        // p = 2, m = 1, f = b = 1: s0 F [0,1], s1 F [1,2] B [2,3], s0 B [3,4]. Rank 1 has a
        // 3 s bucket ready at 3 (ends 6), rank 0 a 0.5 s one ready at 4 (ends 4.5); optimizers
        // of 1 s start together at 6 (global grad-norm all-reduce): iteration 7.
        // Unsynchronized, rank 0 finishes at 5.5 and rank 1 at 7.
        auto in = uniform_input(SimSchedule::one_f_one_b, 2, 1, 1, 1.0, 1.0);
        in.ranks[0].dp_buckets = {{0, 1.0, seconds(0.5)}};
        in.ranks[1].dp_buckets = {{0, 1.0, seconds(3.0)}};
        in.ranks[0].optimizer = seconds(1.0);
        in.ranks[1].optimizer = seconds(1.0);
        const auto r = simulate(in);
        CHECK(r.iteration_time.value() == 7.0);
        CHECK(r.stages[0].optimizer_start.value() == 6.0);
        CHECK(r.stages[0].comm_wait.value() == 0.5);  // its own DP tail
        check_accounting(r);
        in.optimizer_sync = false;
        const auto u = simulate(in);
        CHECK(u.stages[0].optimizer_end.value() == 5.5);
        CHECK(u.iteration_time.value() == 7.0);
    }

    TEST_CASE("simulate: ZB-H1 cuts the 1F1B bubble to (p-1)(F+B-W)") {
        // F = 1, B = 1 (input grad), W = 1 (weight grad), p = 4, m = 8: 1F1B takes
        // (m + p - 1) * 3 = 33; ZB-H1 fills the cool-down with delayed Ws, leaving a bubble of
        // (p - 1)(F + B - W) = 3 (Qi et al. 2024, Sec. 2.1): 8 * 3 + 3 = 27.
        auto in = uniform_input(SimSchedule::zb_h1, 4, 8, 1, 1.0, 2.0);
        const auto r = simulate(in);
        CHECK(r.iteration_time.value() == 27.0);
        CHECK(r.stages[0].peak_inflight_chunks == 4);  // same as 1F1B's first stage
        in.schedule = SimSchedule::one_f_one_b;
        CHECK(simulate(in).iteration_time.value() == 33.0);
    }

    TEST_CASE("simulate: unschedulable inputs throw ConfigError") {
        CHECK_THROWS_AS((void)simulate(SimInput{}), ConfigError);
        auto in = uniform_input(SimSchedule::interleaved, 4, 3, 2, 1.0, 2.0);
        CHECK_THROWS_AS((void)simulate(in), ConfigError);  // m = 3 < p = 4
        in = uniform_input(SimSchedule::one_f_one_b, 2, 4, 2, 1.0, 2.0);
        CHECK_THROWS_AS((void)simulate(in), ConfigError);  // 1F1B with 2 chunks
        in = uniform_input(SimSchedule::one_f_one_b, 2, 4, 1, -1.0, 2.0);
        CHECK_THROWS_AS((void)simulate(in), ConfigError);
        in = uniform_input(SimSchedule::one_f_one_b, 2, 0, 1, 1.0, 2.0);
        CHECK_THROWS_AS((void)simulate(in), ConfigError);
    }
}

TEST_SUITE("one schedule") {
    TEST_CASE("simulator and cost model hold the same peak per stage") {
        // The simulator walks the one schedule's ops in time; the cost model reads the closed
        // form (costmodel/pipeline.cpp inflight_microbatches via core peak_inflight_chunks).
        for (SimSchedule s : {SimSchedule::gpipe,
                              SimSchedule::one_f_one_b,
                              SimSchedule::interleaved,
                              SimSchedule::zb_h1}) {
            for (int64_t v : {1, 2}) {
                if (v > 1 && s != SimSchedule::interleaved) {
                    continue;
                }
                for (int64_t m : {4, 5, 8}) {
                    const auto r = simulate(uniform_input(s, 4, m, v, 1.0, 2.0));
                    for (int64_t st = 0; st < 4; ++st) {
                        CAPTURE(st);
                        CHECK(r.stages[static_cast<size_t>(st)].peak_inflight_chunks ==
                              cleave::peak_inflight_chunks(s, 4, v, m, st));
                    }
                }
            }
        }
    }
}
