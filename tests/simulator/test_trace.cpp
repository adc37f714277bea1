#include "core/errors.hpp"
#include "core/trace.hpp"
#include "simulator/trace.hpp"
#include "tests/simulator/sim_helpers.hpp"

#include <sstream>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace cleave;

TEST_SUITE("simulator") {
    TEST_CASE("trace: Chrome trace of a simulated iteration parses and counts its events") {
        // p = 2, m = 3, 1F1B, p2p 0.1, one DP bucket per rank. Compute events per rank: 3 F +
        // 3 B + optimizer = 7; sends: rank 0 sends 3 activations, rank 1 3 gradients; 1 DP
        // bucket each: 2 * 7 + 3 + 3 + 2 = 22 complete events. Metadata: per stage a process
        // name and 4 thread names, each with a sort index: 2 * 5 * 2 = 20.
        auto in = test::uniform_input(SimSchedule::one_f_one_b, 2, 3, 1, 1.0, 2.0, 0.1);
        for (auto& rk : in.ranks) {
            rk.dp_buckets = {{0, 1.0, seconds(0.5)}};
            rk.optimizer = seconds(0.2);
        }
        const auto r = simulate(in, {.record_timeline = true});
        CHECK(sim_trace_event_count(r) == 22);
        std::ostringstream os;
        write_sim_trace(os, in, r);
        const auto j = nlohmann::json::parse(os.str());
        REQUIRE(j.contains("traceEvents"));
        const auto& ev = j["traceEvents"];
        int complete = 0;
        int meta = 0;
        bool saw_first_backward = false;
        for (const auto& e : ev) {
            if (e["ph"] == "X") {
                ++complete;
                CHECK(e["dur"].get<double>() >= 0.0);
                if (e["name"] == "B mb0 c0" && e["pid"] == 1) {
                    // s1 F0 starts after F0 (1 s) + p2p (0.1 s), runs 1 s: B0 at 2.1 s.
                    CHECK(e["ts"].get<double>() == doctest::Approx(2.1e6));
                    CHECK(e["dur"].get<double>() == doctest::Approx(2e6));
                    CHECK(e["args"]["microbatch"] == 0);
                    saw_first_backward = true;
                }
            } else if (e["ph"] == "M") {
                ++meta;
            }
        }
        CHECK(complete == 22);
        CHECK(meta == 20);
        CHECK(saw_first_backward);
    }

    TEST_CASE("trace: writer escapes names and writes metadata") {
        Trace t;
        t.tracks.push_back({3, -1, "stage \"3\""});
        t.tracks.push_back({3, 1, "pp\tsend"});
        t.events.push_back({"x\\y", "cat", 3, 1, 1.5, 2.25, {{"k", std::string("v\n")}}});
        std::ostringstream os;
        write_chrome_trace(os, t);
        const auto j = nlohmann::json::parse(os.str());
        const auto& ev = j["traceEvents"];
        REQUIRE(ev.size() == 5);
        CHECK(ev[0]["name"] == "process_name");
        CHECK(ev[0]["args"]["name"] == "stage \"3\"");
        CHECK(ev[2]["name"] == "thread_name");
        CHECK(ev[2]["args"]["name"] == "pp\tsend");
        CHECK(ev[4]["name"] == "x\\y");
        CHECK(ev[4]["ts"].get<double>() == 1.5);
        CHECK(ev[4]["dur"].get<double>() == 2.25);
        CHECK(ev[4]["args"]["k"] == "v\n");
    }

    TEST_CASE("trace: a result without timeline is refused") {
        const auto in = test::uniform_input(SimSchedule::gpipe, 2, 2, 1, 1.0, 1.0);
        const auto r = simulate(in);
        std::ostringstream os;
        CHECK_THROWS_AS(write_sim_trace(os, in, r), ConfigError);
    }
}
