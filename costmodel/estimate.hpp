#pragma once
// The cost model's answer for one plan. A fixed-size value (no heap) so the planner can price
// millions of plans per second; human-readable risks are rendered separately by describe_risks().
//
// Interface contract (used by planner/, simulator/, cli/ and executor validate): fields may be
// added; existing names and meanings stay.

#include "core/cluster.hpp"
#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "core/units.hpp"
#include "costmodel/collectives.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/memory.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace cleave {

struct MemoryBreakdown {
    Bytes weights;
    Bytes grads;
    Bytes optimizer;     // fp32 master weights + optimizer moments
    Bytes activations;   // all in-flight micro-batches, per the schedule
    Bytes logits;        // output-layer logits and loss buffers (last stage)
    Bytes comm_buffers;  // DP gradient buckets, ZeRO gather buffers, PP send/recv buffers
    Bytes reserved;      // the profile's fixed reservation (CUDA context, NCCL buffers)
    Bytes total;         // allocated + what the allocator cannot give back at the limit
                         // (stack's oom_residue / expandable_residue) + reserved: what
                         // the fit check compares
    Bytes allocated;     // peak bytes held by tensors (torch.cuda.max_memory_allocated)
    Bytes allocator;     // the caching allocator's reserve over `allocated` (stack's
                         // allocator_overhead); allocated + allocator = max_memory_reserved

    bool operator==(const MemoryBreakdown&) const = default;
};

/// Per micro-batch costs of one pipeline stage (all of its virtual chunks together).
struct StageCost {
    int64_t layers = 0;
    MemoryBreakdown memory;
    Seconds fwd;           // forward compute of one micro-batch, including exposed TP/CP/EP comm
    Seconds bwd;           // backward (with any recomputation) of one micro-batch, ditto
    Seconds fwd_comm;      // the exposed TP/CP/EP communication inside fwd
    Seconds bwd_comm;      // the exposed TP/CP/EP communication inside bwd
    Seconds dp_grad_sync;  // this stage's DP gradient reduce-scatter / all-reduce, unoverlapped
    Seconds optimizer;     // this stage's optimizer step (+ ZeRO all-gather of updated weights)
    Seconds dp_reduce;     // the whole DP gradient reduction (+ tied embeddings), before overlap
    // Of fwd + bwd, one micro-batch, by kind (LayerCost::gemm / attention / memory over the
    // stage's layers; the embedding and output layers' math in gemm). What is left of fwd + bwd
    // is the exposed comm, the recomputation and the MoE expert overhead.
    Seconds gemm;
    Seconds attention;
    Seconds memory_bound;
    Seconds recompute;

    bool operator==(const StageCost&) const = default;
};

struct TimeBreakdown {
    Seconds compute;  // forward + backward + recompute math of the slowest stage, all micro-batches
    Seconds tp_comm;  // exposed tensor-parallel collectives
    Seconds cp_comm;  // exposed context-parallel (ring attention) transfers
    Seconds ep_comm;  // exposed expert-parallel all-to-all
    Seconds pp_comm;  // exposed pipeline send/recv
    Seconds bubble;   // pipeline fill and drain
    Seconds dp_comm;  // exposed data-parallel gradient reduction (what backward does not hide)
    Seconds optimizer;  // optimizer step
    // Of compute: what the job's slowest GPU adds to the mean GPU's kernel time
    // (costmodel/compute.hpp straggler_factor); 0 where the profile has no throughput_spread.
    Seconds straggler;

    bool operator==(const TimeBreakdown&) const = default;
};

struct CommBytes {  // bytes each GPU sends per iteration, per group
    Bytes dp;
    Bytes tp;
    Bytes pp;
    Bytes cp;
    Bytes ep;
    Bytes ep_nvlink;  // of ep: over NVLink
    Bytes ep_nic;     // of ep: through this GPU's NIC

    bool operator==(const CommBytes&) const = default;
};

enum class RiskKind : uint8_t {
    oom,                  // the peak stage does not fit
    nccl_timeout,         // one collective long enough to threaten NCCL's watchdog
    slow_network,         // the DP step is dominated by a slow network
    tp_cross_node,        // a TP group spans nodes
    tp_over_pcie,         // a TP group talks over PCIe
    few_microbatches,     // m < p
    large_bubble,         // bubble > 30 %
    shared_communicator,  // pipeline and data-parallel traffic would share one communicator
    ep_cross_domain,      // the EP all-to-all leaves the NVLink domain
    moe_imbalance,        // busiest expert > 1.5 x average with no capacity factor
    moe_fixed_cost,       // quantised experts' fixed per-expert cost >= 25 % of the step
    count
};

struct Estimate {
    /// Stage kinds: [0] first (embedding), [1] middle, [2] last (output layer + loss).
    /// With pp == 1 all three describe the single stage; with pp == 2 [1] equals [0].
    std::array<StageCost, 3> stage;
    int64_t peak_memory_stage = 0;  // stage index (0..pp-1) with the largest memory total
    /// The stage [1] describes: 1, or for a hybrid model (whose middle stages hold different
    /// layer kinds, each priced) the middle stage with the most memory.
    int64_t middle_stage = 1;
    bool middle_stages_differ = false;  // a hybrid model with pp > 3
    MemoryBreakdown memory;         // of that peak stage
    Bytes memory_usable;            // from the cluster profile
    Bytes memory_headroom;          // JobSpec::memory_headroom
    bool fits = false;              // memory.total + memory_headroom <= memory_usable

    TimeBreakdown time;
    Seconds iteration_time;
    Seconds pp_p2p;             // one activation transfer across one stage boundary
    double bubble_ratio = 0.0;  // (p-1)/(m+p-1), or (p-1)/(v*m+p-1) interleaved
    double tokens_per_s = 0.0;
    double tflops_per_gpu = 0.0;  // model FLOPs / time / GPUs, in TFLOP/s
    double mfu = 0.0;             // model FLOPs (Korthikanti App. A) / (time * gpus * peak)
    double hfu = 0.0;             // hardware FLOPs (incl. recomputation) / (time * gpus * peak)
    Flops model_flops;            // per iteration, whole job
    Flops hardware_flops;         // per iteration, whole job, with recomputation

    CommBytes comm_bytes_per_gpu;
    int64_t microbatches = 0;    // m = global_batch / (mbs * dp)
    Seconds dp_sync;             // whole DP gradient reduction of the slowest stage, unoverlapped
    Seconds expert_overhead;     // of time.compute: quantised expert GEMMs' fixed per-expert
                                 // cost (node.quantised_expert_overhead, a calibration)
    Seconds longest_collective;  // longest single blocking NCCL call: a collective, or (pp > 1)
                                 // stage 1's p2p recv waiting out stage 0's grad sync + optimizer
    uint32_t risk_mask = 0;      // bit (1u << RiskKind) set per risk found

    [[nodiscard]] bool has(RiskKind k) const {
        return (risk_mask >> static_cast<unsigned>(k)) & 1u;
    }

    bool operator==(const Estimate&) const = default;
};

/// Cost of stage `s` (0-based) of a `pp`-stage pipeline.
[[nodiscard]] inline const StageCost& stage_cost(const Estimate& e, int64_t s, int64_t pp) {
    if (s == 0) {
        return e.stage[0];
    }
    return s == pp - 1 ? e.stage[2] : e.stage[1];
}

struct Risk {
    RiskKind kind = RiskKind::oom;
    std::string message;  // one line: the cause, with numbers
    std::string fix;      // one line: what to change

    bool operator==(const Risk&) const = default;
};

[[nodiscard]] const char* to_string(RiskKind k);  // "oom", "nccl_timeout", ...

/// Prices one plan. Pure (STYLE S2.2): no I/O, no allocation. Precondition: check_plan() is
/// empty for (model, job, plan) and plan_gpus(plan) == job.gpus.
[[nodiscard]] Estimate
estimate(const ModelSpec& model, const ClusterSpec& cluster, const JobSpec& job, const Plan& plan);

/// One Risk per bit of e.risk_mask, with cause and fix in words and numbers.
/// A hybrid model's single-block layers (core LayerKind: M, *, -, E), priced per kind and
/// indexed by it. Their params include the layer's pre-norm; an E layer's experts are
/// LayerParts::params_experts.
struct HybridParts {
    std::array<LayerCost, layer_kind_count> kind;
    std::array<Bytes, layer_kind_count> act_kind;       // kept per layer under the plan's recompute
    std::array<Bytes, layer_kind_count> act_kind_none;  // ... without recomputation
    std::array<double, layer_kind_count> params_kind{};
    std::array<MuonCost, layer_kind_count> muon_kind;  // --optimizer muon: each kind's Newton-Schulz work
};

/// What a memory check reads of one micro-batch's per-layer parts (LayerParts): the activations
/// kept, the logits and the parameter counts. The Estimator keeps these for every layer shape it
/// meets and the costs (LayerParts) only for the shapes of plans that fit: a shape none of whose
/// plans fits (a third of DeepSeek-V3's on 16,384 H100s) is never timed.
struct LayerMemoryParts {
    int64_t mtp_layers = 0;   // MTP block passes: trained modules x job.mtp_repeats (0 without job.mtp)
    int64_t mtp_modules = 0;  // trained MTP modules (their parameters)
    bool mtp_moe = false;     // the MTP block is shaped like the last layer: MoE or dense
    double params_mtp = 0.0;  // all MTP modules (core params_mtp), experts included
    Bytes act_dense;          // activations kept per dense layer, under the plan's recompute
    Bytes act_dense_none;     // ... without recomputation (what backward rematerialises)
    Bytes act_moe;
    Bytes act_moe_none;
    Bytes act_embedding;          // embedding output kept on the first stage
    Bytes logits;                 // fp32 logits and loss buffers on the last stage
    double layer_io_bytes = 0.0;  // one layer's input on one GPU: bytes x tokens x hidden
    // Model constants, in parameters (kept here so every plan reads them without recomputing;
    // the same in every LayerMemoryParts of a model).
    double params_shared = 0.0;     // attention + norms of one layer
    double params_dense_mlp = 0.0;  // one dense MLP
    double params_router = 0.0;     // one MoE router
    double params_experts = 0.0;    // all experts of one MoE layer
    double params_embedding = 0.0;
    double params_head = 0.0;
    double params_tied_copy = 0.0;  // the embedding copy the last stage keeps when tied
    double params_lora = 0.0;       // LoRA adapters of one layer, whole (0 without --peft lora)
    // The job's bytes per parameter, alike kept: its model states (model_states) and the
    // quantised weight copies kept over a step (weight_copy_bytes_per_param).
    StateBytesPerParam state_bytes;
    double weight_copy_bytes = 0.0;
    // A hybrid model's single-block layers (HybridParts); null for a transformer, whose parts
    // stay this size (the planner caches thousands of them). Here its memory fields (act_kind,
    // act_kind_none, params_kind); in a LayerParts its costs too (kind, muon_kind).
    std::shared_ptr<const HybridParts> hybrid;
};

/// Per-layer and per-edge costs of one micro-batch on one GPU: what estimate() derives from the
/// plan's tp, cp, ep, mbs, sp and recompute alone (and the TP / CP / EP links, which follow from
/// tp, cp and ep), so many plans can share them.
struct LayerParts : LayerMemoryParts {
    double straggler = 1.0;  // straggler_factor the costs below already include
    LayerCost dense;
    LayerCost moe;       // zero for a dense model
    LayerCost dense_hp;  // a dense layer kept bf16 under quantised training (job.bf16_layers_*)
    EdgeCost emb;
    EdgeCost out;
    // Multi-token prediction (job.mtp): per MTP module on the last stage, its eh_proj (2h -> h)
    // GEMM and norms; the module's transformer block is priced as `mtp_moe ? moe : dense`, its
    // logits + loss as `out`.
    EdgeCost mtp_proj;
    Flops hardware_flops;  // per iteration, whole job, with this recompute
    // --optimizer muon: one dense and one MoE layer's Newton-Schulz work (zero otherwise).
    MuonCost muon_dense;
    MuonCost muon_moe;
};

/// One pipeline stage's layers and parameters on one GPU (stage_memory.hpp stage_params): a
/// function of the layer map (pp, vpp, schedule, first / last layers), the micro-batches, tp,
/// ep, etp and the model alone.
struct StageParams {
    int64_t layers = 0;     // transformer layers on the stage (layers_on_stage)
    double inflight = 0.0;  // micro-batches whose activations it holds (inflight_microbatches)
    double dense = 0.0;     // per GPU after the TP split
    double expert = 0.0;    // per GPU after the TP and EP split
    double adapters = 0.0;  // LoRA adapters per GPU after the TP split (dense and expert frozen)
    int64_t moe_layers = 0;
    std::array<int64_t, layer_kind_count> kinds{};  // a hybrid model's layers by LayerKind (zero otherwise)
};

/// The Estimator's memo of the three stages' StageParams (first, a middle one, last) for the
/// last layer map, micro-batches, tp, ep and etp seen: the planner prices every ZeRO stage,
/// recomputation and sp of one layer map in a row.
struct StageParamsMemo {
    struct Key {
        int64_t pp = 0, vpp = 0, schedule = 0, first_layers = 0, last_layers = 0, micro = 0;
        int64_t tp = 0, ep = 0, etp = 0;  // etp: expert_tp()

        bool operator==(const Key&) const = default;
    };

    Key key;
    std::array<bool, 3> have{};
    std::array<StageParams, 3> sp{};
};

/// Peak memory of a plan, from Estimator::if_fits().
struct MemoryCheck {
    Bytes peak;                          // Estimate::memory.total
    int64_t stage = 0;                   // Estimate::peak_memory_stage
    Bytes usable;                        // Estimate::memory_usable
    bool fits = false;                   // Estimate::fits
    bool fits_without_headroom = false;  // peak <= usable: set aside only for the headroom
    bool complete = true;  // false: stopped at a stage above stop_above; peak is a lower bound
};

/// Prices many plans of one model, cluster and job — the planner's inner loop. Caches LayerParts
/// per (tp, cp, ep, mbs, sp, recompute): the memory half for every shape met, the costs only
/// for the shapes of plans that fit or are priced. Plans that differ only in dp, pp, schedule,
/// virtual stages or ZeRO stage re-use them; the stages' parameters are kept for the last layer
/// map. operator() returns exactly what estimate() returns (bit for bit: both assemble the same
/// parts in the same order). Holds references: the model, cluster and job must outlive it. Not
/// thread-safe.
class Estimator {
public:
    Estimator(const ModelSpec& model, const ClusterSpec& cluster, const JobSpec& job);

    [[nodiscard]] Estimate operator()(const Plan& plan);

    /// The peak stage's memory against the GPU's usable memory, and the whole estimate only when
    /// it fits (then equal to operator()): most plans of a large model fail here, at a fraction
    /// of the cost. A stage that alone needs more than both the usable memory and `stop_above`
    /// ends the check there (check.complete false, check.peak a lower bound): the planner passes
    /// the memory of the nearest miss it already holds.
    [[nodiscard]] std::optional<Estimate>
    if_fits(const Plan& plan,
            MemoryCheck& check,
            Bytes stop_above = bytes(std::numeric_limits<double>::infinity()));

    /// if_fits() into `out` (untouched when the plan does not fit): true when it fits. The
    /// planner's inner loop, which would otherwise zero or copy an optional Estimate (~1 KB) per
    /// plan.
    bool if_fits(const Plan& plan, MemoryCheck& check, Bytes stop_above, Estimate& out);

    /// Layer shapes whose parts are held (those of the last tp asked for).
    [[nodiscard]] std::size_t cached_shapes() const { return cached_; }

private:
    /// A layer shape's group sizes and micro-batch (its recompute, sp and module list apart).
    struct Key {
        int64_t tp, cp, ep, etp, mbs;
        bool operator==(const Key&) const = default;
    };

    struct KeyHash {
        std::size_t operator()(const Key& k) const noexcept;
    };

    /// A layer shape's parts: the memory half always, the costs once a plan of it is priced.
    struct Entry {
        LayerMemoryParts memory;
        LayerParts* timed = nullptr;  // in timed_; null until timed() is first asked
    };

    /// Storage handed out in order and taken back all at once: the planner asks for each tp's
    /// shapes once, so a new tp overwrites the last one's entries instead of freeing them and
    /// allocating again (malloc and its page faults were 11 % of the 16,384-GPU DeepSeek plan,
    /// perf). Addresses stay valid until reset().
    template <class T>
    class Slab {
    public:
        T* take() {
            if (used_ == blocks_.size() * kBlock) {
                blocks_.push_back(std::make_unique<T[]>(kBlock));
            }
            T* t = &blocks_[used_ / kBlock][used_ % kBlock];
            ++used_;
            return t;
        }
        void reset() { used_ = 0; }

    private:
        static constexpr std::size_t kBlock = 128;
        std::vector<std::unique_ptr<T[]>> blocks_;
        std::size_t used_ = 0;
    };

    /// The shapes of one Key: by (recompute << 1 | sp) with the default module list, and with
    /// another list by (sp | recompute << 1 | list << 3).
    struct Shapes {
        std::array<Entry*, 8> plain{};  // in entries_
        std::vector<std::pair<int64_t, Entry*>> listed;
    };

    /// The entry of the plan's layer shape (its memory parts worked out on first sight).
    Entry& entry(const Plan& plan);
    /// The entry's whole LayerParts, its costs worked out on first request (with `plan`'s links:
    /// the TP / CP / EP links, the same for every plan of the shape).
    const LayerParts& timed(Entry& e, const Plan& plan);
    /// Block recomputation: the parts of the layers the plan keeps whole; else null.
    const LayerParts* whole_layers(const Plan& plan);
    /// if_fits() with the stages priced on `view` (DualPipeV's 2 pp-stage view, else the plan);
    /// `ranks` the plan as launched when the two differ.
    bool fits_as(const Plan& plan,
                 const Plan& view,
                 const Plan* ranks,
                 MemoryCheck& check,
                 Bytes stop,
                 Estimate& out);
    /// plan_links() of the plan, kept for the last group sizes seen: the planner varies the
    /// knobs (mbs, recompute, sp, vpp, schedule) innermost under one (tp, cp, ep, etp, dp, pp).
    const PlanLinks& links(const Plan& plan);

    const ModelSpec& model_;
    const ClusterSpec& cluster_;
    const JobSpec& job_;
    Flops model_flops_;
    std::unordered_map<Key, Shapes, KeyHash> cache_;
    Slab<Entry> entries_;      // the entries of cache_
    Slab<LayerParts> timed_;   // their timed parts
    Key group_{0, 0, 0, 0, 0};             // the Key of shapes_
    Shapes* shapes_ = nullptr;             // cache_[group_]
    std::size_t cached_ = 0;               // entries in cache_
    std::array<int64_t, 7> links_key_{};   // tp, cp, ep, etp, dp, pp, zero >= 3 of links_
    PlanLinks links_;
    StageParamsMemo stage_memo_;
};

[[nodiscard]] std::vector<Risk> describe_risks(const ModelSpec& model,
                                               const ClusterSpec& cluster,
                                               const JobSpec& job,
                                               const Plan& plan,
                                               const Estimate& e);

}  // namespace cleave
