#pragma once
// Job, plan and search options by name: the keywords of the Python module (cleave.plan(...,
// gbs=128, recompute="selective")) are the CLI's flag names with '_' for '-', set here with the
// checks the CLI's flags carry. tests/cli/test_options.cpp checks that every job and plan flag of
// the CLI has an entry, so the two faces cannot drift apart.

#include "api/inputs.hpp"
#include "planner/search.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace cleave::api {

using OptionValue = std::variant<bool, int64_t, double, std::string>;

/// Which options an entry belongs to.
enum class OptionGroup { job, train, plan, search };

struct OptionInfo {
    std::string name;  // the flag's name without dashes, '-' between words ("first-stage-layers")
    OptionGroup group;
    std::string type;  // "bool", "int", "float", "str"
    std::vector<std::string> choices;  // allowed values of a "str" option (empty = any)
};

/// Every named option, in the CLI's order.
[[nodiscard]] const std::vector<OptionInfo>& option_table();

/// Everything a command takes by name: the job, the plan flags (those given are the fixed
/// dimensions of a search) and the search's own options.
struct NamedOptions {
    JobOptions job;
    PlanOptions plan;
    SearchOptions search;   // top_k, objective, limits, target, heuristics (not .fixed)
    bool simulate = false;  // plan(): re-rank the top plans with the simulator
    std::vector<std::string> given_plan;  // the plan options set, by name ("tp", "mbs")

    /// True when plan option `name` was set.
    [[nodiscard]] bool gave(std::string_view name) const;
};

/// Sets option `name` ('_' and '-' alike) to `v`. Throws ConfigError naming the option when it
/// is unknown, has the wrong type, or a value outside its range or choices.
void set_option(NamedOptions& o, std::string_view name, const OptionValue& v);

}  // namespace cleave::api
