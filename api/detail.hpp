#pragma once
// Shared inside api/ only: the measured-memory check's writers (published_memory.cpp), used by
// published.cpp.

#include "published/fidelity.hpp"

#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cleave::api::detail {

[[nodiscard]] nlohmann::json memory_json(const std::vector<CheckedMemory>& rows,
                                         const std::string& path);
void print_memory_table(std::ostream& os,
                        const std::vector<CheckedMemory>& rows,
                        const std::string& path);

}  // namespace cleave::api::detail
