#pragma once
// The order in which one pipeline rank runs its forward and backward ops: the schedule part
// of the simulator, separate from timing so tests can check it against Megatron-LM.

#include "simulator/simulate.hpp"

#include <cstdint>
#include <vector>

namespace cleave::detail {

enum class OpKind : uint8_t { forward, backward, backward_weight };

/// One compute op of one rank: micro-batch `mb` through virtual chunk `chunk`.
struct SimOp {
    int32_t mb = 0;
    int16_t chunk = 0;
    OpKind kind = OpKind::forward;

    bool operator==(const SimOp&) const = default;
};

/// Number of forward ops rank `rank` runs before its first backward (its warm-up), as the
/// schedule defines it: GPipe m; 1F1B min(p - rank - 1, m); interleaved (Megatron-LM
/// forward_backward_pipelining_with_interleaving) min(2 (p - rank - 1) + (v - 1) p, v m), or
/// v m when m == p. Precondition: 0 <= rank < p, v >= 1, m >= 1.
[[nodiscard]] int64_t warmup_forwards(SimSchedule s, int64_t p, int64_t v, int64_t m, int64_t rank);

/// Appends rank `rank`'s ops in execution order to `out` (v m forwards and v m backwards;
/// ZB-H1 adds v m weight-gradient ops). Interleaved requires m % p == 0 (Megatron-LM asserts it)
/// and is 1F1B when v == 1.
void append_rank_ops(
    SimSchedule s, int64_t p, int64_t v, int64_t m, int64_t rank, std::vector<SimOp>& out);

}  // namespace cleave::detail
