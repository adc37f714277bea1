#pragma once
// Helpers the exporters share (export/megatron.cpp, export/bridge.cpp); not an interface.

#include "core/model.hpp"
#include "core/plan.hpp"

#include <array>
#include <cstdio>
#include <string>
#include <vector>

namespace cleave::exporters {

using Args = std::vector<std::string>;

inline void arg(Args& os, const std::string& flag, const std::string& value = "") {
    os.push_back(value.empty() ? flag : flag + " " + value);
}

/// v printed with a printf spec ("%.3f").
inline std::string f(const char* spec, double v) {
    std::array<char, 64> b{};
    std::snprintf(b.data(), b.size(), spec, v);
    return b.data();
}

/// The layer map in Megatron-LM's own flags (export/megatron.cpp).
void megatron_layout_args(Args& os, const ModelSpec& m, const Plan& p);

}  // namespace cleave::exporters
