#pragma once
// Exhaustive plan search (docs/planner.md): enumerate every plan the cost model understands for
// a job, prune hard constraints structurally, price the rest with estimate(), keep the top k with
// a bounded heap, and remember why everything else was rejected.

#include "core/cluster.hpp"
#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "costmodel/estimate.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace cleave {

enum class Objective {
    time,    // fastest iteration (default)
    memory,  // least peak memory per GPU, then fastest
    gpus,    // fewest GPUs whose best plan reaches a target tokens/s, then fastest
    cost     // fewest GPU-seconds per iteration (gpus * iteration time) on up to job.gpus GPUs:
             // the least GPU-hours, so the least money at one price, to train a token budget
};

/// Why a (partial) plan was rejected. Structural reasons are counted where the prune happens
/// (one per factorization, per virtual-stage count, ...); priced reasons once per plan.
enum class RejectReason : uint8_t {
    limit,       // tp/pp/cp/ep above a user limit (SearchOptions::max_*)
    tp_split,    // tp does not divide heads, kv_heads, ffn_hidden or the Mamba-2 heads / groups
    layers,      // pp does not divide the layers
    batch,       // dp does not divide the global batch
    seq,         // 2*cp (ring attention) or tp*cp (sequence parallelism) does not divide seq
    experts,     // ep does not divide the experts
    interleave,  // interleaved schedule: fewer micro-batches than pp (Megatron)
    schedule,    // dualpipe(v): odd pp, too few micro-batches, an uneven V (Rule::dualpipe_shape)
    zero_pipeline,  // ZeRO-2/3 with pp > 1 (neither Megatron nor DeepSpeed can)
    stack,          // the stack's model code cannot split that way (Rule::model_code)
    tp_cross_node,  // TP group leaves the node while SearchOptions::allow_tp_cross_node is off
    heuristic,      // skipped by SearchOptions::heuristics (only when asked)
    memory,         // priced: the peak stage does not fit in usable memory
    target,         // priced: below SearchOptions::target_tokens_per_s (objective gpus)
    count
};

inline constexpr std::size_t reject_reason_count = static_cast<std::size_t>(RejectReason::count);

[[nodiscard]] const char* to_string(RejectReason r);  // "memory", "tp_split", ...
[[nodiscard]] const char* to_string(Objective o);     // "time", "memory", "gpus"

struct SearchOptions {
    Objective objective = Objective::time;
    int64_t top_k = 10;
    /// TP groups that leave a node are rejected (reason tp_cross_node), as Megatron users keep
    /// TP inside a node; when on, they are priced and the cost model flags tp_cross_node.
    bool allow_tp_cross_node = false;
    int64_t max_tp = 0;  // 0 = no limit
    int64_t max_pp = 0;
    int64_t max_cp = 0;
    int64_t max_ep = 0;
    /// Objective gpus: the tokens/s a plan must reach. job.gpus is the most GPUs to try.
    double target_tokens_per_s = 0.0;
    /// Opt-in pruning that may skip feasible plans (docs/planner.md): TP inside a node, no GPipe,
    /// CP only for sequences of 8192 tokens or more.
    bool heuristics = false;

    /// Plan fields the user fixed (cleave plan --tp 8 ...): only plans with these values are
    /// searched; what they leave out is not counted as rejected. 0 (or -1, or unset) = free.
    struct Fixed {
        int64_t dp = 0, tp = 0, pp = 0, cp = 0, ep = 0, mbs = 0, vpp = 0;
        int64_t etp = 0;  // expert tensor parallel; 0 = searched (candidates 1 and tp)
        int zero = -1;
        std::optional<Schedule> schedule;
        std::optional<Recompute> recompute;
        std::optional<bool> sp;
        int64_t recompute_layers = 0;  // with full recomputation (0 = 1 uniform)
        RecomputeMethod recompute_method = RecomputeMethod::uniform;
        uint16_t recompute_modules = 0;  // with selective recomputation (0 = core_attn)
        int64_t offload_layers = 0;      // --cpu-offloading-num-layers (0 = none)
        bool layers = false;  // first_layers / last_layers below are fixed
        int64_t first_layers = 0;
        int64_t last_layers = 0;

        bool operator==(const Fixed&) const = default;
    } fixed;

    bool operator==(const SearchOptions&) const = default;
};

struct RankedPlan {
    Plan plan;
    Estimate estimate;

    bool operator==(const RankedPlan&) const = default;
};

struct Rejection {
    int64_t count = 0;
    /// The best plan rejected for this reason: for memory the nearest miss (least peak memory,
    /// then the objective); for target the highest tokens/s; for structural reasons the first in
    /// enumeration order.
    bool has_example = false;
    bool priced = false;  // example carries an estimate
    Plan example;
    Estimate estimate;
    int64_t gpus = 0;  // GPUs of the example's job (differs from job.gpus for objective gpus)

    bool operator==(const Rejection&) const = default;
};

struct SearchResult {
    int64_t candidates_evaluated = 0;  // plans priced: memory checked, the rest when they fit
    int64_t feasible = 0;              // priced plans that fit (and reach the target)
    /// Plans that fit the usable memory but not under the job's memory headroom (counted among
    /// the memory rejections too).
    int64_t set_aside_for_headroom = 0;
    std::array<Rejection, reject_reason_count> rejected{};
    std::vector<RankedPlan> plans;             // best first, at most top_k
    std::vector<int64_t> gpu_counts_searched;  // job sizes searched (one unless objective gpus)
    /// The plainest plan, pure DP on job.gpus (mbs 1, no recomputation, no ZeRO), priced for the
    /// why-not report whether or not it fits; has_baseline is false when it cannot be expressed.
    bool has_baseline = false;
    RankedPlan baseline;

    [[nodiscard]] int64_t rejected_total() const;

    [[nodiscard]] const Rejection& rejection(RejectReason r) const {
        return rejected[static_cast<std::size_t>(r)];
    }
};

/// Prices one plan; estimate() in production, a test double in enumeration tests.
using PriceFn = Estimate (*)(const ModelSpec&, const ClusterSpec&, const JobSpec&, const Plan&);

/// Searches every plan for `job` (job.gpus GPUs; with Objective::gpus every size from 1 up to
/// job.gpus, see docs/planner.md) and returns the top options.top_k by the objective, ties broken
/// by to_string(plan). Pure and deterministic: no I/O, no clock. Throws ConfigError when the
/// options are inconsistent (top_k < 1, objective gpus without a positive target).
[[nodiscard]] SearchResult search(const ModelSpec& model,
                                  const ClusterSpec& cluster,
                                  const JobSpec& job,
                                  const SearchOptions& options);

/// Progress of a search: called after each job size searched (objective gpus and cost search
/// several sizes; the others one) with the sizes done and the sizes in all.
using SearchProgress = std::function<void(int64_t done, int64_t total)>;

/// search() reporting progress (the CLI draws it on a terminal). Same result as search().
[[nodiscard]] SearchResult search(const ModelSpec& model,
                                  const ClusterSpec& cluster,
                                  const JobSpec& job,
                                  const SearchOptions& options,
                                  const SearchProgress& progress);

/// search() with another pricing function (tests, benchmarks of the enumeration alone).
[[nodiscard]] SearchResult search_with(const ModelSpec& model,
                                       const ClusterSpec& cluster,
                                       const JobSpec& job,
                                       const SearchOptions& options,
                                       PriceFn price);

/// True when `a` ranks ahead of `b` under the objective (the order of SearchResult::plans).
[[nodiscard]] bool ranks_before(const RankedPlan& a, const RankedPlan& b, Objective objective);

/// Writes to_string(p) into `buf` without allocating; returns the length. Same bytes as
/// to_string(p) (tested), used for tie-breaks inside the search.
std::size_t plan_key(const Plan& p, std::array<char, 128>& buf);

/// The fixed fields as cleave's flags ("--tp 8 --pp 16"); empty when nothing is fixed.
[[nodiscard]] std::string fixed_flags(const SearchOptions::Fixed& f);

/// Short human name of a plan ("pure DP" when tp = pp = cp = 1 and zero = 0, else its key).
[[nodiscard]] std::string plan_label(const Plan& p);

/// One line for a rejection reason: what its best example needed and by how much it missed,
/// e.g. "pure DP (dp32 tp1 ...): needs 208.0 GiB per GPU, has 78.0". Empty when count == 0.
[[nodiscard]] std::string describe_rejection(const ModelSpec& model,
                                             const JobSpec& job,
                                             const SearchOptions& options,
                                             RejectReason reason,
                                             const Rejection& r);

/// Rank (1-based) that `plan` would take among every feasible plan of the search, by the
/// objective; 0 when the plan is not feasible (check_plan fails or it does not fit). Runs the
/// whole search again with an unbounded top list; meant for reports, not inner loops.
[[nodiscard]] int64_t rank_of(const ModelSpec& model,
                              const ClusterSpec& cluster,
                              const JobSpec& job,
                              const SearchOptions& options,
                              const Plan& plan);

}  // namespace cleave
