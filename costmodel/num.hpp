#pragma once
// The int64 -> double conversion the cost model's formulas write as d(x), shared by its .cpp
// files (one definition, so they can be compiled as one unity translation unit).

#include <cstdint>

namespace cleave::detail {

[[nodiscard]] constexpr double d(int64_t x) {
    return static_cast<double>(x);
}

}  // namespace cleave::detail
