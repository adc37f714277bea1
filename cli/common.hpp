#pragma once
// Flags shared by several subcommands (DESIGN §3): the job and plan flags, registered on a
// subcommand and filled into api/inputs.hpp's options.

#include "api/inputs.hpp"

#include <CLI/CLI.hpp>

namespace cleave::cli {

using JobFlags = api::JobOptions;
using PlanFlags = api::PlanOptions;
using TrainFlags = api::TrainOptions;
using api::Inputs;
using api::fixed;
using api::load_inputs;
using api::make_plan;
using api::parse_dtype;
using api::parse_headroom;
using api::parse_token_count;
using api::utc_now;

/// Adds MODEL and CLUSTER positionals and --gpus --gbs --seq --dtype --grad-dtype --job
/// --fp8-recipe --fp8-param-gather.
/// With `require_gpus` the --gpus flag is required (explain, plan, simulate); run and validate
/// take the rank count from MPI instead. Without `require_cluster` CLUSTER may be left out
/// (validate --calibrate measures it).
void add_job_flags(CLI::App& sub,
                   JobFlags& f,
                   bool require_gpus = true,
                   bool require_cluster = true,
                   bool require_model = true);

/// Adds --trace-scope (explain --trace, calibrate --from-trace): what a profiler trace covers.
void add_trace_scope_flag(CLI::App& sub, std::string& scope);

/// Adds --tokens --price-per-gpu-hour --pue --failures-per-gpu-hour --checkpoint-interval-h
/// --restart-h (explain, plan, compare, report).
void add_train_flags(CLI::App& sub, TrainFlags& f);

/// Adds --tp --pp --dp --cp --ep --mbs --vpp --schedule --recompute --sp --zero
/// --first-stage-layers --last-stage-layers --pipeline-layout --recompute-num-layers
/// --recompute-method.
void add_plan_flags(CLI::App& sub, PlanFlags& f);

}  // namespace cleave::cli
