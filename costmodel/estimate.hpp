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

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace cleave {

struct MemoryBreakdown {
    Bytes weights;
    Bytes grads;
    Bytes optimizer;     // fp32 master weights + optimizer moments
    Bytes activations;   // all in-flight micro-batches, per the schedule
    Bytes logits;        // output-layer logits and loss buffers (last stage)
    Bytes comm_buffers;  // DP gradient buckets, ZeRO gather buffers, PP send/recv buffers
    Bytes reserved;      // context + allocator fragmentation from the cluster profile
    Bytes total;

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

    bool operator==(const TimeBreakdown&) const = default;
};

struct CommBytes {  // bytes each GPU sends per iteration, per group
    Bytes dp;
    Bytes tp;
    Bytes pp;
    Bytes cp;
    Bytes ep;

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
    count
};

struct Estimate {
    /// Stage kinds: [0] first (embedding), [1] middle, [2] last (output layer + loss).
    /// With pp == 1 all three describe the single stage; with pp == 2 [1] equals [0].
    std::array<StageCost, 3> stage;
    int64_t peak_memory_stage = 0;  // stage index (0..pp-1) with the largest memory total
    MemoryBreakdown memory;         // of that peak stage
    Bytes memory_usable;            // from the cluster profile
    bool fits = false;

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
[[nodiscard]] std::vector<Risk> describe_risks(const ModelSpec& model,
                                               const ClusterSpec& cluster,
                                               const JobSpec& job,
                                               const Plan& plan,
                                               const Estimate& e);

}  // namespace cleave
