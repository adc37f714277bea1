// For every row of a public-runs CSV (../shared/validation/public_runs.csv) whose hardware has a
// shipped profile: is the authors' plan feasible in cleave, where does it rank among all
// feasible plans (fastest iteration first), and is cleave's top plan predicted no slower?
//   build/<dir>/bench/planner_public_runs /work/shared/validation/public_runs.csv [hwprofiles]
// Rows are read by the fidelity check's parser (published/published.hpp), so model, job
// assumptions (e.g. 16-bit grads before 2022), plan and profile are the ones `cleave published`
// prices. Prints one '#'-commented table; exit 1 when a describable row fails the check.
#include "core/load.hpp"
#include "published/published.hpp"
#include "planner/search.hpp"

#include <array>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Outcome {
    bool ok = false;
    std::string line;
};

Outcome check_row(const cleave::PublishedCase& pc, const cleave::ClusterSpec& c) {
    const cleave::ModelSpec& m = pc.model;
    const cleave::JobSpec& j = pc.job;
    const cleave::Plan& authors = pc.plan;
    cleave::SearchOptions o;
    o.top_k = 1;
    const cleave::SearchResult res = cleave::search(m, c, j, o);
    const int64_t rank = cleave::rank_of(m, c, j, o, authors);
    const auto problems = cleave::check_plan(m, j, authors);
    const double t_auth =
        problems.empty() ? cleave::estimate(m, c, j, authors).iteration_time.value() : -1.0;
    const double t_top = res.plans.empty() ? -1.0 : res.plans[0].estimate.iteration_time.value();
    const bool ok = rank > 0 && t_top > 0 && t_top <= t_auth;
    std::array<char, 400> b{};
    std::snprintf(b.data(),
                  b.size(),
                  "%4lld  %-24s %5lld %-12s %-32s %6lld %8lld %9.2f %9.2f  %s",
                  static_cast<long long>(pc.row_id),
                  pc.model_name.substr(0, 24).c_str(),
                  static_cast<long long>(j.gpus),
                  pc.profile.c_str(),
                  cleave::to_string(authors).substr(0, 32).c_str(),
                  static_cast<long long>(rank),
                  static_cast<long long>(res.feasible),
                  t_auth,
                  t_top,
                  res.plans.empty() ? "-" : cleave::to_string(res.plans[0].plan).c_str());
    return {ok, b.data()};
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << "usage: planner_public_runs public_runs.csv [hwprofiles dir]\n";
        return 2;
    }
    const std::string profiles = argc > 2 ? argv[2] : CLEAVE_SOURCE_DIR "/hwprofiles";
    std::ifstream in(argv[1]);
    if (!in) {
        std::cerr << "cannot open " << argv[1] << "\n";
        return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    std::cout << "# row model                    gpus profile      authors' plan (dp tp pp cp ep "
                 "vpp mbs ...)  rank feasible  t_auth(s)  t_top(s)  top plan\n";
    int failed = 0;
    std::map<std::string, cleave::ClusterSpec> clusters;
    for (const cleave::PublishedCase& pc : cleave::parse_public_runs(text.str(), argv[1])) {
        if (!pc.expressible || pc.profile.empty()) {
            std::cout << "# " << pc.row_id << " skipped: " << pc.reason << "\n";
            continue;
        }
        auto it = clusters.find(pc.profile);
        if (it == clusters.end()) {
            it = clusters
                     .emplace(pc.profile,
                              cleave::load_cluster(profiles + "/" + pc.profile + ".toml"))
                     .first;
        }
        const Outcome o = check_row(pc, it->second);
        std::cout << o.line << (o.ok ? "" : "  <-- FAIL") << "\n";
        failed += o.ok ? 0 : 1;
    }
    std::cout << "# rank: position of the authors' plan among all feasible plans, fastest first "
                 "(0 = not feasible in cleave); rows as `cleave published` reads them\n";
    std::cout << "# rows failing (authors' plan infeasible, or top slower): " << failed << "\n";
    return failed == 0 ? 0 : 1;
}
