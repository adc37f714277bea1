#pragma once
// The reference backend (STYLE S5.2): Eigen GEMMs, plain loops for the element-wise ops, MPI
// collectives between mpirun ranks. Always built.

#include "executor/backend.hpp"
#include "executor/mpi_util.hpp"

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace cleave::executor {

/// Creates the CPU backend. Precondition: MPI is initialised.
[[nodiscard]] std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options);

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(const BackendOptions& options);
    ~CpuBackend() override;

    [[nodiscard]] std::string name() const override { return "cpu"; }

    [[nodiscard]] int device_count() const override { return 1; }

    [[nodiscard]] std::string device_name() const override;

    [[nodiscard]] int world_rank() const override { return groups_.world_rank(); }

    [[nodiscard]] int world_size() const override { return groups_.world_size(); }

    [[nodiscard]] View alloc(int64_t count) override;
    [[nodiscard]] View alloc_uninit(int64_t count) override;
    void free(View v) override;
    [[nodiscard]] View pack_activation(View x) override;
    [[nodiscard]] View unpack_activation(View x) override;

    [[nodiscard]] int64_t bytes_in_use() const override { return in_use_B_; }

    [[nodiscard]] int64_t peak_bytes() const override { return peak_B_; }

    void reset_peak() override { peak_B_ = in_use_B_; }

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
    // Mamba-2 and squared ReLU (issue 26): the host kernels on this backend's own memory
    // (executor/cpu/cpu_ssm.cpp), without the copies of Backend's defaults.
    void squared_relu_fwd(View x, View y) override;
    void squared_relu_bwd(View x, View dy, View dx) override;
    void causal_conv1d_fwd(View x,
                           int64_t seq,
                           int64_t batch,
                           int64_t channels,
                           int64_t kernel,
                           View w,
                           View bias,
                           View y) override;
    void causal_conv1d_bwd(View x,
                           View dy,
                           int64_t seq,
                           int64_t batch,
                           int64_t channels,
                           int64_t kernel,
                           View w,
                           View dx,
                           View dw,
                           View dbias) override;
    void silu_fwd(View x, View y) override;
    void silu_bwd(View x, View dy, View dx) override;
    void ssd_fwd(const SsdShape& s,
                 View x,
                 View dt_raw,
                 View dt_bias,
                 View a_log,
                 View b,
                 View c,
                 View d,
                 View y) override;
    void ssd_bwd(const SsdShape& s,
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
                 View dd) override;
    void gated_rmsnorm_fwd(View y,
                           View z,
                           int64_t rows,
                           int64_t cols,
                           int64_t group,
                           View gamma,
                           float eps,
                           View out,
                           View rstd) override;
    void gated_rmsnorm_bwd(View dout,
                           View y,
                           View z,
                           int64_t rows,
                           int64_t cols,
                           int64_t group,
                           View gamma,
                           View rstd,
                           View dy,
                           View dz,
                           View dgamma) override;

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
    void all_to_all_v(Group g,
                      View send,
                      std::span<const int64_t> send_counts,
                      View recv,
                      std::span<const int64_t> recv_counts) override;
    void gather_rows(View x, int64_t cols, std::span<const int64_t> rows, View out) override;

    void synchronize() override;
    [[nodiscard]] double clock_s() override;

private:
    struct PendingSend {
        MPI_Request req = MPI_REQUEST_NULL;
        std::vector<float> staged;
        Group group;
        int peer = 0;
        int tag = 0;
    };

    void retire_completed_sends();
    View take(int64_t count, bool zero);

    detail::MpiGroups groups_;
    std::unordered_map<const float*, int64_t> allocations_;  // live block -> bytes asked for
    /// Freed blocks by rounded size, reused by the next alloc() of that size. Every iteration
    /// allocates the same sizes; handing them back to glibc made large blocks (mmap'd) page-fault
    /// afresh each time (~16 ms per 10 MB on the development machine, a quarter of a 1-rank
    /// iteration). The GPU backend's pool does the same.
    std::unordered_multimap<int64_t, float*> cached_;
    bool poison_uninit_ = false;
    bool emulate_packing_ = false;
    std::unordered_map<const float*, std::vector<float>> packed_;  // emulate_packing only
    int64_t in_use_B_ = 0;
    int64_t peak_B_ = 0;
    std::vector<PendingSend> sends_;
};

}  // namespace cleave::executor
