#pragma once
// Discrete-event playback of one training iteration of a plan (DESIGN §1, issue #5).
//
// The core, simulate(const SimInput&), takes explicit per-rank, per-chunk durations, so tests
// can build inputs by hand; the adapter make_sim_input() builds that input from the cost
// model's Estimate. One representative rank per pipeline stage (DP and TP replicas behave
// alike). Streams per rank: compute (TP/CP collectives inline), PP send of activations to the
// next rank, PP send of gradients to the previous rank, DP gradient reduction. See
// docs/simulator.md for the event model and the exact bubble definition.

#include "core/cluster.hpp"
#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "core/schedule.hpp"
#include "core/units.hpp"
#include "costmodel/estimate.hpp"

#include <cstdint>
#include <vector>

namespace cleave {

[[nodiscard]] const char* to_string(SimSchedule s);  // "gpipe", "1f1b", "interleaved", "zb-h1"

/// Costs of one virtual chunk of one rank for one micro-batch.
struct ChunkCost {
    Seconds fwd;       // forward, including inline TP/CP/EP communication
    Seconds bwd;       // backward (input + weight gradients, with recomputation)
    Seconds fwd_comm;  // the TP/CP/EP communication inside fwd (reported, not added)
    Seconds bwd_comm;  // the TP/CP/EP communication inside bwd (reported, not added)
    /// ZB-H1 only: the weight-gradient share of bwd, run as a separate W op. 0 = bwd / 2.
    Seconds bwd_weight;

    bool operator==(const ChunkCost&) const = default;
};

/// One DP gradient bucket. It becomes ready when the backward of its chunk for the rank's last
/// micro-batch has done `ready_fraction` of its work (layers run backward from the chunk's
/// end, so the chunk's last layers' bucket is ready first), and then occupies the rank's DP
/// stream for `time`. Buckets run on the DP stream in order of readiness.
struct DpBucket {
    int64_t chunk = 0;
    double ready_fraction = 1.0;  // in (0, 1]
    Seconds time;

    bool operator==(const DpBucket&) const = default;
};

/// Everything the simulator needs about one pipeline rank.
struct RankInput {
    std::vector<ChunkCost> chunks;     // size vpp; chunk c holds virtual stage c * pp + rank
    std::vector<DpBucket> dp_buckets;  // empty = no DP reduction
    Seconds optimizer;                 // optimizer step (+ ZeRO all-gather), after DP is done
    /// One activation (forward) or gradient (backward) transfer between this rank and the next
    /// (rank + 1, wrapping to 0 for interleaved chunk hand-over). Transfers serialize per
    /// direction on the sender's PP stream.
    Seconds p2p_next;

    bool operator==(const RankInput&) const = default;
};

struct SimInput {
    SimSchedule schedule = SimSchedule::one_f_one_b;
    int64_t microbatches = 1;
    std::vector<RankInput> ranks;  // size pp, each with the same number of chunks
    /// Overlap DP bucket reduction with the remaining backward (Megatron --overlap-grad-reduce).
    /// When false every bucket waits for the rank's compute stream to finish.
    bool dp_overlap = true;
    /// All ranks start the optimizer together, after every rank's DP reduction (Megatron's
    /// global grad-norm all-reduce for clipping synchronizes the pipeline).
    bool optimizer_sync = true;

    bool operator==(const SimInput&) const = default;
};

struct SimOptions {
    bool record_timeline = false;    // keep every event (for traces); off for re-scoring
    bool dp_overlap = true;          // adapter: copied to SimInput::dp_overlap
    bool optimizer_sync = true;      // adapter: copied to SimInput::optimizer_sync
    double dp_bucket_params = 40e6;  // adapter: parameters per DP bucket (Megatron DDP default)

    bool operator==(const SimOptions&) const = default;
};

enum class SimStream : uint8_t { compute, pp_send_fwd, pp_send_bwd, dp };

enum class SimPhase : uint8_t {
    forward,          // "F"
    backward,         // "B" (whole backward; ZB-H1: input gradient only)
    backward_weight,  // "W" (ZB-H1 weight gradient)
    send_activation,  // forward p2p
    send_gradient,    // backward p2p
    dp_reduce,        // one DP bucket
    optimizer
};

[[nodiscard]] const char* to_string(SimStream s);  // "compute", "pp send fwd", ...
[[nodiscard]] const char* to_string(SimPhase p);   // "F", "B", "W", "send act", ...

/// One interval on one stream of one rank.
struct SimEvent {
    double start_s = 0.0;
    double end_s = 0.0;
    int32_t microbatch = -1;  // -1 for DP buckets and the optimizer
    int32_t chunk = -1;       // virtual chunk (bucket index for dp_reduce), -1 for optimizer
    SimPhase phase = SimPhase::forward;
    SimStream stream = SimStream::compute;

    bool operator==(const SimEvent&) const = default;
};

struct StageResult {
    /// Over the iteration [0, iteration_time]: busy + idle + comm_wait == iteration_time.
    Seconds busy;         // compute stream working (F, B, W, optimizer)
    Seconds idle;         // compute stream idle and not waiting for a transfer in flight
    Seconds comm_wait;    // compute stream waiting for a PP transfer in flight or the DP tail
    Seconds compute_fb;   // F + B + W work only (what the bubble measures)
    Seconds compute_end;  // end of the last F/B/W op
    Seconds dp_end;       // end of the last DP bucket (compute_end when there are none)
    Seconds optimizer_start;
    Seconds optimizer_end;
    double bubble_ratio = 0.0;                // 1 - compute_fb / pipeline span, this rank
    int64_t peak_inflight_chunks = 0;         // max forwards done whose backward has not started
    double peak_inflight_microbatches = 0.0;  // peak_inflight_chunks / vpp (activations held)
    std::vector<SimEvent> events;  // with SimOptions::record_timeline, in start order per stream

    bool operator==(const StageResult&) const = default;
};

struct SimResult {
    Seconds iteration_time;  // max over ranks of optimizer end
    Seconds pipeline_span;   // earliest F start to latest B/W end over all ranks
    /// Pipeline bubble measured from the timeline: 1 - sum_s compute_fb_s / (pp * pipeline_span),
    /// the share of device time in the pipeline phase that the compute streams are not working.
    /// Uniform stages with free communication: (p-1)/(m+p-1), interleaved (p-1)/(v*m+p-1).
    double bubble_ratio = 0.0;
    std::vector<StageResult> stages;

    bool operator==(const SimResult&) const = default;
};

/// Plays one iteration. Throws ConfigError when the input cannot be scheduled (no ranks,
/// microbatches < 1, chunks missing, interleaved with microbatches % pp != 0, a negative
/// duration). Cost: O(pp * vpp * microbatches) time, a few flat arrays, no per-event allocation
/// unless record_timeline.
[[nodiscard]] SimResult simulate(const SimInput& in, const SimOptions& opt = {});

/// Builds the simulator input from the cost model: per-chunk fwd/bwd from each stage's
/// StageCost (the embedding / output-layer extra goes to the first / last chunk), p2p from
/// Estimate::pp_p2p, DP buckets by splitting StageCost::dp_reduce (the whole reduction; else
/// dp_grad_sync) into buckets of max(opt.dp_bucket_params, 1e6 * dp * cp) parameters, the
/// optimizer from StageCost::optimizer.
[[nodiscard]] SimInput make_sim_input(const ModelSpec& model,
                                      const ClusterSpec& cluster,
                                      const JobSpec& job,
                                      const Plan& plan,
                                      const Estimate& est,
                                      const SimOptions& opt = {});

/// make_sim_input() then simulate(): the one call `cleave plan --simulate` uses to re-score.
[[nodiscard]] SimResult simulate(const ModelSpec& model,
                                 const ClusterSpec& cluster,
                                 const JobSpec& job,
                                 const Plan& plan,
                                 const Estimate& est,
                                 const SimOptions& opt = {});

}  // namespace cleave
