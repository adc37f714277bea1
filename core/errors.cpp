#include "core/errors.hpp"

#include <sstream>

namespace cleave {

std::string render(const Diagnostic& d) {
    std::ostringstream out;
    if (!d.where.file.empty()) {
        out << d.where.file;
        if (d.where.line > 0) {
            out << ':' << d.where.line;
            if (d.where.column > 0) {
                out << ':' << d.where.column;
            }
        }
        out << ": ";
    }
    out << "error: " << d.message;
    return out.str();
}

namespace {

std::string join(const std::vector<Diagnostic>& ds) {
    std::string out;
    for (const auto& d : ds) {
        if (!out.empty()) {
            out += "\n";
        }
        out += render(d);
    }
    return out;
}

}  // namespace

ConfigError::ConfigError(std::vector<Diagnostic> diagnostics)
    : std::runtime_error(join(diagnostics))
    , diagnostics_(std::move(diagnostics)) {}

namespace {

std::vector<Diagnostic> single(const std::string& message) {
    std::vector<Diagnostic> ds(1);
    ds[0].message = message;
    return ds;
}

}  // namespace

ConfigError::ConfigError(const std::string& message)
    : ConfigError(single(message)) {}

}  // namespace cleave
