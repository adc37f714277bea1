#pragma once
// JSON for one priced plan: the interface of DESIGN §3 shared by explain, plan and validate.

#include "api/inputs.hpp"
#include "costmodel/estimate.hpp"

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cleave::api {

/// The plan's flags as JSON: tp, pp, dp, cp, ep, vpp, mbs, schedule, recompute, sp, zero,
/// microbatches, and "flags" (the command-line form).
[[nodiscard]] nlohmann::json plan_to_json(const Plan& p, const JobSpec& job);

/// explain's object: iteration_time_s, tokens_per_s, tflops_per_gpu, mfu, hfu, bubble_ratio,
/// memory_gib {weights, grads, optimizer, activations, logits, comm_buffers, reserved, total},
/// comm_bytes_per_gpu {dp, tp, pp, cp, ep}, time_s {...}, fits, usable_memory_gib,
/// peak_memory_stage, stages [...], risks [{kind, message, fix}], plan {...}.
/// The stack a price assumed: name, framework, attention, source file (stack.cpp).
[[nodiscard]] nlohmann::json stack_json(const SoftwareStack& s);

[[nodiscard]] nlohmann::json estimate_to_json(const Inputs& in, const Plan& p, const Estimate& e);

/// The fine-tuning job in one line, "lora dim 16, alpha 32 (scale 2), targets linear_qkv,
/// linear_proj: 44.56M trainable of 68.98B parameters (0.065 %), base frozen"; "" without
/// --peft. explain and plan print it in their header.
[[nodiscard]] std::string peft_summary(const ModelSpec& m, const JobSpec& job);

/// {method, dim, alpha, target_modules, trainable_params, frozen_params}: the "peft" key of
/// explain / plan JSON, present only under --peft lora.
[[nodiscard]] nlohmann::json peft_json(const ModelSpec& m, const JobSpec& job);

/// Packed sequences in one line, "packs of 4096 tokens, samples of mean 512 (std 0) tokens:
/// attention per sample, span E[L^2]/E[L] 512 = 0.125 of the unpacked core; one pack a
/// micro-batch"; "" unpacked. explain and plan print it after the peft line.
[[nodiscard]] std::string packed_summary(const JobSpec& job);

/// CUDA graphs in one line, "transformer_engine over attn,mlp: the launch gaps of their scope
/// not paid (2 us a launch on this GPU)"; "" without --cuda-graph-impl. explain and plan print it
/// after the packed line; JSON "cuda_graphs" {impl, scope}.
[[nodiscard]] std::string cuda_graph_summary(const GpuSpec& gpu, const JobSpec& job);

/// {packed_sequence_size, mean_len, len_std, attention_span, attention_scale}: the
/// "packed_seq" key of explain / plan JSON, present only under --packed-seq.
[[nodiscard]] nlohmann::json packed_json(const JobSpec& job);

/// Adds train_days, gpu_hours, energy_mwh, cost (null when power / price are unknown) and
/// "train" {...} to `j` when in.train.tokens > 0 (costmodel/train_cost.hpp); else nothing.
void add_train_json(nlohmann::json& j, const Inputs& in, const Estimate& e);

/// explain's table (fits 100 columns; non-data lines start with '#'): headline numbers, memory
/// per stage, time breakdown, per-stage micro-batch costs, traffic per group with algbw and busbw
/// (factors from costmodel/collectives.hpp), risks with their fixes.
void print_estimate_table(std::ostream& os, const Inputs& in, const Plan& p, const Estimate& e);

/// Where the prediction for these inputs is known to be weaker than cleave's published-run table
/// suggests (docs/costmodel.md section 7 lists them: attention sinks, Hopper, Mamba-2 on
/// Blackwell, quantised MoE without a fitted per-expert cost, DualPipe): one sentence each; explain prints them and adds JSON "cautions", plan prints them in its header.
/// `schedule`: the plan's pipeline schedule where one plan (or a fixed schedule) is priced, for
/// the cautions that belong to a schedule (DualPipe's overlap); none where it is not known.
[[nodiscard]] std::vector<std::string> cautions(const Inputs& in,
                                                std::optional<Schedule> schedule = std::nullopt);
/// cautions() as the tables print them, one line each in the same order: what is optimistic and
/// by how much, ending with the docs section that holds the rest ("(docs/costmodel.md section
/// 9)"); the full sentences stay in JSON "cautions".
[[nodiscard]] std::vector<std::string>
caution_lines(const Inputs& in, std::optional<Schedule> schedule = std::nullopt);

}  // namespace cleave::api
