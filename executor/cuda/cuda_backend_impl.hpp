#pragma once
// The CUDA backend class (STYLE S5.3): cuBLAS GEMMs, the kernels of cuda_kernels.hpp, NCCL
// collectives. Included only by executor/cuda/*.cpp (it includes CUDA headers).
//
// Execution model: one CUDA stream ("compute") carries every kernel, GEMM, copy, collective and
// blocking receive, in issue order. Communication calls wait on the host for their own
// completion, bounded by the timeout, like the CPU backend's MPI calls; sends do not (see
// send()), nor do posted receives (recv_start / recv_wait, cuda_p2p.cpp: the receive runs on its
// channel's stream and the compute stream waits for it on the device).
//
// Memory comes from the device's stream-ordered pool (cudaMallocAsync / cudaFreeAsync on the
// compute stream), so free() never blocks the host: a plain cudaFree synchronises the device
// and would wait for a send whose receiver is itself waiting for us.
//
// Overlapped DP reduction (issue 17): all_reduce_start() puts an all-reduce on dp_stream_, after
// an event that marks the compute issued so far, on the group's second communicator
// (ncclCommSplit of the group's, created in create_group for groups labelled "dp"), so gradient
// buckets reduce while the backward goes on; all_reduce_wait() waits for the last one.
//
// Communicators (STYLE S5.5): every group gets its own NCCL communicator for collectives, whose
// ncclUniqueId is created by the group's rank 0 and broadcast over the group's MPI communicator.
// NCCL executes the operations of one communicator one after another, so a send that waits for
// its receiver would block every later operation of that communicator: two ranks that both send
// first and receive second would deadlock, which the interface allows. Point-to-point traffic
// therefore uses one extra two-rank communicator per direction between ring neighbours of the
// group (rank i -> i+1 and i -> i-1, mod size), each with its own stream for the sending side:
// a channel is a FIFO, so sends behave like MPI's buffered sends. Channels are created and
// connected eagerly in create_group() (NCCL's lazy connection setup blocks the host).

#include "executor/backend.hpp"
#include "executor/cuda/cuda_check.hpp"
#include "executor/mpi_util.hpp"

#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace cleave::executor::gpu {

class CudaBackend final : public Backend {
public:
    explicit CudaBackend(const BackendOptions& options);
    ~CudaBackend() override;

    [[nodiscard]] std::string name() const override { return "cuda"; }

    [[nodiscard]] int device_count() const override { return device_count_; }

    [[nodiscard]] std::string device_name() const override { return device_name_; }

    [[nodiscard]] int world_rank() const override { return groups_.world_rank(); }

    [[nodiscard]] int world_size() const override { return groups_.world_size(); }

    [[nodiscard]] int64_t
    attention_saved_size(int64_t seq, int64_t batch, int64_t heads) const override {
        return fused_attention_ ? batch * heads * seq : batch * heads * seq * seq;
    }

    [[nodiscard]] View alloc(int64_t count) override;
    void free(View v) override;
    [[nodiscard]] View pack_activation(View x) override;
    [[nodiscard]] View unpack_activation(View x) override;

    [[nodiscard]] int64_t bytes_in_use() const override { return in_use_B_; }

    [[nodiscard]] int64_t peak_bytes() const override;
    void reset_peak() override;

    void upload(View dst, std::span<const float> src) override;
    void download(std::span<float> dst, View src) override;
    void copy(View dst, View src) override;
    void fill(View x, float value) override;

    void gemm(Trans ta,
              Trans tb,
              int64_t m,
              int64_t n,
              int64_t k,
              float alpha,
              View a,
              View b,
              float beta,
              View c) override;
    void axpy(float alpha, View x, View y) override;
    void scale(View x, float alpha) override;
    void add_bias(View x, int64_t rows, int64_t cols, View bias) override;
    void bias_grad(View dy, int64_t rows, int64_t cols, View dbias) override;

    void embedding_fwd(std::span<const int32_t> ids,
                       View table,
                       int64_t row_begin,
                       int64_t table_rows,
                       int64_t cols,
                       View out,
                       bool accumulate) override;
    void embedding_bwd(std::span<const int32_t> ids,
                       View dy,
                       int64_t row_begin,
                       int64_t table_rows,
                       int64_t cols,
                       View dtable) override;

    void norm_fwd(NormType type,
                  View x,
                  int64_t rows,
                  int64_t cols,
                  View gamma,
                  View beta,
                  float eps,
                  View y,
                  View mean,
                  View rstd) override;
    void norm_bwd(NormType type,
                  View dy,
                  View x,
                  int64_t rows,
                  int64_t cols,
                  View gamma,
                  View mean,
                  View rstd,
                  View dx,
                  View dgamma,
                  View dbeta) override;

    void gelu_fwd(View x, View y) override;
    void gelu_bwd(View x, View dy, View dx) override;
    void swiglu_fwd(View gate, View up, View y) override;
    void swiglu_bwd(View gate, View up, View dy, View dgate, View dup) override;

    void rope(View x,
              int64_t seq,
              int64_t batch,
              int64_t heads,
              int64_t head_dim,
              int64_t first_pos,
              bool inverse) override;
    void attention_fwd(View q,
                       View k,
                       View v,
                       int64_t seq,
                       int64_t batch,
                       int64_t heads,
                       int64_t kv_heads,
                       int64_t head_dim,
                       View probs,
                       View out) override;
    void attention_bwd(View q,
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
                       View dv) override;

    void xent_row_max(View logits, int64_t rows, int64_t cols, View row_max) override;
    void xent_partial(View logits,
                      int64_t rows,
                      int64_t cols,
                      int64_t col_begin,
                      std::span<const int32_t> targets,
                      View row_max,
                      View sum_exp,
                      View target_logit) override;
    void xent_bwd(View logits,
                  int64_t rows,
                  int64_t cols,
                  int64_t col_begin,
                  std::span<const int32_t> targets,
                  View row_max,
                  View sum_exp,
                  float scale,
                  View dlogits) override;

    void adam(View w,
              View g,
              View m,
              View v,
              float lr,
              float beta1,
              float beta2,
              float eps,
              float weight_decay,
              int64_t step) override;

    [[nodiscard]] Group create_group(int color, int key, const std::string& label) override;

    [[nodiscard]] int group_size(Group g) const override { return groups_.size(g); }

    [[nodiscard]] int group_rank(Group g) const override { return groups_.rank(g); }

    void all_reduce(Group g, View x, ReduceOp op) override;
    void all_gather(Group g, View in, View out) override;
    void reduce_scatter(Group g, View in, View out) override;
    void broadcast(Group g, View x, int root) override;
    void send(Group g, View x, int peer, int tag) override;
    void recv(Group g, View x, int peer, int tag) override;
    /// Grouped ncclSend / ncclRecv with every group rank on the group's collective
    /// communicator (cuda_alltoall.cpp).
    void all_to_all_v(Group g,
                      View send,
                      std::span<const int64_t> send_counts,
                      View recv,
                      std::span<const int64_t> recv_counts) override;
    [[nodiscard]] PendingRecv recv_start(Group g, View x, int peer, int tag) override;
    void recv_wait(const PendingRecv& r) override;
    void all_reduce_start(Group g, View x) override;
    double all_reduce_wait() override;

    void synchronize() override;
    [[nodiscard]] double clock_s() override;

private:
    // One direction of a point-to-point link with a ring neighbour (group rank `peer`).
    struct Channel {
        int peer = 0;
        bool outgoing = false;
        ncclComm_t comm = nullptr;
        cudaStream_t stream = nullptr;  // sends (outgoing) or posted receives (incoming)
    };

    // A message a rank sent to itself (groups of one); staged in device memory.
    struct SelfMessage {
        float* staged = nullptr;
        int64_t count = 0;
        int tag = 0;
    };

    struct CommGroup {
        ncclComm_t comm = nullptr;
        ncclComm_t async_comm = nullptr;  // "dp" groups: all_reduce_start's communicator
        std::vector<Channel> channels;
        std::deque<SelfMessage> to_self;
    };

    struct PendingSend {
        cudaEvent_t done = nullptr;
        Group group;
        int peer = 0;
        int tag = 0;
    };

    // One recv_start() (cuda_p2p.cpp): the message lands in `staged` on the channel's stream,
    // its trailing tag in pinned_tag_[slot]; `done` marks both. recv_wait() makes the compute
    // stream wait for `done`; the tag is checked by the next host wait (check_received_tags).
    struct PostedRecv {
        int64_t id = 0;
        Group group;
        int peer = 0;
        int tag = 0;
        int64_t count = 0;
        float* staged = nullptr;
        cudaEvent_t done = nullptr;
        int slot = 0;
        bool waited = false;
    };

    // One all_reduce_start(): `ready` on the compute stream, `begin` and `end` around the
    // all-reduce on dp_stream_ (timing events).
    struct AsyncReduce {
        Group group;
        cudaEvent_t ready = nullptr;
        cudaEvent_t begin = nullptr;
        cudaEvent_t end = nullptr;
    };

    // What a host wait is waiting for, for the timeout message.
    struct WaitFor {
        Group group;  // id -1: not a communication call
        const char* op = "";
        std::string detail;
    };

    // ---- setup and teardown (cuda_backend.cpp) ----
    void bind_device();
    void release() noexcept;

    // ---- device memory helpers (cuda_backend.cpp) ----
    /// cudaMallocAsync on the compute stream, tracked (bytes_in_use, peak); OOM is BackendError.
    [[nodiscard]] float* tracked_alloc(int64_t bytes);
    [[nodiscard]] void* temp_alloc(int64_t bytes);
    void temp_free(void* p);
    /// Copies host ints to a temporary device buffer (freed with temp_free).
    [[nodiscard]] int32_t* upload_ints(std::span<const int32_t> src);

    /// Row-major C = alpha op(A) op(B) + beta C over `count` matrices with the given strides
    /// (elements) and leading dimensions (the row pitch of each stored matrix).
    struct MatrixArg {
        float* ptr = nullptr;
        int64_t ld = 0;
        int64_t stride = 0;
    };

    void gemm_batched(Trans ta,
                      Trans tb,
                      int64_t m,
                      int64_t n,
                      int64_t k,
                      float alpha,
                      MatrixArg a,
                      MatrixArg b,
                      float beta,
                      MatrixArg c,
                      int64_t count);
    /// gemm_batched in bf16 / fp16 (precision_); ld = leading dimensions of a, b, c.
    void gemm_tensor_cores(Trans ta,
                           Trans tb,
                           std::array<int64_t, 3> mnk,
                           float alpha,
                           std::array<MatrixArg, 3> abc,
                           std::array<int, 3> ld,
                           float beta,
                           int64_t count);

    // ---- waiting, timeouts, failures (cuda_comm.cpp) ----
    /// Waits on the host until everything queued on the compute stream is done.
    void wait_compute(const WaitFor& what);
    /// Polls `event` until done; checks NCCL asynchronous errors between polls; on timeout
    /// aborts every communicator and throws CommTimeout.
    void wait_event(cudaEvent_t event, const WaitFor& what);
    [[nodiscard]] std::string describe(const WaitFor& what) const;
    void check_async_errors(const WaitFor& what);
    void abort_all() noexcept;
    void require_live() const;
    [[nodiscard]] const CommGroup& comm_group(Group g) const;
    [[nodiscard]] const Channel& channel(Group g, int peer, bool outgoing) const;
    void init_channels(Group g);
    void connect_channel(Group g, const Channel& ch);
    void retire_completed_sends();
    /// Destroys the events of async_ and clears it.
    void release_async() noexcept;
    void send_to_self(Group g, View x, int tag);
    /// Checks the tags of the waited-for posted receives that are done, and forgets them;
    /// throws BackendError on a mismatch (cuda_p2p.cpp).
    void check_received_tags();
    /// " (waiting for: ...)" naming the posted receives not done yet, for timeout messages.
    [[nodiscard]] std::string pending_recv_note() const;
    [[nodiscard]] int free_tag_slot() const;
    /// Destroys the events of posted_ and clears it.
    void release_posted() noexcept;
    void recv_from_self(Group g, View x, int tag);

    detail::MpiGroups groups_;
    double timeout_s_ = 0.0;
    GemmPrecision precision_ = GemmPrecision::fp32;
    bool fused_attention_ = false;
    int device_ = 0;
    int device_count_ = 0;
    std::string device_name_;
    cudaStream_t stream_ = nullptr;
    cudaEvent_t sync_event_ = nullptr;
    cublasHandle_t cublas_ = nullptr;
    void* cublas_workspace_ = nullptr;
    cudaMemPool_t pool_ = nullptr;
    // Host landing places of received messages' tags: [0] for recv(), the rest slots for
    // posted receives (tag_slots of them).
    float* pinned_tag_ = nullptr;
    std::vector<PostedRecv> posted_;  // in posting order
    int64_t next_recv_id_ = 0;
    std::vector<CommGroup> comms_;  // indexed by Group::id
    std::vector<PendingSend> sends_;
    cudaStream_t dp_stream_ = nullptr;  // all_reduce_start's stream (created on first use)
    std::vector<AsyncReduce> async_;
    double async_waited_s_ = 0.0;  // host time all_reduce_start spent waiting for buckets
    std::unordered_map<const float*, int64_t> allocations_;
    std::unordered_set<const float*> packed_;  // allocations holding 16-bit activations
    int64_t in_use_B_ = 0;
    int64_t peak_B_ = 0;
    bool aborted_ = false;
};

/// Pinned tag slots: [0] for recv(), [1, tag_slots) for posted receives (each takes a free one),
/// so at most tag_slots - 1 posted receives may be outstanding (the pipeline posts one ahead).
inline constexpr int tag_slots = 64;

/// Element count as the int that cuBLAS takes; throws BackendError when it does not fit.
[[nodiscard]] int blas_int(int64_t n);

}  // namespace cleave::executor::gpu
