#pragma once
// cleave's API: the header to read first. A model, a cluster, a software stack and a job are
// values (api/inputs.hpp builds them from the options a user gives, core/ holds their types);
// each command is a function that returns a typed result; to_json() turns a result into the JSON
// of DESIGN §3 and print_table() into the table the CLI prints. The CLI (cli/) parses flags into
// the options, calls one of these and prints; the Python module (python/) binds the same calls.
//
//   Inputs in = load_inputs({.model = "examples/seed-13b.toml", .cluster = "dgx-a100-80g",
//                            .gpus = 32, .gbs = 128});
//   Planned r = plan(in, SearchOptions{});           // r.result.plans[0].plan.tp, .estimate
//   std::cout << to_json(r).dump(2);
//
// Every function throws ConfigError (core/errors.hpp) on bad input, naming the file, line,
// column and key where there is one.

#include "api/inputs.hpp"
#include "api/render.hpp"
#include "core/load.hpp"
#include "costmodel/estimate.hpp"
#include "planner/search.hpp"
#include "published/fidelity.hpp"
#include "published/published_memory.hpp"
#include "report/report.hpp"
#include "simulator/simulate.hpp"

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace cleave::api {

// --- models and clusters: what cleave read ---------------------------------------------------

/// cleave model's JSON: shape, attention, parameter counts in total, active, per part and layer,
/// and per stage of `pp` even stages (0 = none; a `pp` that does not divide the layers is a
/// ConfigError).
[[nodiscard]] nlohmann::json model_to_json(const ModelSpec& m, int64_t pp = 0);
void print_model_table(std::ostream& os, const ModelSpec& m, int64_t pp = 0);
/// cleave hw show's JSON: the profile in display units with each value's source.
[[nodiscard]] nlohmann::json cluster_to_json(const ClusterSpec& c);
void print_cluster_table(std::ostream& os, const ClusterSpec& c);
/// The shipped hardware profiles (cleave hw list).
[[nodiscard]] nlohmann::json cluster_list_json();
void print_cluster_list(std::ostream& os);

// --- explain: one plan priced in full ---------------------------------------------------------

struct Explained {
    Inputs inputs;
    Plan plan;
    Estimate estimate;
};

/// Prices `plan` for `in` (costmodel/estimate.hpp).
[[nodiscard]] Explained explain(const Inputs& in, const Plan& plan);
/// explain's JSON (estimate_to_json plus "optimizer").
[[nodiscard]] nlohmann::json to_json(const Explained& x);
void print_table(std::ostream& os, const Explained& x);

// --- plan: every split searched and ranked ------------------------------------------------------

/// The plan options a user gave, as fixed search dimensions. `given(name)` says whether the
/// option of that flag name (without dashes: "tp", "first-stage-layers") was given; the options
/// not given are searched. Throws ConfigError on a contradiction (--recompute-modules with
/// --recompute full, --pipeline-layout without --pp).
[[nodiscard]] SearchOptions::Fixed fixed_dimensions(
    const PlanOptions& options,
    const std::function<bool(std::string_view)>& given,
    const Inputs& in);

/// "time", "memory", "gpus" or "cost"; throws ConfigError on anything else.
[[nodiscard]] Objective parse_objective(const std::string& s);

/// A top plan re-scored by the discrete-event simulator.
struct SimScore {
    int64_t analytic_rank = 0;  // 1-based place in the cost model's list
    double iteration_time_s = 0.0;
    double bubble_ratio = 0.0;
};

struct Planned {
    Inputs inputs;
    SearchOptions options;
    SearchResult result;
    std::vector<SimScore> simulated;  // empty unless plan(..., simulate = true); one per plan
    double elapsed_s = 0.0;
    /// Why no plan is feasible, one cause a line (planner/why_empty.hpp); empty when one is.
    std::string why_empty;
};

/// Called with (done, total) job sizes while the search runs.
using ProgressFn = std::function<void(int64_t, int64_t)>;

/// Searches every plan for `in` under `options` (planner/search.hpp); with `simulate` the top
/// plans are re-scored event by event and re-ranked by simulated iteration time.
[[nodiscard]] Planned plan(const Inputs& in,
                           const SearchOptions& options,
                           bool simulate = false,
                           const ProgressFn& progress = {});

/// The job with the GPU count of plan `p` (objective gpus and cost search smaller jobs).
[[nodiscard]] Inputs inputs_for(const Inputs& in, const Plan& p);

/// plan's JSON: the search, its rejections, and each plan as explain's object with its rank.
[[nodiscard]] nlohmann::json to_json(const Planned& r);
void print_table(std::ostream& os, const Planned& r);
void print_csv(std::ostream& os, const Planned& r);
/// The rejections by reason, with the best plan rejected for each ("# why not: ...").
void print_why_not(std::ostream& os, const Planned& r);

/// The launch settings of the best plan: format megatron, bridge, deepspeed or torchtitan
/// (export/). Throws ConfigError when the stack's framework cannot take them.
void write_export(std::ostream& out, std::ostream& err, const Planned& r, std::string_view format);
/// The same for one priced plan (explain's): `in` is its job.
void write_export(std::ostream& out,
                  std::ostream& err,
                  const Inputs& in,
                  const RankedPlan& plan,
                  std::string_view format);
/// Before a search: throws ConfigError when `format`'s framework is not the job's stack's.
void require_export_framework(const Inputs& in, std::string_view format);

// --- compare: the best plan for one job on several profiles ---------------------------------

struct ProfileBest {
    Inputs in;
    SearchResult result;  // the best plan only (top 1)
};

struct Compared {
    std::string dtype;  // the precision asked for (a GPU without it runs the next wider one)
    std::vector<ProfileBest> profiles;
    [[nodiscard]] bool any_feasible() const;
};

/// Searches `job` (its cluster ignored) on each of `clusters` (shipped names or TOML paths),
/// pricing a precision a GPU lacks at the next wider one it has, and says so. `model`, when
/// given, is priced instead of the file job.model names.
[[nodiscard]] Compared compare(const JobOptions& job,
                               const std::vector<std::string>& clusters,
                               const ModelSpec* model = nullptr);
[[nodiscard]] nlohmann::json to_json(const Compared& c);
void print_table(std::ostream& os, const Compared& c);

// --- simulate: one iteration event by event ---------------------------------------------------

struct SimulateOptions {
    std::string schedule;         // "" = the plan's; gpipe, 1f1b, interleaved, zb-h1
    bool dp_overlap = true;       // DP gradient reduction overlapped with the backward
    bool optimizer_sync = true;   // every stage waits for the others before its step
    std::string trace;            // a Chrome trace JSON (Perfetto) written here; "" = none
};

struct Simulated {
    Inputs inputs;
    Plan plan;
    Estimate estimate;  // the closed form it is compared with
    SimInput input;
    SimResult result;
    std::string trace;  // the trace file written, "" = none
};

/// Plays one iteration of `plan` (simulator/simulate.hpp). Throws ConfigError when the plan's
/// GPU count is not the job's, or the trace file cannot be written.
[[nodiscard]] Simulated simulate(const Inputs& in, const Plan& plan, const SimulateOptions& o = {});
[[nodiscard]] nlohmann::json to_json(const Simulated& s);
void print_table(std::ostream& os, const Simulated& s);

// --- report: one self-contained HTML page ------------------------------------------------------

struct Reported {
    report::Page page;
    bool any_feasible = false;
};

/// Searches `job` on each of `clusters` (every feasible plan, up to 2000 drawn) and lays out the
/// page: plans plotted, memory per stage, time per step, the simulated timeline, why not the
/// others, the cost to train. `progress(cluster)` gives each search its callback.
[[nodiscard]] Reported report(const JobOptions& job,
                              const std::vector<std::string>& clusters,
                              Objective objective = Objective::time,
                              int64_t top = 5,
                              const std::function<ProgressFn(const std::string&)>& progress = {},
                              const ModelSpec* model = nullptr);
/// Writes the page (report/html.hpp); throws ConfigError when the file cannot be written.
void write_html(const std::string& path, const Reported& r);

// --- stacks: what a software stack runs and overlaps -----------------------------------------

/// Every value of a stack under the stack TOML's key names (stack_json in api/render.hpp is the
/// short form a priced plan carries).
[[nodiscard]] nlohmann::json stack_to_json(const SoftwareStack& s);
void print_stack_table(std::ostream& os, const SoftwareStack& s);
/// The shipped stacks: name, framework, year, attention, default, display_name, source.
[[nodiscard]] nlohmann::json stack_list_json();
void print_stack_list(std::ostream& os);

// --- published: the cost model against published runs and measured memory -------------------

struct Published {
    std::string csv;            // the CSVs read, comma-separated
    bool memory = false;        // a measured-peak-memory CSV (memory_rows) rather than runs
    std::vector<Evaluated> rows;  // run CSVs: every row priced
    std::map<std::string, Refit> loso;     // leave-one-source-out refits
    std::map<std::string, HeldOut> held;   // each source held out of every fit it is in
    std::vector<CheckedMemory> memory_rows;
};

/// Prices every row of the CSVs (empty: tests/data/public_runs.csv next to the profiles). A
/// measured-memory CSV is checked on its own.
[[nodiscard]] Published published(const std::vector<std::string>& csvs);
[[nodiscard]] nlohmann::json to_json(const Published& p);
void print_table(std::ostream& os, const Published& p);

}  // namespace cleave::api
