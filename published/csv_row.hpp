#pragma once
// One row of a published-runs CSV as named cells: the reader published.cpp and
// published_memory.cpp share. Internal to costmodel/ (not part of the library's interface).

#include "core/errors.hpp"
#include "core/model.hpp"

#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

namespace cleave::detail {

struct CsvRow {
    const std::map<std::string, std::string>& row;
    const std::string& file;
    int64_t line;
    /// Numbers may be followed by a space and a remark ("4 (default: 8 PP microbatches)"), as
    /// public_memory.csv writes them; off, the cell must be the number alone.
    bool remarks = false;

    const std::string& str(const std::string& key) const {
        static const std::string empty;
        const auto it = row.find(key);
        return it == row.end() ? empty : it->second;
    }

    [[noreturn]] void fail(const std::string& key, const std::string& what) const {
        throw ConfigError({Diagnostic{{file, line, 0}, "column '" + key + "': " + what}});
    }

    double num(const std::string& key, double fallback = 0.0) const {
        const std::string& s = str(key);
        if (s.empty()) {
            return fallback;
        }
        double v = 0.0;
        const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
        const bool rest_ok = r.ptr == s.data() + s.size() || (remarks && *r.ptr == ' ');
        if (r.ec != std::errc{} || !rest_ok) {
            fail(key, "'" + s + "' is not a number");
        }
        return v;
    }

    int64_t count(const std::string& key, int64_t fallback = 0) const {
        return static_cast<int64_t>(num(key, static_cast<double>(fallback)));
    }

    bool has(const std::string& key) const { return !str(key).empty(); }
};

struct CsvRow;

/// The model a row's architecture columns describe (num_layers ... vocab_size, num_experts /
/// moe_topk): GPT-style, or Llama-style for the Llama / Qwen / Mixtral / Mistral / GPT-OSS
/// families (published.cpp).
[[nodiscard]] ModelSpec columns_model(const CsvRow& r);

/// The rows of a CSV (header first) as named cells, after checking that the header has every
/// column of `need`; throws ConfigError naming `file` and the missing column.
inline std::vector<std::map<std::string, std::string>>
named_rows(const std::vector<std::vector<std::string>>& rows,
           std::initializer_list<const char*> need,
           const std::string& file) {
    if (rows.empty()) {
        throw ConfigError({Diagnostic{{file, 1, 1}, "empty file: expected a CSV header"}});
    }
    const auto& header = rows.front();
    for (const char* col : need) {
        bool found = false;
        for (const auto& h : header) {
            found = found || h == col;
        }
        if (!found) {
            throw ConfigError({Diagnostic{{file, 1, 1},
                                          std::string("header lacks the column '") + col + "'"}});
        }
    }
    std::vector<std::map<std::string, std::string>> out;
    for (size_t i = 1; i < rows.size(); ++i) {
        auto& row = out.emplace_back();
        for (size_t k = 0; k < header.size() && k < rows[i].size(); ++k) {
            row[header[k]] = rows[i][k];
        }
    }
    return out;
}

}  // namespace cleave::detail
