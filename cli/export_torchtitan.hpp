#pragma once
// `cleave plan --format torchtitan`: the best plan as torchtitan's job configuration.

#include "cli/common.hpp"
#include "planner/search.hpp"

#include <ostream>

namespace cleave::cli {

/// Writes `best` as TOML whose tables and keys are torchtitan's Trainer.Config field paths at
/// pytorch/torchtitan@b5bcd76c66d0acb1a08b176d9639425bc55e0b2a (torchtitan/config/configs.py:
/// TrainingConfig, ParallelismConfig); the same names are its `--section.option` flags. The layer
/// map is parallelism.module_fqns_per_model_part, one list per virtual stage in order
/// chunk * pp + stage (torchtitan's looped schedules place stage i on rank i % pp).
void print_torchtitan(std::ostream& os, const Inputs& in, const RankedPlan& best);

}  // namespace cleave::cli
