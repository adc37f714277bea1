#pragma once
// Deterministic weights and data: every value is a pure function of (seed, tensor id, element
// index), so any rank can produce exactly its own slice of a tensor and every plan starts from the
// same model and sees the same tokens.

#include <cstdint>
#include <string_view>

namespace cleave::executor {

/// A stable 64-bit id for a tensor name (FNV-1a), independent of the plan.
[[nodiscard]] uint64_t tensor_id(std::string_view name);

/// Uniform in [-1, 1) from (seed, id, index) (splitmix64 finaliser, Steele et al. 2014).
[[nodiscard]] float uniform_pm1(uint64_t seed, uint64_t id, uint64_t index);

/// Token of sequence `sequence` (0 .. global batch - 1) at position `pos` (0 .. seq) in
/// iteration `iteration`; uniform over [0, vocab).
[[nodiscard]] int32_t
token_at(uint64_t seed, int64_t iteration, int64_t sequence, int64_t pos, int64_t vocab);

}  // namespace cleave::executor
