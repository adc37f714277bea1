#pragma once
// The fidelity check against published training runs (shared/validation/public_runs.csv): turn
// each CSV row into cleave's inputs, price it, and compare with the published number. Parsing
// only: the caller reads the file and loads the hardware profiles.

#include "core/cluster.hpp"
#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cleave {

enum class PublishedMetric {
    iteration_time,  // seconds per step (reported, or *_derived where only TFLOP/s is given)
    layer_time       // one transformer layer's forward and backward (Korthikanti Table 4)
};

/// One row of public_runs.csv as cleave understands it.
struct PublishedCase {
    int64_t row_id = 0;
    std::string source_key;
    std::string model_name;
    std::string confidence;
    std::string profile;  // shipped hardware profile for the row's hardware ("" = none)
    std::string stack;    // shipped software stack for the row's framework and year ("" = none)
    bool expressible = false;
    std::string reason;        // why not expressible, or the assumptions made for this row
    bool in_mape = true;       // false: predicted and shown, but outside what the model claims
    std::string excluded_why;  // why it is outside (in_mape == false)
    PublishedMetric metric = PublishedMetric::iteration_time;
    bool derived = false;          // published value is the CSV's iteration_time_s_derived
    double published_s = 0.0;      // iteration time, or layer forward time
    double published_bwd_s = 0.0;  // layer backward time (layer_time rows)
    bool moe_a2a_overlap = false;  // the row's recipe overlaps the EP all-to-all (row notes);
                                   // set on the stack when it is loaded
    bool moe_flex_dispatcher = false;  // the preset runs the flex dispatcher (DeepEP / HybridEP)
    bool expandable_segments = false;  // the recipe's launcher sets expandable_segments:True
    bool fp32_grads = false;  // the recipe reduces gradients in fp32 whatever the stack's default
    /// Stack settings the row's recipe fixes whatever the stack's default (unset: the stack's),
    /// applied by load_case_stack.
    struct RecipeStack {
        std::optional<bool> tp_comm_overlap;      // TE userbuffers TP overlap
        std::optional<bool> moe_grouped_gemm;     // false: the local experts looped
        std::optional<bool> hidden_dropout;       // dropout masks stored and applied
        std::optional<bool> overlap_param_gather; // false: updated weights gathered first
    } recipe;
    std::string release;  // the software release of the framework column ("26.02"), or 
    ModelSpec model;
    JobSpec job;
    Plan plan;
};

/// Parses the CSV text (RFC 4180 quoting). Throws ConfigError naming `source_name`, the line and
/// the column when the header lacks a needed column or a number does not parse.
[[nodiscard]] std::vector<PublishedCase> parse_public_runs(std::string_view csv,
                                                           const std::string& source_name);

/// Loads the row's shipped stack (PublishedCase::stack) into its job, with the row's own
/// settings on top: moe_a2a_overlap from its notes, and 16-bit grads where the row fixed them
/// (else the stack's grad dtype). Throws ConfigError when the stack is not shipped.
void load_case_stack(PublishedCase& c);

/// Prediction and error of one expressible case against `cluster`.
struct PublishedResult {
    double predicted_s = 0.0;
    double predicted_bwd_s = 0.0;  // layer_time rows
    double error_pct = 0.0;        // (predicted - published) / published * 100; layer rows: of
                                   // forward + backward together
    double error_fwd_pct = 0.0;    // layer rows only
    double error_bwd_pct = 0.0;    // layer rows only
    double tflops_per_gpu = 0.0;
    double mfu = 0.0;
    bool fits = true;           // the published layout fits at no headroom (iteration rows)
    int64_t peak_stage = 0;     // its peak-memory stage
    double missing_gib = 0.0;   // total - usable when it does not fit
    double spare_gib = 0.0;     // usable - total (negative when it does not fit)
    double usable_gib = 0.0;    // the GPU's memory (the profile's capacity)
    // Iteration rows: the slowest stage's kernel time over all micro-batches, by kind
    // (StageCost gemm / attention / memory_bound / recompute), and the rest of the step.
    double gemm_s = 0.0;
    double attention_s = 0.0;
    double memory_s = 0.0;
    double recompute_s = 0.0;
    double straggler_s = 0.0;  // of the four above: the slowest GPU's share
    double comm_s = 0.0;       // exposed TP + CP + EP + PP + DP comm
    double bubble_s = 0.0;
    double optimizer_s = 0.0;
};

/// The shipped stack of a `framework` column ("Megatron-LM (2021)", "Megatron-Bridge /
/// Megatron-Core, NeMo 25.11 container", "... + DeepSpeed", "torchtitan", "llm-foundry"), or ""
/// when no stack fits. Megatron-LM up to 2022 ran materialised attention (megatron-2021).
[[nodiscard]] std::string stack_for_framework(const std::string& framework);

/// FLOPs of one iteration under a source's convention (validation/README.md), for rows that
/// give only TFLOP/s or MFU: SC21 eq. (3) 96 B s l h^2 (1 + s/6h + V/16lh) (hardware FLOPs,
/// with the recompute forward); Korthikanti App. A 72 B s l h^2 (1 + s/6h + V/12hl); Megatron
/// flop_utils (Megatron-Bridge) 3 x [2 B s (l (2h^2 + 2 h kv d + 3 h f) + h V) + 2 B s^2 h l]
/// (GQA, SwiGLU, causal attention at half). 0 when `definition` names none of them.
[[nodiscard]] double
convention_flops(const std::string& definition, const ModelSpec& m, const JobSpec& job);

/// The shipped Hugging Face config file (examples/hf) of a published row's model, by the name the
/// CSV gives it (DeepSeek-V3, Qwen3-235B-A22B, Qwen3-30B-A3B, Qwen3-Next-80B, GPT-OSS 120B / 20B,
/// Nemotron 3 Nano / Super, Kimi K2); nullptr when
/// the row's columns describe the model.
[[nodiscard]] const char* shipped_model_config(const std::string& name);

/// Where `file` lies: $CLEAVE_MODELS, the source tree's examples/hf, or share/cleave/models;
/// empty when in none.
[[nodiscard]] std::filesystem::path shipped_model_config_path(const char* file);

/// Megatron-Bridge's model FLOPs per iteration (src/megatron/bridge/training/utils/flop_utils.py
/// num_floating_point_operations @7af9601c9d, the convention of public_runs_2025.csv's TFLOP/s):
/// 3 B s [2 sum_l (G_l + s a (d_qk + d_v) / 2) + 2 h V (mtp + 1) + 2 mtp (3h + 2h^2)], G_l the
/// layer's GEMM weights (MLA with its latent-norm columns, top_k routed + shared experts, no
/// router; SwiGLU x 3/2 only for F.silu GLUs), MTP layers when the job trains them, every layer
/// causal over s keys (windows not counted), the vocabulary unpadded.
[[nodiscard]] double bridge_flops(const ModelSpec& m, const JobSpec& job);

[[nodiscard]] PublishedResult evaluate_published(const PublishedCase& c,
                                                 const ClusterSpec& cluster);

/// The CSV text as rows of fields (RFC 4180 quoting; blank lines skipped), header first.
[[nodiscard]] std::vector<std::vector<std::string>> csv_rows(std::string_view csv);

/// The shipped hardware profile of a `gpu_type` cell ("" when none); `reason` gets an assumption
/// made for a loosely named GPU, or why none fits.
[[nodiscard]] std::string profile_for_gpu(const std::string& gpu_type,
                                          int64_t memory_gb,
                                          int64_t gpus_per_node,
                                          std::string& reason);

/// Mean and worst absolute percentage error over a set of errors.
struct ErrorSummary {
    int64_t count = 0;
    double mape_pct = 0.0;
    double worst_pct = 0.0;
    int64_t worst_row = 0;
    double mean_signed_pct = 0.0;  // mean of the signed errors: > 0 too slow, < 0 too fast
};

/// Summary of (row_id, error %) pairs; empty input gives count 0.
[[nodiscard]] ErrorSummary summarize_errors(const std::vector<std::pair<int64_t, double>>& errors);

}  // namespace cleave
