#include "simulator/schedule.hpp"

#include <vector>

#include <doctest/doctest.h>

using namespace cleave;
using detail::OpKind;
using detail::SimOp;

namespace {

std::vector<SimOp> ops(SimSchedule s, int64_t p, int64_t v, int64_t m, int64_t r) {
    std::vector<SimOp> out;
    detail::append_rank_ops(s, p, v, m, r, out);
    return out;
}

SimOp F(int32_t mb, int16_t c = 0) {
    return {mb, c, OpKind::forward};
}

SimOp B(int32_t mb, int16_t c = 0) {
    return {mb, c, OpKind::backward};
}

SimOp W(int32_t mb) {
    return {mb, 0, OpKind::backward_weight};
}

}  // namespace

TEST_SUITE("simulator") {
    TEST_CASE("schedule: 1F1B warm-up is p - s - 1 forwards, then alternates") {
        // p = 4, m = 6, rank 1: warm-up 2 forwards; steady F2 B0 F3 B1 F4 B2 F5 B3; cool-down
        // B4 B5.
        const std::vector<SimOp> want = {
            F(0), F(1), F(2), B(0), F(3), B(1), F(4), B(2), F(5), B(3), B(4), B(5)};
        CHECK(ops(SimSchedule::one_f_one_b, 4, 1, 6, 1) == want);
        CHECK(detail::warmup_forwards(SimSchedule::one_f_one_b, 4, 1, 6, 0) == 3);
        CHECK(detail::warmup_forwards(SimSchedule::one_f_one_b, 4, 1, 6, 3) == 0);
        CHECK(detail::warmup_forwards(SimSchedule::one_f_one_b, 8, 1, 4, 0) == 4);  // min(7, m)
    }

    TEST_CASE("schedule: GPipe runs all forwards then all backwards") {
        const std::vector<SimOp> want = {F(0), F(1), F(2), B(0), B(1), B(2)};
        CHECK(ops(SimSchedule::gpipe, 2, 1, 3, 0) == want);
        CHECK(ops(SimSchedule::gpipe, 2, 1, 3, 1) == want);
    }

    TEST_CASE("schedule: interleaved follows Megatron-LM's order") {
        // p = 2, v = 2, m = 4 (Megatron forward_backward_pipelining_with_interleaving):
        // rank 0 warm-up 2*(2-0-1) + (2-1)*2 = 4 forwards. Forward k runs chunk (k mod 4)/2 on
        // micro-batch (k/4)*2 + k mod 2: F0c0 F1c0 F0c1 F1c1 | F2c0 F3c0 F2c1 F3c1.
        // Backward k runs chunk 1 - (k mod 4)/2: B0c1 B1c1 B0c0 B1c0 | B2c1 B3c1 B2c0 B3c0.
        const std::vector<SimOp> rank0 = {F(0, 0),
                                          F(1, 0),
                                          F(0, 1),
                                          F(1, 1),
                                          F(2, 0),
                                          B(0, 1),
                                          F(3, 0),
                                          B(1, 1),
                                          F(2, 1),
                                          B(0, 0),
                                          F(3, 1),
                                          B(1, 0),
                                          B(2, 1),
                                          B(3, 1),
                                          B(2, 0),
                                          B(3, 0)};
        CHECK(ops(SimSchedule::interleaved, 2, 2, 4, 0) == rank0);
        // rank 1 warm-up 2*0 + 2 = 2 forwards.
        const std::vector<SimOp> rank1 = {F(0, 0),
                                          F(1, 0),
                                          F(0, 1),
                                          B(0, 1),
                                          F(1, 1),
                                          B(1, 1),
                                          F(2, 0),
                                          B(0, 0),
                                          F(3, 0),
                                          B(1, 0),
                                          F(2, 1),
                                          B(2, 1),
                                          F(3, 1),
                                          B(3, 1),
                                          B(2, 0),
                                          B(3, 0)};
        CHECK(ops(SimSchedule::interleaved, 2, 2, 4, 1) == rank1);
        // m == p: Megatron-Core today (schedules.py get_pp_rank_microbatches, d98e8a6) caps
        // the warm-up at v m: rank 0 min(2*3 + 4, 8) = 8 runs every forward first, rank 3
        // min(0 + 4, 8) = 4 does not (the old all-forwards case went in 4295be1a6c).
        CHECK(detail::warmup_forwards(SimSchedule::interleaved, 4, 2, 4, 0) == 8);
        CHECK(detail::warmup_forwards(SimSchedule::interleaved, 4, 2, 4, 3) == 4);
        CHECK(detail::warmup_forwards(SimSchedule::interleaved, 4, 3, 8, 0) == 14);
        // v = 1 is plain 1F1B.
        CHECK(ops(SimSchedule::interleaved, 4, 1, 6, 1) ==
              ops(SimSchedule::one_f_one_b, 4, 1, 6, 1));
    }

    TEST_CASE("schedule: ZB-H1 delays rank s's W passes by s micro-batches") {
        // p = 3, m = 4, rank 1: warm-up 1 forward; 1F1B order with B then W once more than one
        // W is pending; the last W closes the iteration.
        const std::vector<SimOp> want = {
            F(0), F(1), B(0), F(2), B(1), W(0), F(3), B(2), W(1), B(3), W(2), W(3)};
        CHECK(ops(SimSchedule::zb_h1, 3, 1, 4, 1) == want);
        // Last rank (delay 2): F0 B0 F1 B1 F2 B2 W0 F3 B3 W1 W2 W3.
        const auto last = ops(SimSchedule::zb_h1, 3, 1, 4, 2);
        CHECK(last.size() == 12);
        CHECK(last[0] == F(0));
        CHECK(last[1] == B(0));
        CHECK(last.back() == W(3));
        // Rank 0 runs W right after B.
        const auto first = ops(SimSchedule::zb_h1, 3, 1, 4, 0);
        CHECK(first[3] == B(0));
        CHECK(first[4] == W(0));
    }
}
