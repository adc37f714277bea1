// api/options.cpp's table against the CLI's flags: every job, plan and search flag of
// `cleave plan`, `explain` and `simulate` can be given by name (Python keywords), with the same
// choices, so the two faces cannot drift apart.
#include "api/options.hpp"
#include "cli/app.hpp"
#include "core/errors.hpp"

#include <algorithm>
#include <doctest/doctest.h>
#include <set>
#include <sstream>
#include <string>

namespace {

using namespace cleave;

const api::OptionInfo* find(const std::string& name) {
    for (const api::OptionInfo& o : api::option_table()) {
        if (o.name == name) {
            return &o;
        }
    }
    return nullptr;
}

}  // namespace

TEST_SUITE("api options") {
    TEST_CASE("every job, plan and search flag of plan, explain and simulate has an entry") {
        std::ostringstream out;
        std::ostringstream err;
        cli::CliContext ctx{out, err};
        const auto app = cli::make_app(ctx);
        // Flags of one command's own output or of the simulator, not options of a job or plan.
        const std::set<std::string> own = {"help", "format", "trace", "trace-scope", "sim-schedule",
                                           "no-dp-overlap", "no-optimizer-sync"};
        int64_t checked = 0;
        for (const char* cmd : {"plan", "explain", "simulate"}) {
            const CLI::App* sub = app->get_subcommand(cmd);
            for (const CLI::Option* opt : sub->get_options()) {
                for (const std::string& name : opt->get_lnames()) {
                    if (own.count(name) != 0) {
                        continue;
                    }
                    CAPTURE(cmd);
                    CAPTURE(name);
                    const api::OptionInfo* info = find(name);
                    REQUIRE(info != nullptr);
                    ++checked;
                }
            }
        }
        // plan alone has 61 such flags today; each appears once per command it is on.
        CHECK(checked > 120);
    }

    TEST_CASE("set_option checks types, ranges and choices as the flags do") {
        api::NamedOptions o;
        api::set_option(o, "gbs", int64_t{128});
        api::set_option(o, "first_stage_layers", int64_t{7});
        api::set_option(o, "recompute", std::string("selective"));
        api::set_option(o, "sp", true);
        api::set_option(o, "moe_imbalance", int64_t{2});  // an int where a float is taken
        CHECK(o.job.gbs == 128);
        CHECK(o.plan.first_stage_layers == 7);
        CHECK(o.plan.recompute == "selective");
        CHECK(o.plan.sp);
        CHECK(o.job.moe_imbalance == 2.0);
        CHECK(o.gave("first-stage-layers"));
        CHECK(o.gave("sp"));
        CHECK_FALSE(o.gave("tp"));
        CHECK_THROWS_AS(api::set_option(o, "recompute", std::string("some")), ConfigError);
        CHECK_THROWS_AS(api::set_option(o, "tp", int64_t{0}), ConfigError);       // >= 1
        CHECK_THROWS_AS(api::set_option(o, "zero", int64_t{4}), ConfigError);     // 0..3
        CHECK_THROWS_AS(api::set_option(o, "gbs", std::string("128")), ConfigError);
        CHECK_THROWS_AS(api::set_option(o, "tp", true), ConfigError);
        CHECK_THROWS_AS(api::set_option(o, "no_such", int64_t{1}), ConfigError);
        CHECK_THROWS_AS(api::set_option(o, "release", std::string("2026")), ConfigError);
        api::set_option(o, "objective", std::string("memory"));
        CHECK(o.search.objective == Objective::memory);
        CHECK_THROWS_AS(api::set_option(o, "objective", std::string("fastest")), ConfigError);
    }
}
