#pragma once
// One way to split a job: the parallel sizes and the knobs around them.

#include "core/job.hpp"
#include "core/model.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <optional>
#include <vector>

namespace cleave {

/// dualpipe: DeepSeek-V3's bidirectional schedule (deepseek-ai/DualPipe, DeepSeek-V3 technical
/// report arXiv:2412.19437 Sec. 3.2.1): micro-batches enter from both ends, rank r holds stage r
/// and stage pp-1-r (two copies of the parameters), a forward and a backward of two micro-batches
/// run overlapped so each one's communication hides under the other's compute. Priced in closed
/// form (costmodel/pipeline.hpp); no framework cleave exports to runs it.
/// dualpipev: DualPipe cut in half (Sea AI Lab's "cut-in-half", deepseek-ai/DualPipe
/// dualpipev.py): 2 pp stages on pp ranks in a V, rank r holding stage r and stage 2pp-1-r,
/// one copy of the parameters; torch.distributed.pipelining's ScheduleDualPipeV, which
/// torchtitan runs.
enum class Schedule { one_f_one_b, gpipe, interleaved, dualpipe, dualpipev };

/// The schedules whose ranks hold two stages that micro-batches cross in both directions.
[[nodiscard]] constexpr bool bidirectional(Schedule s) {
    return s == Schedule::dualpipe || s == Schedule::dualpipev;
}
enum class Recompute { none, selective, full };
/// How full recomputation picks its layers (Megatron --recompute-method): uniform checkpoints
/// groups of recompute_layers layers (every layer recomputed, one input kept per group); block
/// checkpoints the first recompute_layers layers of each chunk and keeps the rest whole.
enum class RecomputeMethod { uniform, block };

/// Megatron-Core --recompute-modules (granularity selective; transformer_config.py
/// recompute_modules @d98e8a64), one bit each in Plan::recompute_modules. core_attn, mlp, moe
/// and shared_experts checkpoint the module (keep its input, re-run it); layernorm, moe_act and
/// mla_up_proj discard only the module's output and recompute it.
namespace recompute_module {
inline constexpr uint16_t core_attn = 1;
inline constexpr uint16_t mlp = 2;
inline constexpr uint16_t layernorm = 4;
inline constexpr uint16_t moe = 8;
inline constexpr uint16_t moe_act = 16;
inline constexpr uint16_t mla_up_proj = 32;
inline constexpr uint16_t shared_experts = 64;
}  // namespace recompute_module

/// Parses Megatron's comma- or space-separated module names ("core_attn,mla_up_proj"); throws
/// ConfigError naming an unknown one. An empty list gives 0.
[[nodiscard]] uint16_t parse_recompute_modules(const std::string& list);

/// The module names of a mask in Megatron's order, space-separated ("" for 0).
[[nodiscard]] std::string recompute_modules_string(uint16_t mask);

struct Plan {
    int64_t dp = 1;
    int64_t tp = 1;
    int64_t pp = 1;
    int64_t cp = 1;  // context parallel (ring attention)
    int64_t ep = 1;  // expert parallel; carved out of dp * cp (Megatron), divides experts
    /// Expert tensor parallel (Megatron-Core --expert-tensor-parallel-size); 0 = not set: the
    /// dense layers' tp, Megatron-Core's default (arguments.py). The expert grid etp x ep x edp
    /// folds over the dense tp x cp x dp ranks ("parallel folding", Liu et al. 2025, MoE
    /// Parallel Folding, arXiv:2504.14960 section 3).
    int64_t etp = 0;
    int64_t vpp = 1;  // virtual stages per pipeline rank (interleaved schedule)
    int64_t mbs = 1;  // micro-batch size in sequences
    Schedule schedule = Schedule::one_f_one_b;
    Recompute recompute = Recompute::none;
    bool sp = false;  // Megatron sequence parallelism (needs tp > 1)
    int zero =
        0;  // 0 none; 1 optimizer states (Megatron distributed optimizer); 2 + grads; 3 + weights
    /// Transformer layers on the first / last pipeline stage (all of its virtual chunks);
    /// 0 = not set: the stage takes the middle stages' share (Megatron-LM
    /// --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers). The embedding
    /// always sits on stage 0 (chunk 0), the output layer and loss on the last stage (last chunk).
    int64_t first_layers = 0;
    int64_t last_layers = 0;
    /// Full recomputation: Megatron --recompute-num-layers (0 = 1, the uniform default cleave
    /// has always priced) and --recompute-method.
    int64_t recompute_layers = 0;
    RecomputeMethod recompute_method = RecomputeMethod::uniform;
    /// Selective recomputation's modules (recompute_module bits); 0 = Megatron's default list,
    /// core_attn alone (what `selective` has always priced).
    uint16_t recompute_modules = 0;
    /// Megatron --cpu-offloading --cpu-offloading-num-layers N (activations only): each stage
    /// moves the saved activations of N of its layers to host memory after their forward and
    /// brings them back for backward (Transformer Engine's CPU offload context); 0 = none.
    int64_t offload_layers = 0;

    bool operator==(const Plan&) const = default;
};

/// Transformer layers per pipeline stage: the first, each middle and the last stage.
struct StageLayers {
    int64_t first = 0;
    int64_t middle = 0;  // 0 when pp <= 2
    int64_t last = 0;

    bool operator==(const StageLayers&) const = default;
};

/// The plan's layer map for a model of `layers` transformer layers. Unset ends take the middle
/// share: middle = (layers - set ends) / (stages without a set count). Meaningful only when
/// check_plan() accepts the plan; pp == 1 puts every layer on the one stage.
[[nodiscard]] StageLayers stage_layers(int64_t layers, const Plan& p);

/// Transformer layers on pipeline stage `s` (0-based, all of its virtual chunks).
[[nodiscard]] int64_t layers_on_stage(int64_t layers, const Plan& p, int64_t s);

/// Transformer layers of virtual chunk `c` of stage `s`: a stage's n layers spread over its vpp
/// chunks as n / vpp each, the n % vpp extra ones on its last chunks, or on stage 0 its first
/// chunk short (Megatron-LM get_num_layers_to_build: the embedding takes a layer's place in
/// the first chunk of stage 0, the loss in the last chunk of the last stage).
[[nodiscard]] int64_t chunk_layers(int64_t layers, const Plan& p, int64_t s, int64_t c);

/// Index of the first transformer layer of virtual chunk `c` of stage `s` (layers run in
/// virtual-stage order c * pp + s).
[[nodiscard]] int64_t chunk_first_layer(int64_t layers, const Plan& p, int64_t s, int64_t c);

/// True when the stages do not all hold layers / pp layers.
[[nodiscard]] bool uneven_stages(int64_t layers, const Plan& p);

/// The layer map in Megatron-LM's --pipeline-model-parallel-layout notation, one virtual stage
/// per '|' in order c * pp + s: "E" embedding, "t" a transformer layer, "L" the loss, runs
/// written "t*n" (megatron/core/transformer/pipeline_parallel_layer_layout.py).
[[nodiscard]] std::string to_layout(int64_t layers, const Plan& p);

/// A layout string parsed into the plan's layer map: sets p.vpp, p.first_layers and
/// p.last_layers. Throws ConfigError naming the problem when the string is not Megatron's
/// notation, does not hold `layers` layers, puts E / L elsewhere than on the first / last
/// virtual stage, or gives middle stages different counts (cleave prices one middle stage).
void apply_layout(const std::string& layout, int64_t layers, Plan& p);

/// Number of micro-batches per iteration per pipeline: global_batch / (mbs * dp).
[[nodiscard]] int64_t num_microbatches(const Plan& p, const JobSpec& job);

/// GPUs the plan occupies: dp * tp * pp * cp.
[[nodiscard]] int64_t plan_gpus(const Plan& p);

[[nodiscard]] const char* to_string(Schedule s);   // "1f1b", "gpipe", "interleaved", "dualpipe", "dualpipev"
/// The schedule named by to_string(), or nullopt.
[[nodiscard]] std::optional<Schedule> parse_schedule(const std::string& name);
[[nodiscard]] const char* to_string(Recompute r);  // "none", "selective", "full"
[[nodiscard]] const char*
to_string(Dtype d);  // "fp32", "tf32", "bf16", "fp16", "fp8", "mxfp8", "nvfp4"
[[nodiscard]] const char* to_string(Fp8Recipe r);  // "delayed", "tensorwise", "blockwise"

/// The expert tensor-parallel size the plan runs: etp, or tp when etp is not set.
[[nodiscard]] inline int64_t expert_tp(const Plan& p) {
    return p.etp > 0 ? p.etp : p.tp;
}

/// Expert data-parallel size: the ranks of one pipeline stage, tp * cp * dp, over etp * ep.
[[nodiscard]] inline int64_t expert_dp(const Plan& p) {
    return p.tp * p.cp * p.dp / (expert_tp(p) * p.ep);
}

/// Stable, human-readable key, e.g. "dp4 tp2 pp4 cp1 ep1 vpp1 mbs1 1f1b none sp0 zero1".
/// Used for deterministic tie-breaks.
[[nodiscard]] std::string to_string(const Plan& p);

/// The plan as cleave's command-line flags ("--tp 2 --pp 4 --dp 4 --mbs 1 ...").
[[nodiscard]] std::string to_flags(const Plan& p);

/// The rules a plan must keep to be run (one table: check_plan, the planner's pruning and the
/// exports all read it; core/plan_rules.cpp holds each rule's predicate and message).
enum class Rule : uint8_t {
    sizes,                    // every size >= 1
    zero_stage,               // ZeRO stage 0..3
    tp_heads,                 // tp divides the attention heads
    tp_kv_heads,              // tp divides the KV heads
    tp_ffn,                   // tp divides the MLP width
    stage_layers,             // every pipeline stage holds at least one layer
    stage_split,              // the layer map adds up and middle stages hold equal counts
    vpp_chunks,               // every chunk builds a layer (but the embedding's / loss's)
    recompute_layers,         // --recompute-num-layers / method only with full recomputation
    ep_moe,                   // ep > 1 needs experts
    ep_experts,               // ep divides the experts
    ep_dp,                    // ep * etp divides tp * cp * dp (etp unset: ep divides dp * cp)
    interleave_pp,            // interleaved needs pp > 1
    interleave_vpp,           // interleaved needs vpp > 1
    interleave_microbatches,  // interleaved: pp divides the micro-batches
    vpp_schedule,             // vpp > 1 only with the interleaved schedule
    dualpipe_shape,  // dualpipe(v): pp (even), micro-batches (even) >= 2 pp, no CPU offload
    zero_pipeline,   // ZeRO-2/3 not with pp > 1
    gpus,            // dp * tp * pp * cp == gpus
    batch,           // mbs * dp divides the global batch
    sp_tp,           // sequence parallelism needs tp > 1
    sp_seq,          // tp * cp divides seq under sequence parallelism
    cp_seq,          // 2 cp divides seq
    tp_mamba,        // tp divides a hybrid model's Mamba-2 heads and groups
    tp_gdn,          // tp x cp divides a hybrid model's gated DeltaNet heads
    muon_sharding,   // Muon not with ZeRO-2/3 (Megatron-FSDP, FSDP2)
    model_code,      // the stack's model code runs the plan (HF transformers: dp only,
                     // whole-layer checkpointing)
    count
};

inline constexpr std::size_t rule_count = static_cast<std::size_t>(Rule::count);

struct RuleInfo {
    const char* name;    // "tp_heads"
    const char* reason;  // one line: why the rule exists, with its source
};

/// Name and reason of a rule.
[[nodiscard]] const RuleInfo& rule_info(Rule r);

/// True when the plan keeps rule `r` for this model and job. No allocation: the planner's
/// pruning calls it on partial plans (fields not yet chosen at their defaults).
[[nodiscard]] bool keeps(Rule r, const ModelSpec& m, const JobSpec& job, const Plan& p);

struct Violation {
    Rule rule = Rule::count;
    std::string message;  // one sentence with the numbers: "tp=3 does not divide heads=32"

    bool operator==(const Violation&) const = default;
};

/// Every rule of the table the plan breaks, in table order. Empty when it can be expressed.
[[nodiscard]] std::vector<Violation>
plan_violations(const ModelSpec& m, const JobSpec& job, const Plan& p);

/// plan_violations() as sentences ("tp=3 does not divide heads=32").
[[nodiscard]] std::vector<std::string>
check_plan(const ModelSpec& m, const JobSpec& job, const Plan& p);

}  // namespace cleave
