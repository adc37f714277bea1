#pragma once
// The executor's mixture-of-experts MLP (issue 16): router, top-k, token dispatch to the
// expert-parallel ranks by an all-to-all, the local experts' MLPs, combine by the reverse
// all-to-all, and the Switch load-balancing loss. The layer itself is Transformer::moe_fwd /
// moe_bwd (executor/moe.cpp); this header holds its sizes, handles and saved state.

#include "core/model.hpp"
#include "core/plan.hpp"
#include "executor/backend.hpp"
#include "executor/schedule.hpp"

#include <cstdint>
#include <vector>

namespace cleave::executor {

/// Sizes and coordinates of the MoE layers on one rank. The expert grid (etp innermost, then
/// ep, then expert-DP) folds over one pipeline stage's tp x dp ranks (Megatron-Core "parallel
/// folding", Liu et al. 2025, arXiv:2504.14960 section 3; core/plan.hpp expert_tp/expert_dp).
struct MoeDims {
    int64_t experts = 0;  // 0: dense model
    int64_t top_k = 0;
    int64_t ffn = 0;  // one expert's inner size (one branch for SwiGLU)
    int64_t ep = 1;
    int64_t ep_rank = 0;
    int64_t etp = 1;
    int64_t etp_rank = 0;
    int64_t edp = 1;
    int64_t edp_rank = 0;
    /// Switch load-balancing loss coefficient (alpha of Fedus et al. 2021, eq. 4).
    float aux_coeff = 0.0f;
    /// Weight of one micro-batch's loss in the objective: mbs / global batch (the loss is the
    /// mean over micro-batches, as the token loss is the mean over tokens).
    float microbatch_weight = 1.0f;

    [[nodiscard]] bool enabled() const { return experts > 0; }

    [[nodiscard]] int64_t local_experts() const { return experts / ep; }

    [[nodiscard]] int64_t ffn_local() const { return ffn / etp; }

    /// Ranks of one expert-model-parallel group (the all-to-all group): ep * etp.
    [[nodiscard]] int64_t group_size() const { return ep * etp; }
};

/// The MoE sizes of `model` on the rank at `at` under `plan` (cp = 1, as the executor runs).
[[nodiscard]] MoeDims make_moe_dims(const ModelSpec& model,
                                    const Plan& plan,
                                    const RankCoords& at,
                                    float aux_coeff,
                                    int64_t global_batch);

/// One local expert's matrices (this rank's ETP shard: w1 / w3 columns, w2 rows).
struct ExpertHandles {
    int64_t w1 = -1;  // GeLU: fc1; SwiGLU: gate
    int64_t w3 = -1;  // SwiGLU: up
    int64_t w2 = -1;  // fc2 / down
};

/// What the MoE forward keeps for its backward: routing on the host, the dispatch order and
/// the experts' activations (rows in expert-major order: local expert, source rank, token).
struct MoeCache {
    int64_t tokens = 0;                // this rank's tokens (rows of the layer input)
    std::vector<float> probs;          // tokens x experts, softmax over all experts
    std::vector<int32_t> chosen;       // tokens x top_k expert ids, best first
    std::vector<float> gates;          // tokens x top_k, the chosen probs renormalised
    std::vector<float> expert_load;    // experts: routed slots in the micro-batch (all TP ranks)
    std::vector<int64_t> send_rows;    // per destination: slot ids t * top_k + k, in send order
    std::vector<int64_t> send_counts;  // rows per destination rank
    std::vector<int64_t> recv_counts;  // rows per source rank
    std::vector<int64_t> expert_rows;  // rows per local expert (expert-major blocks)
    std::vector<int64_t> to_expert_major;  // expert-major row -> received row
    std::vector<int64_t> to_received;      // received row -> expert-major row
    std::vector<float> slot_out;           // tokens * top_k x hidden: each slot's expert output
    Buffer xr, a, up, act;                 // received rows and the experts' activations
};

}  // namespace cleave::executor
