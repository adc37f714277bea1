#pragma once
// `cleave published public_memory.csv`: predicted against measured peak memory per row, in the
// row's own metric (allocated or reserved), per source and leave-one-source-out.

#include "cli/app.hpp"

#include <string>

namespace cleave::cli {

/// Prints the memory check of the CSV at `path` (its text in `csv`) as a table or JSON.
void print_published_memory(const std::string& path,
                            const std::string& csv,
                            const std::string& format,
                            CliContext& ctx);

}  // namespace cleave::cli
