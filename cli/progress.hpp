#pragma once
// Progress with an ETA on stderr for long work (calibrate, validate, searches over a second):
// drawn on one line that rewrites itself, only when stderr is a terminal; nothing otherwise, so
// logs and pipes stay clean.

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

namespace cleave::cli {

/// True when `err` is std::cerr (or std::clog) and file descriptor 2 is a terminal, or
/// CLEAVE_PROGRESS is set and not "0" (mpirun gives ranks a pipe: mpirun -x CLEAVE_PROGRESS=1).
[[nodiscard]] bool is_terminal(const std::ostream& err);

/// "# search: 3/10 (30%), 2.1 s, ETA 4.9 s  tp8" — the ETA assumes the remaining steps take as
/// long as the done ones on average: elapsed * (total - done) / done; "ETA ?" before the first.
[[nodiscard]] std::string progress_line(
    std::string_view what, int64_t done, int64_t total, double elapsed_s, std::string_view detail);

class Progress {
public:
    /// Draws on `err` when `enabled` and at least `delay_s` seconds have passed since the start
    /// (searches: 1 s, so quick ones print nothing).
    Progress(std::ostream& err, bool enabled, std::string what, double delay_s = 0.0);
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;
    ~Progress();

    /// Redraws at most ten times a second, and always at done == total.
    void update(int64_t done, int64_t total, std::string_view detail = {});

private:
    std::ostream& err_;
    bool enabled_;
    std::string what_;
    double delay_s_;
    bool drawn_ = false;
    std::chrono::steady_clock::time_point start_;
    std::chrono::steady_clock::time_point last_;
};

}  // namespace cleave::cli
