#pragma once
// Shared machinery of the loaders (STYLE S4.1-S4.2): a sink that collects every diagnostic of
// one file and throws them together, sorted by position, and a reader for one TOML table that
// checks types, remembers which keys it was asked for and reports every other key as unknown.

#include "core/errors.hpp"
#include "core/model.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <toml++/toml.h>

namespace cleave::detail {

/// Collects diagnostics of one file; throw_if_any() throws them all as one ConfigError.
class DiagnosticSink {
public:
    explicit DiagnosticSink(std::string file)
        : file_(std::move(file)) {}

    /// Records `message` at the start of `where` (line/column 0 when toml++ has no position).
    void error(const toml::source_region& where, std::string message);

    /// Records `message` at a 1-based line and column (0 = unknown).
    void error_at(int64_t line, int64_t column, std::string message);

    [[nodiscard]] bool empty() const { return list_.empty(); }

    [[nodiscard]] const std::string& file() const { return file_; }

    /// Sorts the diagnostics by line and column (stable) and throws ConfigError if any exist.
    void throw_if_any();

private:
    std::string file_;
    std::vector<Diagnostic> list_;
};

enum class Need { required, optional };

/// Largest count and quantity the loaders accept: far beyond any real model or machine, and
/// small enough that products of a few of them stay finite and inside int64_t.
inline constexpr int64_t max_count = 1'000'000'000'000;
inline constexpr double max_quantity = 1e15;

/// Most parameters a model may have (double estimate), so exact int64 counts cannot overflow.
inline constexpr double max_params = 1e15;

/// One accepted spelling of an enumerated string value.
template <class E>
struct Choice {
    std::string_view name;
    E value;
};

/// Reads the keys of one TOML table. Every accessor reports a missing required key (at the
/// table's header), a wrong type or a bad value to the sink and returns nullopt; finish()
/// reports each key that no accessor asked for as unknown (typos must not pass silently).
class TableReader {
public:
    /// `path` is the table's dotted name used in messages ("model", "model.moe", "" for root).
    TableReader(const toml::table& table, std::string path, DiagnosticSink& sink);

    /// A TOML integer (never a float) that is > 0, or >= 0 with `allow_zero`.
    std::optional<int64_t> count(std::string_view key, Need need, bool allow_zero = false);

    /// A number (integer or float) that is > 0, or >= 0 with `allow_zero`.
    std::optional<double> quantity(std::string_view key, Need need, bool allow_zero = false);

    /// A number in (0, 1]: an efficiency or a fraction.
    std::optional<double> fraction(std::string_view key, Need need);

    std::optional<std::string> text(std::string_view key, Need need);

    std::optional<bool> flag(std::string_view key, Need need);

    /// A sub-table (a [header] table or an inline table).
    const toml::table* table(std::string_view key, Need need);

    /// An array of numbers, each > 0 (or in (0, 1] with `fractions`).
    std::optional<std::vector<double>> numbers(std::string_view key, Need need, bool fractions);

    /// A string that must be one of `options`.
    template <class E>
    std::optional<E>
    choice(std::string_view key, Need need, const std::vector<Choice<E>>& options) {
        const auto s = text(key, need);
        if (!s) {
            return std::nullopt;
        }
        std::string names;
        for (const auto& o : options) {
            if (o.name == *s) {
                return o.value;
            }
            names += (names.empty() ? "\"" : ", \"") + std::string(o.name) + "\"";
        }
        bad_value(key, "must be one of " + names + ", got \"" + *s + "\"");
        return std::nullopt;
    }

    /// True when the table holds `key` (whatever its type).
    [[nodiscard]] bool has(std::string_view key) const { return table_.get(key) != nullptr; }

    /// Marks `key` as known without reading it (it is read elsewhere).
    void accept(std::string_view key) { known_.emplace_back(key); }

    /// Reports a bad value at the key's value (or at the table header when the key is absent).
    void bad_value(std::string_view key, const std::string& message);

    /// Position of the key's value, or of the table's header when the key is absent.
    [[nodiscard]] toml::source_region where(std::string_view key) const;

    /// Dotted key name used in messages: 'model.layers'.
    [[nodiscard]] std::string quoted(std::string_view key) const;

    /// True when `key` was asked for and produced a diagnostic (missing, wrong type or value).
    [[nodiscard]] bool failed(std::string_view key) const;

    /// Reports every key of the table that no accessor asked for.
    void finish();

private:
    const toml::node* get(std::string_view key, Need need);
    void wrong_type(std::string_view key, const toml::node& n, const char* expected);

    const toml::table& table_;
    std::string path_;
    DiagnosticSink& sink_;
    std::vector<std::string> known_;
    std::vector<std::string> failed_;
};

/// Parses TOML text; a syntax error is thrown at once as ConfigError (file:line:col).
[[nodiscard]] toml::table parse_toml(std::string_view text, const std::string& source_name);

/// Reads a whole file; throws ConfigError naming the file when it cannot be read.
[[nodiscard]] std::string read_text_file(const std::filesystem::path& file);

/// One problem with a model's values and the ModelSpec field it is about ("heads",
/// "moe.top_k"), so that each loader can point at that key.
struct ModelProblem {
    std::string field;
    std::string message;
};

/// Every problem with the values of `m` (sizes > 0, heads | hidden, kv_heads | heads, MoE).
[[nodiscard]] std::vector<ModelProblem> model_problems(const ModelSpec& m);

/// Folders searched for shipped data files (hardware profiles, stacks): $env_var when it is set
/// and not empty, then the source tree's folder, then the installed one.
[[nodiscard]] std::vector<std::filesystem::path>
data_dirs(const char* env_var, const char* source_dir, const char* install_dir);

/// True for an existing regular file whose name ends in ".toml".
[[nodiscard]] bool is_toml_file(const std::filesystem::path& p);

/// The stems of the *.toml files in `dirs` (missing folders skipped), sorted, each name once.
[[nodiscard]] std::vector<std::string> toml_stems(const std::vector<std::filesystem::path>& dirs);

/// The file `name_or_path` names: itself when it exists, ends in ".toml" or has a folder part
/// (a path the user gave), else `<dir>/<name>.toml` in the first of `dirs` that holds one;
/// nullopt when neither.
[[nodiscard]] std::optional<std::filesystem::path>
find_toml(const std::string& name_or_path, const std::vector<std::filesystem::path>& dirs);

/// "a, b, c", or `none` when `names` is empty.
[[nodiscard]] std::string comma_list(const std::vector<std::string>& names, const char* none);

}  // namespace cleave::detail
