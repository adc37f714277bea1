// The TOML reading machinery shared by the model, cluster and job loaders (core/load_detail.hpp).
#include "core/load_detail.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace cleave::detail {

namespace {

const char* type_name(const toml::node& n) {
    switch (n.type()) {
    case toml::node_type::table:
        return "a table";
    case toml::node_type::array:
        return "an array";
    case toml::node_type::string:
        return "a string";
    case toml::node_type::integer:
        return "an integer";
    case toml::node_type::floating_point:
        return "a float";
    case toml::node_type::boolean:
        return "a boolean";
    case toml::node_type::date:
    case toml::node_type::time:
    case toml::node_type::date_time:
        return "a date/time";
    case toml::node_type::none:
        break;
    }
    return "nothing";
}

// Levenshtein distance, for "did you mean" hints on unknown keys.
size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) {
        row[j] = j;
    }
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diag = up;
        }
    }
    return row[b.size()];
}

std::string format_number(double x) {
    std::ostringstream out;
    out << x;
    return out.str();
}

}  // namespace

void DiagnosticSink::error(const toml::source_region& where, std::string message) {
    error_at(where.begin.line, where.begin.column, std::move(message));
}

void DiagnosticSink::error_at(int64_t line, int64_t column, std::string message) {
    list_.push_back({{file_, line, column}, std::move(message)});
}

void DiagnosticSink::throw_if_any() {
    if (list_.empty()) {
        return;
    }
    std::stable_sort(list_.begin(), list_.end(), [](const Diagnostic& a, const Diagnostic& b) {
        return std::pair(a.where.line, a.where.column) < std::pair(b.where.line, b.where.column);
    });
    throw ConfigError(std::move(list_));
}

TableReader::TableReader(const toml::table& table, std::string path, DiagnosticSink& sink)
    : table_(table)
    , path_(std::move(path))
    , sink_(sink) {}

std::string TableReader::quoted(std::string_view key) const {
    return "'" + (path_.empty() ? std::string(key) : path_ + "." + std::string(key)) + "'";
}

toml::source_region TableReader::where(std::string_view key) const {
    const toml::node* n = table_.get(key);
    return n != nullptr ? n->source() : table_.source();
}

bool TableReader::failed(std::string_view key) const {
    return std::find(failed_.begin(), failed_.end(), key) != failed_.end();
}

void TableReader::bad_value(std::string_view key, const std::string& message) {
    failed_.emplace_back(key);
    sink_.error(where(key), quoted(key) + " " + message);
}

const toml::node* TableReader::get(std::string_view key, Need need) {
    known_.emplace_back(key);
    const toml::node* n = table_.get(key);
    if (n == nullptr && need == Need::required) {
        failed_.emplace_back(key);
        const std::string in = path_.empty() ? "at the top level" : "in [" + path_ + "]";
        // The root table has no header: point at the top of the file.
        const auto& header = table_.source().begin;
        sink_.error_at(header ? header.line : 1,
                       header ? header.column : 1,
                       "missing required key " + quoted(key) + " " + in);
    }
    return n;
}

void TableReader::wrong_type(std::string_view key, const toml::node& n, const char* expected) {
    bad_value(key, std::string("must be ") + expected + ", got " + type_name(n));
}

std::optional<int64_t> TableReader::count(std::string_view key, Need need, bool allow_zero) {
    const toml::node* n = get(key, need);
    if (n == nullptr) {
        return std::nullopt;
    }
    const auto* v = n->as_integer();
    if (v == nullptr) {
        wrong_type(key, *n, "an integer");
        return std::nullopt;
    }
    const int64_t x = v->get();
    if (x > max_count) {
        bad_value(key, "is too large: " + std::to_string(x) + " > " + std::to_string(max_count));
        return std::nullopt;
    }
    if (x < 0 || (x == 0 && !allow_zero)) {
        bad_value(key,
                  std::string("must be ") + (allow_zero ? "zero or positive" : "positive") +
                      ", got " + std::to_string(x));
        return std::nullopt;
    }
    return x;
}

std::optional<double> TableReader::quantity(std::string_view key, Need need, bool allow_zero) {
    const toml::node* n = get(key, need);
    if (n == nullptr) {
        return std::nullopt;
    }
    const auto x = n->is_number() ? n->value<double>() : std::nullopt;
    if (!x) {
        wrong_type(key, *n, "a number");
        return std::nullopt;
    }
    // NaN fails both comparisons below, so it is rejected too.
    const bool ok = allow_zero ? (*x >= 0.0) : (*x > 0.0);
    if (!ok || *x > max_quantity) {
        bad_value(key,
                  std::string("must be ") + (allow_zero ? "zero or positive" : "positive") +
                      " and finite, got " + format_number(*x));
        return std::nullopt;
    }
    return x;
}

std::optional<double> TableReader::fraction(std::string_view key, Need need) {
    const toml::node* n = table_.get(key);
    if (n != nullptr && n->is_number()) {
        const double x = n->value<double>().value_or(0.0);
        if (!(x > 0.0 && x <= 1.0)) {
            known_.emplace_back(key);
            bad_value(key, "must be in (0, 1], got " + format_number(x));
            return std::nullopt;
        }
    }
    return quantity(key, need);
}

std::optional<std::string> TableReader::text(std::string_view key, Need need) {
    const toml::node* n = get(key, need);
    if (n == nullptr) {
        return std::nullopt;
    }
    const auto* v = n->as_string();
    if (v == nullptr) {
        wrong_type(key, *n, "a string");
        return std::nullopt;
    }
    return v->get();
}

std::optional<bool> TableReader::flag(std::string_view key, Need need) {
    const toml::node* n = get(key, need);
    if (n == nullptr) {
        return std::nullopt;
    }
    const auto* v = n->as_boolean();
    if (v == nullptr) {
        wrong_type(key, *n, "a boolean (true or false)");
        return std::nullopt;
    }
    return v->get();
}

const toml::table* TableReader::table(std::string_view key, Need need) {
    const toml::node* n = get(key, need);
    if (n == nullptr) {
        return nullptr;
    }
    const auto* t = n->as_table();
    if (t == nullptr) {
        wrong_type(key, *n, "a table");
    }
    return t;
}

std::optional<std::vector<double>>
TableReader::numbers(std::string_view key, Need need, bool fractions) {
    const toml::node* n = get(key, need);
    if (n == nullptr) {
        return std::nullopt;
    }
    const auto* a = n->as_array();
    if (a == nullptr) {
        wrong_type(key, *n, "an array of numbers");
        return std::nullopt;
    }
    std::vector<double> out;
    bool ok = true;
    for (const toml::node& e : *a) {
        const auto x = e.is_number() ? e.value<double>() : std::nullopt;
        const bool in_range = x && *x > 0.0 && *x <= (fractions ? 1.0 : max_quantity);
        if (!in_range) {
            failed_.emplace_back(key);
            sink_.error(e.source(),
                        quoted(key) + " elements must be " +
                            (fractions ? "numbers in (0, 1]" : "positive numbers") + ", got " +
                            (x ? format_number(*x) : std::string(type_name(e))));
            ok = false;
            continue;
        }
        out.push_back(*x);
    }
    if (!ok) {
        return std::nullopt;
    }
    return out;
}

void TableReader::finish() {
    for (auto&& [k, v] : table_) {
        if (std::find(known_.begin(), known_.end(), k.str()) != known_.end()) {
            continue;
        }
        std::string hint;
        for (const auto& candidate : known_) {
            if (edit_distance(k.str(), candidate) <= 2) {
                hint = " (did you mean '" + candidate + "'?)";
                break;
            }
        }
        sink_.error(k.source(), "unknown key " + quoted(k.str()) + hint);
    }
}

toml::table parse_toml(std::string_view text, const std::string& source_name) {
    try {
        return toml::parse(text, source_name);
    } catch (const toml::parse_error& e) {
        DiagnosticSink sink(source_name);
        sink.error(e.source(), "TOML syntax: " + std::string(e.description()));
        sink.throw_if_any();
    }
    return {};
}

std::string read_text_file(const std::filesystem::path& file) {
    std::error_code ec;
    if (std::filesystem::is_directory(file, ec)) {
        throw ConfigError(file.string() + ": is a directory, not a file");
    }
    std::ifstream in(file, std::ios::binary);
    if (!in) {
        throw ConfigError(file.string() + ": cannot open file");
    }
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

std::vector<std::filesystem::path>
data_dirs(const char* env_var, const char* source_dir, const char* install_dir) {
    std::vector<std::filesystem::path> dirs;
    if (const char* env = std::getenv(env_var); env != nullptr && *env != '\0') {
        dirs.emplace_back(env);
    }
    dirs.emplace_back(source_dir);
    dirs.emplace_back(install_dir);
    return dirs;
}

bool is_toml_file(const std::filesystem::path& p) {
    std::error_code ec;
    return p.extension() == ".toml" && std::filesystem::is_regular_file(p, ec);
}

std::vector<std::string> toml_stems(const std::vector<std::filesystem::path>& dirs) {
    namespace fs = std::filesystem;
    std::vector<std::string> names;
    for (const auto& dir : dirs) {
        std::error_code ec;
        for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
            if (is_toml_file(it->path())) {
                names.push_back(it->path().stem().string());
            }
        }
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
}

std::optional<std::filesystem::path> find_toml(const std::string& name_or_path,
                                               const std::vector<std::filesystem::path>& dirs) {
    namespace fs = std::filesystem;
    const fs::path p(name_or_path);
    std::error_code ec;
    if (fs::exists(p, ec) || p.extension() == ".toml" || p.has_parent_path()) {
        return p;
    }
    for (const auto& dir : dirs) {
        fs::path candidate = dir / (name_or_path + ".toml");
        if (is_toml_file(candidate)) {
            return candidate;
        }
    }
    return std::nullopt;
}

std::string comma_list(const std::vector<std::string>& names, const char* none) {
    std::string out;
    for (const auto& n : names) {
        out += (out.empty() ? "" : ", ") + n;
    }
    return out.empty() ? std::string(none) : out;
}

}  // namespace cleave::detail
