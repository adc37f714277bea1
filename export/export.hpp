#pragma once
// Launch settings for a plan cleave priced (issue 27: one file each): Megatron-LM arguments
// (export/megatron.cpp), Megatron-Bridge ConfigContainer overrides (export/bridge.cpp), a DeepSpeed
// config (export/deepspeed.cpp), a torchtitan job TOML (export/torchtitan.cpp). Each carries what
// the price assumed of the stack; `cleave plan --format` prints them.

#include "core/job.hpp"
#include "core/model.hpp"
#include "core/stack.hpp"
#include "planner/search.hpp"

#include <ostream>

namespace cleave {

/// An export is written for the stack's own framework; for another it would drop what the price
/// assumed, so it throws ConfigError (exit 2) naming the --stack that would fit.
void require_framework(const JobSpec& job, StackFramework want, const char* format);

/// Megatron-LM arguments (megatron/training/arguments.py), one per line.
void write_megatron(std::ostream& os, const ModelSpec& model, const JobSpec& job, const RankedPlan& best);

/// Megatron-Bridge ConfigContainer overrides (scripts/training/run_recipe.py KEY=VALUE).
void write_bridge(std::ostream& os, const ModelSpec& model, const JobSpec& job, const RankedPlan& best);

/// A DeepSpeed config (JSON) on `os`; what DeepSpeed takes elsewhere (pipeline stages, model
/// parallelism) as a note on `notes`.
void write_deepspeed(std::ostream& os, std::ostream& notes, const JobSpec& job, const RankedPlan& best);

/// torchtitan's job configuration: TOML whose tables and keys are torchtitan's Trainer.Config
/// field paths at pytorch/torchtitan@b5bcd76c66d0acb1a08b176d9639425bc55e0b2a
/// (torchtitan/config/configs.py: TrainingConfig, ParallelismConfig); the same names are its
/// `--section.option` flags. The layer map is parallelism.module_fqns_per_model_part, one list per
/// virtual stage in order chunk * pp + stage (torchtitan's looped schedules place stage i on rank
/// i % pp).
void write_torchtitan(std::ostream& os, const ModelSpec& model, const JobSpec& job, const RankedPlan& best);

}  // namespace cleave
