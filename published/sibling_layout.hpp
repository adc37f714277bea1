#pragma once
// A published row whose source left its parallel layout blank, stated from the same submitter's
// rows of that round and benchmark (published.cpp parse_public_runs).

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cleave::detail {

using CsvCells = std::map<std::string, std::string>;

/// The row's cells with tp / pp / cp / dp and the cells its sibling rows share filled in, or
/// nullopt when the row has a layout or no sibling gives exactly one; `said` gets the assumption.
[[nodiscard]] std::optional<CsvCells>
sibling_layout(const std::vector<CsvCells>& rows, std::size_t i, std::string& said);

}  // namespace cleave::detail
