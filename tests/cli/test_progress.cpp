// Progress lines (cli/progress.hpp): the ETA arithmetic, and silence when not on a terminal.
#include "cli/progress.hpp"

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include <doctest/doctest.h>

using namespace cleave::cli;

TEST_SUITE("report") {
    TEST_CASE("progress: the line and its ETA") {
        // 3 of 10 done in 2.1 s: 0.7 s each, 7 left -> ETA 4.9 s
        CHECK(progress_line("search", 3, 10, 2.1, "tp8") ==
              "# search: 3/10 (30%), 2.1 s, ETA 4.9 s  tp8");
        CHECK(progress_line("validate", 0, 4, 0.0, "") == "# validate: 0/4 (0%), 0.0 s, ETA ?");
        CHECK(progress_line("x", 4, 4, 8.0, "") == "# x: 4/4 (100%), 8.0 s, ETA 0.0 s");
    }

    TEST_CASE("progress: nothing when disabled or not a terminal, one line when enabled") {
        std::ostringstream quiet;
        CHECK_FALSE(is_terminal(quiet));
        {
            Progress p(quiet, false, "search");
            p.update(1, 2);
            p.update(2, 2);
        }
        CHECK(quiet.str().empty());
        std::ostringstream shown;
        {
            Progress p(shown, true, "search");
            p.update(2, 2);
        }
        const std::string s = shown.str();
        CHECK(s.rfind("\r# search: 2/2 (100%)", 0) == 0);
        CHECK(s.back() == '\n');
        std::ostringstream later;
        {
            Progress p(later, true, "search", 60.0);  // a search under a minute: nothing drawn
            p.update(2, 2);
        }
        CHECK(later.str().empty());
    }

    TEST_CASE("progress: CLEAVE_PROGRESS forces it on (mpirun ranks) or off") {
        const char* before = std::getenv("CLEAVE_PROGRESS");
        const std::string saved = before != nullptr ? before : "";
        setenv("CLEAVE_PROGRESS", "1", 1);
        CHECK(is_terminal(std::cerr));
        std::ostringstream other;
        CHECK_FALSE(is_terminal(other));  // only stderr itself
        setenv("CLEAVE_PROGRESS", "0", 1);
        CHECK_FALSE(is_terminal(std::cerr));
        if (before != nullptr) {
            setenv("CLEAVE_PROGRESS", saved.c_str(), 1);
        } else {
            unsetenv("CLEAVE_PROGRESS");
        }
    }
}
