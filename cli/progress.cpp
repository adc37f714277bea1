#include "cli/progress.hpp"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <ostream>
#include <unistd.h>

namespace cleave::cli {

bool is_terminal(const std::ostream& err) {
    if (&err != &std::cerr && &err != &std::clog) {
        return false;
    }
    // mpirun hands each rank a pipe for stderr even when mpirun's own stderr is a terminal, so
    // CLEAVE_PROGRESS=1 (mpirun -x CLEAVE_PROGRESS=1) asks for progress; 0 silences it.
    if (const char* force = std::getenv("CLEAVE_PROGRESS"); force != nullptr && *force != '\0') {
        return std::string_view(force) != "0";
    }
    return isatty(STDERR_FILENO) != 0;
}

std::string progress_line(
    std::string_view what, int64_t done, int64_t total, double elapsed_s, std::string_view detail) {
    char buf[160];
    const double pct =
        total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 0.0;
    std::string eta = "ETA ?";
    if (done > 0 && total >= done) {
        char e[48];
        std::snprintf(e,
                      sizeof e,
                      "ETA %.1f s",
                      elapsed_s * static_cast<double>(total - done) / static_cast<double>(done));
        eta = e;
    }
    std::snprintf(buf,
                  sizeof buf,
                  "# %.*s: %lld/%lld (%.0f%%), %.1f s, %s",
                  static_cast<int>(what.size()),
                  what.data(),
                  static_cast<long long>(done),
                  static_cast<long long>(total),
                  pct,
                  elapsed_s,
                  eta.c_str());
    std::string s = buf;
    if (!detail.empty()) {
        s += "  ";
        s += detail;
    }
    return s;
}

Progress::Progress(std::ostream& err, bool enabled, std::string what, double delay_s)
    : err_(err)
    , enabled_(enabled)
    , what_(std::move(what))
    , delay_s_(delay_s)
    , start_(std::chrono::steady_clock::now())
    , last_(start_) {}

Progress::~Progress() {
    if (drawn_) {
        err_ << "\n" << std::flush;
    }
}

void Progress::update(int64_t done, int64_t total, std::string_view detail) {
    if (!enabled_) {
        return;
    }
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double since = std::chrono::duration<double>(now - last_).count();
    if (elapsed < delay_s_ || (drawn_ && since < 0.1 && done < total)) {
        return;
    }
    last_ = now;
    drawn_ = true;
    // \r back to column 0, the line, then erase what a longer previous line left (ANSI EL).
    err_ << "\r" << progress_line(what_, done, total, elapsed, detail) << "\x1b[K" << std::flush;
}

}  // namespace cleave::cli
