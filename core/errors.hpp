#pragma once
// Error types (STYLE S4): ConfigError carries every diagnostic of one input, rendered
// compiler-style; BackendError is a runtime failure of a device or communication library.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace cleave {

struct SourceLocation {
    std::string file;
    int64_t line = 0;    // 1-based; 0 = unknown
    int64_t column = 0;  // 1-based; 0 = unknown

    bool operator==(const SourceLocation&) const = default;
};

struct Diagnostic {
    SourceLocation where;
    std::string message;

    bool operator==(const Diagnostic&) const = default;
};

/// "file:line:col: error: message" (line/col omitted when unknown).
[[nodiscard]] std::string render(const Diagnostic& d);

/// Bad input: a file, a flag value, or a combination that cannot be expressed. Exit code 2.
class ConfigError : public std::runtime_error {
public:
    explicit ConfigError(std::vector<Diagnostic> diagnostics);
    /// One diagnostic without a file position (CLI values, plan constraints).
    explicit ConfigError(const std::string& message);

    [[nodiscard]] const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

private:
    std::vector<Diagnostic> diagnostics_;
};

/// A device, MPI, NCCL or CUDA failure at run time. Exit code 1.
class BackendError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

}  // namespace cleave

/// Programming-error check that stays on in release builds (STYLE S4.4).
#define CLEAVE_ASSERT(cond, msg)                                                                   \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            std::fprintf(                                                                          \
                stderr, "%s:%d: assertion failed: %s: %s\n", __FILE__, __LINE__, #cond, msg);      \
            std::abort();                                                                          \
        }                                                                                          \
    } while (0)
