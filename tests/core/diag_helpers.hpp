#pragma once
// Helpers for tests that assert the diagnostics of a ConfigError.

#include "core/errors.hpp"

#include <functional>
#include <string>
#include <vector>

#include <doctest/doctest.h>

namespace cleave::test {

/// Runs `f`, which must throw ConfigError, and returns its diagnostics (empty if none thrown).
inline std::vector<Diagnostic> diagnostics_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const ConfigError& e) {
        return e.diagnostics();
    }
    FAIL_CHECK("expected a ConfigError");
    return {};
}

struct Expect {
    int64_t line;
    int64_t column;
    std::string message;
};

/// Checks that `f` throws exactly the diagnostics `expected`, in order.
inline void expect_diagnostics(const std::function<void()>& f,
                               const std::vector<Expect>& expected) {
    const auto ds = diagnostics_of(f);
    REQUIRE(ds.size() == expected.size());
    for (size_t i = 0; i < ds.size(); ++i) {
        CAPTURE(i);
        CHECK(ds[i].where.line == expected[i].line);
        CHECK(ds[i].where.column == expected[i].column);
        CHECK(ds[i].message == expected[i].message);
    }
}

}  // namespace cleave::test
