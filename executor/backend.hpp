#pragma once
// The executor's one backend interface (STYLE S5.1): memory, the math a transformer training step
// needs, collectives on per-group communicators, and a clock. The workload (executor/workload.*)
// is written against this interface only, so every backend runs the very same training step and
// is checked against the CPU reference (ggml test-backend-ops style).
//
// Conventions, for every backend:
// * Element type is fp32 everywhere. Matrices are row-major and contiguous.
// * A `View` is a non-owning (pointer, element count) pair into backend memory: host memory on the
//   CPU backend, device memory on the CUDA backend. The workload never dereferences a View's
//   pointer; it moves data with upload()/download().
// * Operations are stream-ordered: a backend may queue them and return early (CUDA), or run them
//   at once (CPU). download(), clock_s(), synchronize() and every communication call that returns
//   a host value observe all previously issued work.
// * "accumulate" outputs (weight gradients) are added to: out += result. Everything else is
//   overwritten.
// * Activations use Megatron's [seq, batch, hidden] layout ("sbh"): row r = s * batch + b. A
//   sequence-parallel shard is therefore a contiguous block of rows.
// * Shapes are preconditions: a backend checks View sizes with CLEAVE_ASSERT (a programming error,
//   never user input). Runtime failures of MPI / CUDA / cuBLAS / NCCL throw BackendError whose
//   message holds the failed call, file:line and the library's error string.

#include "core/errors.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace cleave::executor {

/// A non-owning window of `size` fp32 elements of backend memory.
struct View {
    float* data = nullptr;
    int64_t size = 0;

    /// Elements [offset, offset + count) of this view. Precondition: the range lies inside.
    [[nodiscard]] View slice(int64_t offset, int64_t count) const {
        CLEAVE_ASSERT(offset >= 0 && count >= 0 && offset + count <= size,
                      "View::slice out of range");
        return {data + offset, count};
    }
};

enum class Trans { no, yes };
enum class ReduceOp { sum, max };
enum class NormType { layernorm, rmsnorm };

/// A communicator for one process group (one DP, TP, PP or embedding group), created by
/// Backend::create_group(). `id` indexes the backend's table of communicators; groups are never
/// shared between different kinds of traffic (STYLE S5.5).
struct Group {
    int id = -1;
};

/// A receive posted by Backend::recv_start() and completed by Backend::recv_wait() (issue 17:
/// pipeline receives posted a step early). `id` is the backend's handle (-1: nothing posted, the
/// wait runs a plain recv()).
struct PendingRecv {
    Group group;
    View x;
    int peer = 0;
    int tag = 0;
    int64_t id = -1;
};

/// Thrown when a collective or transfer does not complete within BackendOptions::timeout_s. The
/// message names the world rank, the group, the operation and the peer; the caller (cleave run)
/// prints it and aborts the whole job (MPI_Abort). Before throwing, a GPU backend aborts its
/// NCCL communicators (ncclCommAbort) so no kernel stays blocked.
class CommTimeout : public BackendError {
public:
    using BackendError::BackendError;
};

/// The arithmetic of the dense GEMMs (issue 17). fp32: plain fp32 (the CPU reference; the CPU
/// backend runs nothing else). bf16 / fp16: tensor-core products of operands rounded to
/// bf16 / fp16 with fp32 accumulation (cuBLAS CUBLAS_COMPUTE_32F_FAST_16BF / _16F); tensors stay
/// fp32 in memory, and weights, gradients and Adam's moments are fp32 (the master copy).
enum class GemmPrecision { fp32, bf16, fp16 };

/// Sizes of one Mamba-2 SSD scan on one rank (issue 26): this rank's heads and groups (TP
/// splits both, Megatron-Core mamba_mixer.py).
struct SsdShape {
    int64_t seq = 0;
    int64_t batch = 0;
    int64_t heads = 0;     // H: heads of this rank
    int64_t head_dim = 0;  // P
    int64_t groups = 0;    // G: B / C groups of this rank; heads / groups heads share one
    int64_t state = 0;     // N
    int64_t chunk = 0;     // Q: the SSD chunk length; the last chunk may be shorter

    [[nodiscard]] int64_t rows() const { return seq * batch; }

    [[nodiscard]] int64_t chunks() const { return (seq + chunk - 1) / chunk; }

    bool operator==(const SsdShape&) const = default;
};

struct BackendOptions {
    /// Seconds any single collective / send / recv may take before CommTimeout; <= 0 = no limit.
    double timeout_s = 0.0;
    /// Fill every alloc_uninit() block with NaN (CPU backend; tests use it to prove that the
    /// workload writes each such buffer before reading it).
    bool poison_uninit = false;
    /// GEMM arithmetic; a backend that cannot run it throws ConfigError from its factory.
    GemmPrecision precision = GemmPrecision::fp32;
    /// Flash-style attention: one kernel, online softmax, no seq x seq buffer; the saved state
    /// is one log-sum-exp per query row (attention_saved_size()). CUDA backend only.
    bool fused_attention = false;
    /// CPU backend, tests only (issue 17): pack_activation() keeps the values on the host,
    /// rounded to bf16, and fills the buffer with NaN until unpack_activation() restores them,
    /// so a run proves that the workload reads no saved tensor while it is packed.
    bool emulate_packing = false;
};

/// Abstract backend. One instance per process (one rank per process under mpirun / srun).
/// Preconditions for construction: MPI is initialised (MPI_Init_thread) by the caller and stays
/// initialised for the backend's lifetime; the backend uses MPI_COMM_WORLD only to split groups
/// and to bootstrap device communicators, never for workload traffic.
class Backend {
public:
    virtual ~Backend() = default;
    Backend() = default;
    Backend(const Backend&) = delete;
    Backend& operator=(const Backend&) = delete;

    // ---- identity ------------------------------------------------------------------------------

    /// "cpu" or "cuda".
    [[nodiscard]] virtual std::string name() const = 0;
    /// Devices this process can see (CPU: 1). The CUDA backend binds to local_rank % count.
    [[nodiscard]] virtual int device_count() const = 0;
    /// Human-readable device name ("x86_64 CPU, 2 threads", "NVIDIA H100 80GB HBM3").
    [[nodiscard]] virtual std::string device_name() const = 0;
    [[nodiscard]] virtual int world_rank() const = 0;
    [[nodiscard]] virtual int world_size() const = 0;

    // ---- memory (every allocation is tracked) --------------------------------------------------

    /// Allocates `count` fp32 elements, zero-filled. Throws BackendError when out of memory.
    [[nodiscard]] virtual View alloc(int64_t count) = 0;

    /// As alloc(), but the contents are unspecified: for buffers every element of which is
    /// written before it is read (activations, GEMM outputs, receive buffers), so a backend may
    /// skip the zero fill a training framework's allocator does not do either. Released with
    /// free(). The default zero-fills (alloc()).
    [[nodiscard]] virtual View alloc_uninit(int64_t count) { return alloc(count); }

    /// Stores the activation x, a whole allocation kept for the backward, in the backend's
    /// activation type (issue 17): a GPU backend running bf16 / fp16 GEMMs rounds it to 16 bits
    /// and returns a new allocation of x.size 2-byte elements (x is freed). A packed view may be
    /// passed only to unpack_activation() and free(). Packing a packed view, or any view on a
    /// backend that stores fp32 (the default, and the CPU backend), returns it unchanged.
    [[nodiscard]] virtual View pack_activation(View x) { return x; }

    /// The inverse of pack_activation(): a new fp32 allocation holding the (rounded) values; the
    /// packed one is freed. A view that is not packed is returned unchanged.
    [[nodiscard]] virtual View unpack_activation(View x) { return x; }

    /// Releases a view returned by alloc() (the whole view, not a slice). Null views are ignored.
    /// Must not throw: it runs in destructors (a GPU backend uses its _NOEXCEPT check, S4.3).
    virtual void free(View v) = 0;
    /// Bytes currently allocated through alloc().
    [[nodiscard]] virtual int64_t bytes_in_use() const = 0;
    /// High-water mark of bytes_in_use() since construction or reset_peak() (GPU: the caching
    /// allocator's high-water mark if it keeps one, else the tracked figure).
    [[nodiscard]] virtual int64_t peak_bytes() const = 0;
    virtual void reset_peak() = 0;

    /// dst <- src (host to backend). Precondition: src.size() == dst.size.
    virtual void upload(View dst, std::span<const float> src) = 0;
    /// dst <- src (backend to host); waits for prior work. Precondition: sizes equal.
    virtual void download(std::span<float> dst, View src) = 0;
    /// dst <- src, backend to backend. Precondition: sizes equal.
    virtual void copy(View dst, View src) = 0;
    /// Every element of x <- value.
    virtual void fill(View x, float value) = 0;

    // ---- dense math ----------------------------------------------------------------------------

    /// C[m,n] = alpha * op(A) * op(B) + beta * C, row-major and contiguous. op(A) is m x k (A is
    /// stored m x k, or k x m when ta == yes); op(B) is k x n (stored k x n, or n x k). beta == 0
    /// overwrites C even if it held NaN.
    virtual void gemm(Trans ta,
                      Trans tb,
                      int64_t m,
                      int64_t n,
                      int64_t k,
                      float alpha,
                      View a,
                      View b,
                      float beta,
                      View c) = 0;
    /// y += alpha * x (element-wise). Precondition: equal sizes.
    virtual void axpy(float alpha, View x, View y) = 0;
    /// x *= alpha.
    virtual void scale(View x, float alpha) = 0;
    /// x[r, :] += bias for every row r of the rows x cols matrix x.
    virtual void add_bias(View x, int64_t rows, int64_t cols, View bias) = 0;
    /// dbias += sum over rows of dy (rows x cols); the gradient of add_bias.
    virtual void bias_grad(View dy, int64_t rows, int64_t cols, View dbias) = 0;

    // ---- embeddings (also used for learned position tables) ------------------------------------

    /// For each row i of out (ids.size() x cols): when ids[i] lies in [row_begin, row_begin +
    /// table_rows), out[i] (+)= table[ids[i] - row_begin]; otherwise out[i] = 0 (or unchanged when
    /// accumulating). This is Megatron's vocab-parallel embedding: each TP rank holds the rows
    /// [row_begin, row_begin + table_rows) and the partial results are summed across TP. `ids` is
    /// host memory.
    virtual void embedding_fwd(std::span<const int32_t> ids,
                               View table,
                               int64_t row_begin,
                               int64_t table_rows,
                               int64_t cols,
                               View out,
                               bool accumulate) = 0;
    /// dtable[ids[i] - row_begin] += dy[i] for the ids in range (the gradient of embedding_fwd).
    virtual void embedding_bwd(std::span<const int32_t> ids,
                               View dy,
                               int64_t row_begin,
                               int64_t table_rows,
                               int64_t cols,
                               View dtable) = 0;

    // ---- normalisation -------------------------------------------------------------------------

    /// Row-wise norm of x (rows x cols) into y. layernorm: y = (x - mean) * rstd * gamma + beta;
    /// rmsnorm: y = x * rstd * gamma with rstd = 1/sqrt(mean(x^2) + eps) and beta unused (may be
    /// an empty View). Saves mean (layernorm; rows elements, untouched for rmsnorm) and rstd (rows
    /// elements) for the backward.
    virtual void norm_fwd(NormType type,
                          View x,
                          int64_t rows,
                          int64_t cols,
                          View gamma,
                          View beta,
                          float eps,
                          View y,
                          View mean,
                          View rstd) = 0;
    /// Gradient of norm_fwd: dx = d/dx (overwritten); dgamma += ...; dbeta += ... (layernorm only).
    virtual void norm_bwd(NormType type,
                          View dy,
                          View x,
                          int64_t rows,
                          int64_t cols,
                          View gamma,
                          View mean,
                          View rstd,
                          View dx,
                          View dgamma,
                          View dbeta) = 0;

    // ---- activations ---------------------------------------------------------------------------

    /// y = gelu(x), tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    virtual void gelu_fwd(View x, View y) = 0;
    /// dx = dy * gelu'(x).
    virtual void gelu_bwd(View x, View dy, View dx) = 0;
    /// y = silu(gate) * up, silu(g) = g / (1 + exp(-g)).
    virtual void swiglu_fwd(View gate, View up, View y) = 0;
    /// dgate = dy * up * silu'(gate); dup = dy * silu(gate).
    virtual void swiglu_bwd(View gate, View up, View dy, View dgate, View dup) = 0;
    /// y = max(x, 0)^2 (Nemotron-H's MLPs, Megatron --squared-relu). The default goes through
    /// host memory (executor/backend_host.cpp), as do all the Mamba-2 operations below.
    virtual void squared_relu_fwd(View x, View y);
    /// dx = 2 max(x, 0) dy.
    virtual void squared_relu_bwd(View x, View dy, View dx);

    // ---- Mamba-2 (issue 26; the formulas in executor/ssm_kernels.hpp) -------------------------

    /// Depthwise causal conv1d along the sequence of x [seq * batch, channels] with taps w
    /// [kernel, channels] and bias [channels] into y.
    virtual void causal_conv1d_fwd(View x,
                                   int64_t seq,
                                   int64_t batch,
                                   int64_t channels,
                                   int64_t kernel,
                                   View w,
                                   View bias,
                                   View y);
    /// Its gradient: dx overwritten, dw and dbias accumulated.
    virtual void causal_conv1d_bwd(View x,
                                   View dy,
                                   int64_t seq,
                                   int64_t batch,
                                   int64_t channels,
                                   int64_t kernel,
                                   View w,
                                   View dx,
                                   View dw,
                                   View dbias);
    /// y = x sigmoid(x).
    virtual void silu_fwd(View x, View y);
    /// dx = dy silu'(x); dx may be dy.
    virtual void silu_bwd(View x, View dy, View dx);
    /// The chunked SSD scan: x, y [rows, H P]; dt_raw [rows, H]; b, c [rows, G N]; dt_bias,
    /// a_log, d [H].
    virtual void ssd_fwd(const SsdShape& s,
                         View x,
                         View dt_raw,
                         View dt_bias,
                         View a_log,
                         View b,
                         View c,
                         View d,
                         View y);
    /// Its gradient: dx, ddt_raw, db, dc overwritten; ddt_bias, da_log, dd accumulated.
    virtual void ssd_bwd(const SsdShape& s,
                         View x,
                         View dt_raw,
                         View dt_bias,
                         View a_log,
                         View b,
                         View c,
                         View d,
                         View dy,
                         View dx,
                         View ddt_raw,
                         View db,
                         View dc,
                         View ddt_bias,
                         View da_log,
                         View dd);
    /// Gated RMSNorm, gate first: out = rmsnorm_group(y silu(z)) gamma; rstd [rows, cols /
    /// group] saved.
    virtual void gated_rmsnorm_fwd(View y,
                                   View z,
                                   int64_t rows,
                                   int64_t cols,
                                   int64_t group,
                                   View gamma,
                                   float eps,
                                   View out,
                                   View rstd);
    /// Its gradient: dy, dz overwritten; dgamma accumulated.
    virtual void gated_rmsnorm_bwd(View dout,
                                   View y,
                                   View z,
                                   int64_t rows,
                                   int64_t cols,
                                   int64_t group,
                                   View gamma,
                                   View rstd,
                                   View dy,
                                   View dz,
                                   View dgamma);

    // ---- attention -----------------------------------------------------------------------------

    /// Rotary position embedding in place on x, laid out [seq, batch, heads * head_dim] (rows =
    /// seq * batch). Row r has position first_pos + r / batch. Pairs (2i, 2i+1) of each head rotate
    /// by angle pos * 10000^(-2i/head_dim); inverse == true rotates by the negative angle (the
    /// backward of the forward rotation). Precondition: head_dim even.
    virtual void rope(View x,
                      int64_t seq,
                      int64_t batch,
                      int64_t heads,
                      int64_t head_dim,
                      int64_t first_pos,
                      bool inverse) = 0;

    /// Elements of the `probs` buffer that attention_fwd saves for attention_bwd: the
    /// probabilities, batch * heads * seq * seq, unless the backend runs fused attention (one
    /// log-sum-exp per query row: batch * heads * seq).
    [[nodiscard]] virtual int64_t
    attention_saved_size(int64_t seq, int64_t batch, int64_t heads) const {
        return batch * heads * seq * seq;
    }

    /// Causal scaled dot-product attention, out = softmax(q k^T / sqrt(head_dim) + causal mask) v,
    /// per batch element and head. q and out: [seq, batch, heads * head_dim]; k and v: [seq,
    /// batch, kv_heads * head_dim]; query head h reads kv head h / (heads / kv_heads) (GQA).
    /// Saves the probabilities in probs: [batch, heads, seq, seq] (upper triangle zero), or,
    /// fused, the log-sum-exp of each query row's scaled scores: [batch, heads, seq].
    virtual void attention_fwd(View q,
                               View k,
                               View v,
                               int64_t seq,
                               int64_t batch,
                               int64_t heads,
                               int64_t kv_heads,
                               int64_t head_dim,
                               View probs,
                               View out) = 0;
    /// Gradient of attention_fwd given dout; dq, dk, dv are overwritten (dk, dv summed over the
    /// query heads that share a kv head).
    virtual void attention_bwd(View q,
                               View k,
                               View v,
                               View probs,
                               View dout,
                               int64_t seq,
                               int64_t batch,
                               int64_t heads,
                               int64_t kv_heads,
                               int64_t head_dim,
                               View dq,
                               View dk,
                               View dv) = 0;

    // ---- vocab-parallel cross-entropy (Megatron) ----------------------------------------------
    // logits: rows x cols, this rank's vocabulary columns [col_begin, col_begin + cols). The
    // caller all-reduces row_max (max) between xent_row_max and xent_partial, and sum_exp and
    // target_logit (sum) after xent_partial, over the TP group. Loss per row =
    // log(sum_exp) + row_max - target_logit, computed on the host.

    /// row_max[r] = max over this rank's columns of logits[r, :].
    virtual void xent_row_max(View logits, int64_t rows, int64_t cols, View row_max) = 0;
    /// sum_exp[r] = sum_c exp(logits[r, c] - row_max[r]); target_logit[r] = logits[r, targets[r]
    /// - col_begin] when the target is one of this rank's columns, else 0. targets: host memory.
    virtual void xent_partial(View logits,
                              int64_t rows,
                              int64_t cols,
                              int64_t col_begin,
                              std::span<const int32_t> targets,
                              View row_max,
                              View sum_exp,
                              View target_logit) = 0;
    /// dlogits[r, c] = scale * (exp(logits[r, c] - row_max[r]) / sum_exp[r] - [c is the target])
    /// with the globally reduced row_max and sum_exp. May alias logits (in-place).
    virtual void xent_bwd(View logits,
                          int64_t rows,
                          int64_t cols,
                          int64_t col_begin,
                          std::span<const int32_t> targets,
                          View row_max,
                          View sum_exp,
                          float scale,
                          View dlogits) = 0;

    // ---- optimizer -----------------------------------------------------------------------------

    /// One Adam step (Kingma & Ba 2015, Alg. 1, bias-corrected; decoupled weight decay as AdamW,
    /// Loshchilov & Hutter 2019) on n = w.size elements: m = b1 m + (1-b1) g; v = b2 v + (1-b2)
    /// g^2; w -= lr (m / (1-b1^step) / (sqrt(v / (1-b2^step)) + eps) + weight_decay w).
    /// step >= 1.
    virtual void adam(View w,
                      View g,
                      View m,
                      View v,
                      float lr,
                      float beta1,
                      float beta2,
                      float eps,
                      float weight_decay,
                      int64_t step) = 0;

    // ---- communication -------------------------------------------------------------------------
    // Every call below is checked and bounded by BackendOptions::timeout_s (CommTimeout). Groups
    // are communicators of their own (CPU: MPI_Comm_split; CUDA: an NCCL communicator whose
    // ncclUniqueId is broadcast over that MPI sub-communicator).

    /// Collective over the whole world: ranks passing the same `color` form one group, ordered by
    /// `key`. `label` names the group in error messages ("tp", "dp", "pp", "embedding"). Every
    /// rank must call it, in the same order. Returns the handle used by the calls below.
    [[nodiscard]] virtual Group create_group(int color, int key, const std::string& label) = 0;
    [[nodiscard]] virtual int group_size(Group g) const = 0;
    [[nodiscard]] virtual int group_rank(Group g) const = 0;

    /// In-place all-reduce of x over the group.
    virtual void all_reduce(Group g, View x, ReduceOp op) = 0;
    /// out = concat over group ranks (in rank order) of in; out.size == in.size * group_size.
    virtual void all_gather(Group g, View in, View out) = 0;
    /// out = rank's block of the element-wise sum of in over the group; in.size == out.size *
    /// group_size, blocks in rank order.
    virtual void reduce_scatter(Group g, View in, View out) = 0;
    /// x on every rank <- x on group rank `root`.
    virtual void broadcast(Group g, View x, int root) = 0;
    /// Sends x to group rank `peer`. Returns as soon as x may be reused (the backend stages a
    /// copy); it never waits for the matching recv, so two ranks may send to each other first
    /// without deadlock. Messages between a pair are matched by `tag` (>= 0, < 32768).
    virtual void send(Group g, View x, int peer, int tag) = 0;
    /// Receives into x from group rank `peer` with `tag`; blocks (bounded by the timeout).
    virtual void recv(Group g, View x, int peer, int tag) = 0;

    /// All-to-all with per-peer counts (MPI_Alltoallv; issue 16, the expert-parallel token
    /// dispatch and combine): `send` holds send_counts[p] elements for each group rank p, in rank
    /// order, and `recv` receives recv_counts[p] elements from each p, in rank order. Both spans
    /// have group_size entries; what p sends to q equals what q expects from p (the caller
    /// exchanges the counts first). Zero counts are allowed.
    virtual void all_to_all_v(Group g,
                              View send,
                              std::span<const int64_t> send_counts,
                              View recv,
                              std::span<const int64_t> recv_counts) = 0;

    /// out[i, :] = x[rows[i], :] for the rows.size() x cols matrix out (a row permutation or
    /// selection; issue 16, the MoE dispatch order). `rows` is host memory; every index lies in x.
    /// The default goes through host memory (download, permute, upload).
    virtual void gather_rows(View x, int64_t cols, std::span<const int64_t> rows, View out) {
        CLEAVE_ASSERT(out.size == static_cast<int64_t>(rows.size()) * cols,
                      "gather_rows: out.size != rows * cols");
        std::vector<float> in(static_cast<size_t>(x.size));
        download(in, x);
        std::vector<float> host(static_cast<size_t>(out.size));
        for (size_t i = 0; i < rows.size(); ++i) {
            CLEAVE_ASSERT(rows[i] >= 0 && (rows[i] + 1) * cols <= x.size, "gather_rows: bad row");
            for (int64_t c = 0; c < cols; ++c) {
                host[i * static_cast<size_t>(cols) + static_cast<size_t>(c)] =
                    in[static_cast<size_t>(rows[i] * cols + c)];
            }
        }
        upload(out, host);
    }

    /// Posts a receive into x from group rank `peer` with `tag` and returns at once (issue 17:
    /// the pipeline posts the next step's receive before the current step's compute). x must
    /// not be touched until recv_wait(). Receives from one peer of one group are waited for in
    /// the order they were posted, and no plain recv() from that peer is issued in between. A
    /// GPU backend runs the receive on a stream of its own; the default only records the call.
    [[nodiscard]] virtual PendingRecv recv_start(Group g, View x, int peer, int tag) {
        return {g, x, peer, tag, -1};
    }

    /// Completes a recv_start(): work issued after this call sees the received data. A GPU
    /// backend makes its compute stream wait for the receive (the host does not wait; a wrong
    /// tag or a timeout is reported by the next call that waits on the host). The default runs
    /// recv() now (blocks, bounded by the timeout).
    virtual void recv_wait(const PendingRecv& r) { recv(r.group, r.x, r.peer, r.tag); }

    /// Starts an in-place sum all-reduce of x over g that may overlap with the work issued
    /// after it (issue 17: DP gradient buckets during the backward). A GPU backend runs it on a
    /// stream and a communicator of its own (groups labelled "dp"); x must not be touched until
    /// all_reduce_wait(). Every rank of g starts the same buckets in the same order. The
    /// default runs all_reduce() at once.
    virtual void all_reduce_start(Group g, View x) { all_reduce(g, x, ReduceOp::sum); }

    /// Waits (bounded by the timeout) until every all_reduce_start() is done; work issued later
    /// sees the results. Returns the seconds those all-reduces ran hidden behind other work:
    /// their device time minus the time this call waited (0 for the synchronous default).
    virtual double all_reduce_wait() { return 0.0; }

    // ---- time ----------------------------------------------------------------------------------

    /// Waits for all queued work on this rank, including outstanding sends (bounded by the
    /// timeout).
    virtual void synchronize() = 0;
    /// Waits for queued compute (not for outstanding sends), then returns a monotonic wall clock
    /// in seconds. Differences of two calls time the work issued between them.
    [[nodiscard]] virtual double clock_s() = 0;
};

/// Tag for Buffer's constructor that allocates with Backend::alloc_uninit().
struct Uninitialized {};

inline constexpr Uninitialized uninitialized{};

/// RAII owner of one allocation of `backend`.
class Buffer {
public:
    Buffer() = default;

    /// `count` zero-filled elements (Backend::alloc).
    Buffer(Backend& backend, int64_t count)
        : backend_(&backend)
        , view_(backend.alloc(count)) {}

    /// `count` elements of unspecified contents (Backend::alloc_uninit): every element must be
    /// written before it is read.
    Buffer(Backend& backend, int64_t count, Uninitialized /*tag*/)
        : backend_(&backend)
        , view_(backend.alloc_uninit(count)) {}

    ~Buffer() { reset(); }

    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    Buffer(Buffer&& o) noexcept
        : backend_(o.backend_)
        , view_(o.view_) {
        o.view_ = {};
    }

    Buffer& operator=(Buffer&& o) noexcept {
        if (this != &o) {
            reset();
            backend_ = o.backend_;
            view_ = o.view_;
            o.view_ = {};
        }
        return *this;
    }

    [[nodiscard]] View view() const { return view_; }

    [[nodiscard]] int64_t size() const { return view_.size; }

    /// Backend::pack_activation() of this buffer (issue 17: saved activations in 16 bits
    /// between the forward and the backward). Until unpack(), only the destructor may use it.
    void pack() {
        if (backend_ != nullptr && view_.data != nullptr) {
            view_ = backend_->pack_activation(view_);
        }
    }

    /// Backend::unpack_activation(): fp32 again.
    void unpack() {
        if (backend_ != nullptr && view_.data != nullptr) {
            view_ = backend_->unpack_activation(view_);
        }
    }

    operator View() const { return view_; }  // NOLINT(google-explicit-constructor)

private:
    void reset() noexcept {
        if (backend_ != nullptr && view_.data != nullptr) {
            backend_->free(view_);
        }
        view_ = {};
    }

    Backend* backend_ = nullptr;
    View view_;
};

}  // namespace cleave::executor
