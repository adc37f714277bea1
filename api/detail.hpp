#pragma once
// Shared inside api/ only: the measured-memory check's writers (published_memory.cpp, used by
// published.cpp) and the tables' number format.

#include "published/fidelity.hpp"

#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cleave::api::detail {

/// v formatted with one printf conversion ("%.3f"): the tables' number cells.
[[nodiscard]] std::string format_number(const char* spec, double v);

/// format_number under the short name the table writers use.
[[nodiscard]] inline std::string f(const char* spec, double v) {
    return format_number(spec, v);
}

[[nodiscard]] nlohmann::json memory_json(const std::vector<CheckedMemory>& rows,
                                         const std::string& path);
void print_memory_table(std::ostream& os,
                        const std::vector<CheckedMemory>& rows,
                        const std::string& path);

}  // namespace cleave::api::detail
