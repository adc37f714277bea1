#pragma once
// Why a search left no feasible plan (issue 49): which of the user's fixed flags, by which plan
// rule (core/plan_rules.cpp), rule every candidate out; or, where candidates were priced, the
// memory or target they missed by.

#include "planner/search.hpp"

#include <string>

namespace cleave {

/// One line per cause, '\n' between lines; empty when `result` (search()'s answer for exactly
/// these inputs) has a feasible plan. A fixed value the search never builds (a tp that does not
/// divide the GPUs) leaves no rejection to count, so when nothing was priced the search is run
/// again without pricing, first with each fixed flag alone, then with each pair, and the
/// smallest sets that leave no candidate are named with the rules their values break:
/// "--tp 3: tp=3 does not divide gpus=64 (rule gpus); tp=3 does not divide heads=32 (rule
/// tp_heads)". Pure and deterministic like search(); throws what search() throws.
[[nodiscard]] std::string why_empty(const ModelSpec& model,
                                    const ClusterSpec& cluster,
                                    const JobSpec& job,
                                    const SearchOptions& options,
                                    const SearchResult& result);

}  // namespace cleave
