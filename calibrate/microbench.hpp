#pragma once
// Microbenchmarks of one machine through the executor's Backend (STYLE S5): GEMM throughput over
// transformer-like shapes, streaming memory bandwidth, and the collectives the executor uses over
// every group size. Every function is collective over the backend's world (all ranks call it, in
// the same order) so that ranks contend for the machine exactly as they do in `cleave run`; each
// time reported is the slowest rank's.

#include "costmodel/collectives.hpp"
#include "executor/backend.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace cleave::calibrate {

/// Progress: (what, done, total). Called on every rank; the caller decides who prints.
using ProgressFn = std::function<void(std::string_view what, int64_t done, int64_t total)>;

struct BenchOptions {
    bool quick = false;  // a few sizes and short timings: seconds in all (tests)
    ProgressFn progress;
};

/// One GEMM shape, op(A)[m x k] * op(B)[k x n], timed as the mean of its three variants: NN
/// (forward), NT (data gradient) and TN (weight gradient), the mix a training step runs.
struct GemmSample {
    int64_t m = 0;
    int64_t n = 0;
    int64_t k = 0;
    double t_s = 0.0;  // one GEMM, slowest rank, median of trials

    [[nodiscard]] double flop() const {
        return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    }

    [[nodiscard]] double flop_per_s() const { return t_s > 0.0 ? flop() / t_s : 0.0; }

    bool operator==(const GemmSample&) const = default;
};

/// A streaming kernel over buffers far larger than the caches, all ranks at once.
struct StreamSample {
    std::string kernel;         // "copy" (8 B/element), "axpy" (12 B/element), "scale" (8 B)
    double bytes_per_elem = 0;  // bytes moved per element
    int64_t elems = 0;
    double t_s = 0.0;  // one pass, slowest rank, median of trials

    [[nodiscard]] double bytes_per_s() const {
        return t_s > 0.0 ? bytes_per_elem * static_cast<double>(elems) / t_s : 0.0;
    }

    bool operator==(const StreamSample&) const = default;
};

/// One collective at one nccl-tests size S (all-reduce / send-recv: the per-rank buffer;
/// all-gather / reduce-scatter: the whole gathered array) on groups of `ranks` consecutive world
/// ranks (every group runs at once).
struct CollectiveSample {
    Collective op = Collective::all_reduce;
    int64_t ranks = 0;
    double size_B = 0.0;
    double t_s = 0.0;  // one call, slowest rank, median of trials

    bool operator==(const CollectiveSample&) const = default;
};

/// `trials` passes over items 0..n-1 (pass 0: every item once, then pass 1, ...), each item's
/// result the median of its trials: `trial(t, i)` times trial t of item i. Taking turns this way,
/// a slow spell of the machine shorter than a pass costs each item at most the trial or two it
/// overlaps, and the median drops those (Clock::time_each in microbench.cpp, over the GEMM
/// shapes and the memory streams).
[[nodiscard]] std::vector<double>
medians_of_passes(int trials, size_t n, const std::function<double(int, size_t)>& trial);

/// GEMM shapes of the sweep: transformer-layer shapes (2h tokens x h) x (h x 4h, 3h or h) and
/// (2h x 4h) x (4h x h) for h = 32..512 (quick: to 128), sorted by FLOPs; gpu adds squares
/// 32..8192 (a GPU's GEMMs reach their peak only at the large end).
[[nodiscard]] std::vector<GemmSample> gemm_shapes(bool quick, bool gpu = false);

/// Times every shape of gemm_shapes(options.quick).
[[nodiscard]] std::vector<GemmSample> bench_gemm(executor::Backend& be,
                                                 const BenchOptions& options);

/// Times copy, axpy and scale over buffers of 32 MiB (quick) or 128 MiB per rank.
[[nodiscard]] std::vector<StreamSample> bench_memory(executor::Backend& be,
                                                     const BenchOptions& options);

/// The attention problem bench_kernels times (a small model's: 128 tokens, head dim 32).
struct AttentionShape {
    int64_t seq = 128;
    int64_t batch = 2;
    int64_t heads = 8;
    int64_t head_dim = 32;

    [[nodiscard]] constexpr int64_t scores() const { return batch * heads * seq * seq; }
};

inline constexpr AttentionShape attention_bench_shape{};

/// The Mamba-2 mixer bench_kernels times (a small hybrid model's: 256 tokens, 8 heads of 16,
/// 2 groups of state 16, chunk 32, conv kernel 4).
struct SsmShape {
    int64_t seq = 64;
    int64_t batch = 4;
    int64_t heads = 8;
    int64_t head_dim = 16;
    int64_t groups = 2;
    int64_t state = 16;
    int64_t chunk = 32;
    int64_t conv_kernel = 4;

    [[nodiscard]] constexpr int64_t tokens() const { return seq * batch; }
    [[nodiscard]] constexpr int64_t d_inner() const { return heads * head_dim; }
    [[nodiscard]] constexpr int64_t bc() const { return groups * state; }
};

inline constexpr SsmShape ssm_bench_shape{};

/// Times the executor's memory-bound kernels, one or more per kernel class the cost model
/// prices (costmodel/compute.hpp KernelClass): norm_fwd / norm_bwd, bias_residual_fwd / _bwd
/// (add_bias or bias_grad + the residual axpy), gelu_fwd / _bwd, swiglu_fwd / _bwd, attention
/// (attention_fwd + attention_bwd on attention_bench_shape, GEMMs included), cross_entropy
/// (xent_row_max + xent_partial + xent_bwd), adam, and ssm (a Mamba-2 layer's own kernels on
/// ssm_bench_shape, as the executor runs them: conv + SiLU of x, B and C, the SSD scan, the gated
/// RMSNorm, then their backward with the conv recomputed; the scan's products included); on
/// 1 Mi elements (attention: its scores; ssm: its tokens),
/// each with the bytes per element the cost model charges it (costmodel/compute.cpp, 4-byte
/// activations), so that bytes / time is the bandwidth these kernels reach in the cost model's
/// accounting.
[[nodiscard]] std::vector<StreamSample> bench_kernels(executor::Backend& be,
                                                      const BenchOptions& options);

/// The ranks' jitter at synchronisation points: `segments` compute segments (one 256 x 256 x 256
/// GEMM each, about a millisecond on a CPU core) with a one-element all-reduce over the world
/// after each, against the segments alone and the all-reduces alone; every rank at once, times of
/// the slowest rank, summed over rounds (and each round's wait share kept apart).
struct SyncSample {
    int64_t segments = 0;
    double with_sync_s = 0.0;     // segments, each followed by an all-reduce
    double without_sync_s = 0.0;  // the segments alone
    double collectives_s = 0.0;   // the all-reduces alone
    /// Each round's (with - without - collectives) / without: the wait as a share of the compute.
    std::vector<double> round_fractions;

    /// NodeSpec::sync_wait_fraction: the median of round_fractions (a stall of the machine lands
    /// in one round of several, where the sums above would carry it), at least 0; with no rounds
    /// kept, the sums' share. 0 when nothing was measured.
    [[nodiscard]] double wait_fraction() const;

    bool operator==(const SyncSample&) const = default;
};

/// Measures SyncSample over 9 rounds of 256 segments (quick: 5 rounds of 64). Zero segments on one
/// rank (nothing to wait for).
[[nodiscard]] SyncSample bench_sync(executor::Backend& be, const BenchOptions& options);

/// Group sizes measured on `world` ranks: the powers of two from 2 up to world, and world.
[[nodiscard]] std::vector<int64_t> group_sizes(int64_t world);

/// Times all-reduce, all-gather, reduce-scatter (every group size) and send/recv (pairs, as a
/// ping-pong) from 4 KiB to 256 MiB by x4 (quick: to 4 MiB). Empty on one rank.
[[nodiscard]] std::vector<CollectiveSample> bench_collectives(executor::Backend& be,
                                                              const BenchOptions& options);

}  // namespace cleave::calibrate
