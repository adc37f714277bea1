#pragma once
// Hand-built simulator inputs shared by the simulator tests.

#include "simulator/simulate.hpp"

#include <cstdint>

namespace cleave::test {

/// p ranks of v chunks, each chunk fwd f and bwd b seconds, p2p `p2p`, no DP, no optimizer.
inline SimInput uniform_input(
    SimSchedule s, int64_t p, int64_t m, int64_t v, double f, double b, double p2p = 0.0) {
    SimInput in;
    in.schedule = s;
    in.microbatches = m;
    for (int64_t r = 0; r < p; ++r) {
        RankInput rk;
        for (int64_t c = 0; c < v; ++c) {
            ChunkCost cc;
            cc.fwd = seconds(f);
            cc.bwd = seconds(b);
            rk.chunks.push_back(cc);
        }
        rk.p2p_next = seconds(p2p);
        in.ranks.push_back(rk);
    }
    return in;
}

}  // namespace cleave::test
