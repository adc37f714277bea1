#pragma once
// Layer maps the planner tries for one (pp, vpp): a few balanced splits, not every composition.

#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"

#include <cstdint>
#include <vector>

namespace cleave {

/// Work of the embedding and of the output layer + loss in units of one transformer layer's
/// forward FLOPs per token. Embedding: a table lookup, 0. Output: 2 h V against the layer's
/// 2 G + 4 s a d (Korthikanti et al. 2022, App. A; G = GEMM weights per token, MoE layers
/// averaged in). GPT-3 175B at s 2048: 2*12288*51200 / (2*12*12288^2 + 4*2048*12288) = 0.333.
/// With job.mtp each MTP module adds 1 + 4 h^2 / layer + the output's share to the output side.
/// A hybrid model's layers differ by kind, so each layer carries its own work (`layer`, the
/// same unit: the mean layer is 1): attention 2 G_attn + 4 s a d, MLP 2 G_mlp, MoE 2 G_moe
/// (active), Mamba-2 2 G_mamba + the SSD scan (flops.hpp mamba_scan_flops_per_token), gated
/// DeltaNet 2 G_gdn + the chunked delta rule (gdn_scan_flops_per_token); the output
/// is then 2 h V over that mean. A transformer mixing dense and MoE layers (DeepSeek-V3's first
/// three dense) weighs each layer 2 G_l + 4 s a d over the mean layer. Empty otherwise: every
/// layer weighs 1.
struct SplitWeights {
    double embedding = 0.0;
    double output = 0.0;
    std::vector<double> layer;  // per layer, hybrid models only
};

[[nodiscard]] SplitWeights split_weights(const ModelSpec& m, const JobSpec& job);

/// One layer map: Plan::first_layers / last_layers (0 = the middle share).
struct Split {
    int64_t first = 0;
    int64_t last = 0;

    bool operator==(const Split&) const = default;
};

/// The splits of m.layers over `pp` stages of `vpp` chunks worth pricing, in this order and
/// without repeats: the even split (when it exists); the split that minimises the slowest
/// stage's work (its layers' work — by kind for a hybrid model, chunk by chunk —, + embedding on
/// the first, + output on the last), first stage lighter on a tie; Megatron's account-for-embedding-and-loss split ((L + 2) / pp per stage, one layer less
/// on the first and last). Only splits the plan rules accept and whose slowest stage is within
/// one layer of the ideal (L + embedding + output) / pp. Empty when none is.
/// With `even_chunks` (the planner's search space) a stage's layers must also split evenly over
/// its vpp chunks, the first / last stage's one short (what Megatron's flags express:
/// transformer_config.py, uneven PP; account_for_embedding/loss); without, any map a
/// --pipeline-model-parallel-layout runs.
[[nodiscard]] std::vector<Split> balanced_splits(const ModelSpec& m,
                                                 const JobSpec& job,
                                                 int64_t pp,
                                                 int64_t vpp,
                                                 const SplitWeights& w,
                                                 bool even_chunks = true);

}  // namespace cleave
