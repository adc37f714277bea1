#pragma once
// A pipeline stage's memory as estimate() and the planner's memory check price it: the stage's
// parameters, its states as each stack keeps them, its activations, and DualPipe's ranks folded
// from two stages (stage_memory.cpp). Internal to costmodel/ (estimate.cpp and
// stage_memory.cpp); derivations in docs/costmodel.md sections 2 and 7.

#include "costmodel/estimate.hpp"
#include "costmodel/float8.hpp"
#include "costmodel/num.hpp"
#include "costmodel/pipeline.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

namespace cleave::estimate_detail {

using detail::d;

/// What pricing one plan's stages reads: its inputs, the per-layer parts and the Estimator's memo.
struct Context {
    const ModelSpec& m;
    const ClusterSpec& c;
    const JobSpec& job;
    const Plan& p;
    const PlanLinks& links;
    const LayerMemoryParts& mem;  // what the memory of a stage reads
    const LayerParts& parts;      // the costs: read only where a plan is priced in full
    int64_t micro = 0;
    const LayerParts* whole = nullptr;  // block recomputation: the layers kept whole
    /// The plan as launched when `p` is DualPipeV's stage view (stage_view: 2 pp stages); null
    /// when they are the same.
    const Plan* ranks = nullptr;
    StageParamsMemo* memo = nullptr;  // the Estimator's (stage_memories); null in estimate()
};

inline constexpr std::size_t kind_index(LayerKind k) {
    return static_cast<std::size_t>(k);
}

constexpr std::array<LayerKind, layer_kind_count> all_kinds = {
    LayerKind::mamba, LayerKind::attention, LayerKind::mlp, LayerKind::moe, LayerKind::gdn};

/// Megatron's full recomputation over a stage of `layers` layers (transformer_block.py
/// _checkpointed_forward at d98e8a6): block N checkpoints the first N layers of each of the v
/// chunks, so min(N, layers / v) / (layers / v) of them are recomputed and the rest keep all
/// activations; uniform N recomputes every layer, keeps one input per group of N and
/// rematerialises a whole group (N layers) in backward. N = 1 uniform, or not full: {1, 1, 1}.
/// Block 2 on 8 layers, v 1: recomputed 2/8 = 0.25.
struct RecomputeShape {
    double recomputed = 1.0;   // fraction of the stage's layers recomputed in backward
    double kept_inputs = 1.0;  // inputs kept per recomputed layer
    double live = 1.0;         // layers rematerialised at once in backward
};

inline RecomputeShape recompute_shape(const Plan& p, int64_t layers) {
    RecomputeShape rs;
    if (p.recompute != Recompute::full || layers <= 0) {
        return rs;
    }
    const double n = d(std::max<int64_t>(1, p.recompute_layers));
    const double chunk = d(layers) / d(std::max<int64_t>(1, p.vpp));
    if (p.recompute_method == RecomputeMethod::block) {
        rs.recomputed = std::min(n, chunk) / chunk;
    } else {
        rs.kept_inputs = 1.0 / std::min(n, chunk);
        rs.live = std::min(n, chunk);
    }
    return rs;
}

/// A hybrid model's stage: its layers counted by kind into sp.kinds, and their parameters
/// (without the experts, which stage_params adds). Out of line (stage_memory.cpp):
/// transformers never run it.
[[gnu::noinline]] double hybrid_stage_kinds(const Context& x, int64_t s, StageParams& sp);

// Hybrid: a hybrid model (is_hybrid(x.m)) with its layers by kind. Two instantiations, so the
// transformer one keeps a single call site and stays inlined in the planner's inner loop.
// Forced inline: the DualPipe fold calls these too, and the extra call sites made GCC stop
// inlining them into stage_memories, the planner's hot loop (bench_planner +10 %).
template <bool Hybrid>
[[gnu::always_inline]] inline StageParams stage_params(const Context& x, int64_t s) {
    const ModelSpec& m = x.m;
    const LayerMemoryParts& lp = x.mem;
    StageParams sp;
    const int64_t layers = layers_on_stage(m.layers, x.p, s);
    sp.layers = layers;
    sp.inflight = inflight_microbatches(x.p, x.micro, s);
    if (m.moe.enabled()) {
        const int64_t chunks = x.p.schedule == Schedule::interleaved ? x.p.vpp : 1;
        for (int64_t ch = 0; ch < chunks; ++ch) {
            const int64_t first = chunk_first_layer(m.layers, x.p, s, ch);
            sp.moe_layers += moe_layers_in(m, first, first + chunk_layers(m.layers, x.p, s, ch));
        }
    }
    const double expert_total = d(sp.moe_layers) * lp.params_experts;
    // Closed form of params_stage() (no loop over layers): shared attention + norms per layer,
    // dense MLPs, MoE routers + experts, embedding on the first stage, head (and the tied
    // embedding copy Megatron keeps) on the last. A hybrid model: each kind's count x its
    // parameters (an E layer's experts apart; hybrid_stage_kinds).
    double all = Hybrid ? hybrid_stage_kinds(x, s, sp) + expert_total
                        : d(layers) * lp.params_shared +
                              d(layers - sp.moe_layers) * lp.params_dense_mlp +
                              d(sp.moe_layers) * lp.params_router + expert_total;
    if (s == 0) {
        all += lp.params_embedding;
    }
    double experts = expert_total;
    if (s == x.p.pp - 1) {
        all += lp.params_head + (x.p.pp > 1 ? lp.params_tied_copy : 0.0);
        // MTP modules (their experts sharded like the main layers'; embedding and head shared).
        all += lp.params_mtp;
        experts += lp.mtp_moe ? d(lp.mtp_modules) * lp.params_experts : 0.0;
    }
    sp.dense = (all - experts) / d(x.p.tp);
    // Expert weights sharded over the expert grid's etp x ep (parallel folding).
    sp.expert = experts / (d(expert_tp(x.p)) * d(x.p.ep));
    sp.adapters = d(layers) * lp.params_lora / d(x.p.tp);  // every adapter split by t (peft.hpp)
    return sp;
}

/// torchtitan's FSDP2 (fully_shard per transformer block and the root): ZeRO 3 under the
/// torchtitan stack.
inline bool fsdp2(const JobSpec& job, const Plan& p) {
    return p.zero >= 3 && job.stack.framework == StackFramework::torchtitan;
}

/// torchao Float8's converted Linear parameters on a stage, per GPU after TP: its dense
/// transformer layers' attention and MLP weights (costmodel/float8.hpp); 0 for a hybrid model
/// or without torchao Float8.
inline double float8_stage_linear(const Context& x, const StageParams& sp) {
    if (!float8_run(x.job).active || is_hybrid(x.m)) {
        return 0.0;
    }
    return float8_linear_params(x.m, x.p, d(sp.layers - sp.moe_layers));
}

/// Layers of a stage of `layers` whose activations go to the host: Megatron's
/// --cpu-offloading-num-layers, at most all but one (TE's get_cpu_offload_context asserts
/// num_layers < model layers).
inline int64_t offloaded_layers(const Plan& p, int64_t layers) {
    return std::clamp<int64_t>(p.offload_layers, 0, std::max<int64_t>(0, layers - 1));
}

/// The three stages estimate() tells apart (first, a middle one, last; the same index when
/// pp < 3), their parameters and memory: all a memory check needs.
struct StageMemories {
    int64_t idx[3] = {0, 0, 0};
    StageParams sp[3];
    MemoryBreakdown mem[3];
    int peak = 0;  // k of the largest total, the first on a tie
};

/// Fills `sm`, a default StageMemories, with the stages estimate() tells apart. Stops early
/// (returning false) once one stage alone needs more than `stop_above`; the stages after it are
/// then left unpriced. Under DualPipe the stages are folded into ranks (a stage alone is a lower
/// bound of its rank, so stopping early stays right).
bool stage_memories(const Context& x, StageMemories& sm, Bytes stop_above);

/// stage_memories() with every stage priced.
StageMemories stage_memories(const Context& x);

/// Stage s's memory with its parameters `sp` (stage_params), a hybrid model's.
MemoryBreakdown hybrid_stage_memory(const Context& x, int64_t s, const StageParams& sp);

}  // namespace cleave::estimate_detail
