#pragma once
// A Backend that forwards every call to another one and times each compute kernel
// (`cleave run --kernel-profile`): where the compute phase of an iteration goes, per kernel and
// per GEMM shape, to set against calibrate's microbenchmarks of the same kernels.

#include "executor/backend.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace cleave::executor {

/// One kernel (or one GEMM shape and transposition, or one collective and size) over the
/// profiled calls.
struct KernelStat {
    std::string name;  // "gemm NT 256x1024x256" (m x n x k), "all_gather 1048576 B" (the
                       // collective and its View's bytes) or the Backend method's name
    int64_t calls = 0;
    double total_s = 0.0;
    double flop = 0.0;  // GEMMs: 2 m n k per call, summed; 0 otherwise
    int64_t m = 0;      // GEMMs: the shape; 0 otherwise
    int64_t n = 0;
    int64_t k = 0;
    bool comm = false;  // a collective or send / recv (its time includes waiting for peers)

    bool operator==(const KernelStat&) const = default;
};

class ProfilingBackend final : public Backend {
public:
    /// Times the calls made through this object; `inner` must outlive it. On a queueing backend
    /// (CUDA) each timed call waits for the device (clock_s() before and after), which adds the
    /// launch latency the real run hides.
    explicit ProfilingBackend(Backend& inner)
        : be_(inner) {}

    /// Drops what was recorded so far (call after the warm-up iterations).
    void reset() {
        stats_.clear();
        events_.clear();
    }

    /// Also keeps every timed call as an event (`cleave run --trace`: kernel by kernel).
    void record_events(bool on) { record_ = on; }

    struct Event {
        std::string name;  // the KernelStat key: "gemm NT 256x1024x256", "norm_fwd", ...
        double t0_s = 0.0;  // backend clock
        double t1_s = 0.0;
        bool comm = false;
    };

    [[nodiscard]] const std::vector<Event>& events() const { return events_; }

    /// Per kernel, most total time first.
    [[nodiscard]] std::vector<KernelStat> stats() const;

    // ---- forwarded ------------------------------------------------------------------------
    [[nodiscard]] std::string name() const override { return be_.name(); }

    [[nodiscard]] int device_count() const override { return be_.device_count(); }

    [[nodiscard]] std::string device_name() const override { return be_.device_name(); }

    [[nodiscard]] int world_rank() const override { return be_.world_rank(); }

    [[nodiscard]] int world_size() const override { return be_.world_size(); }

    [[nodiscard]] View alloc(int64_t count) override { return be_.alloc(count); }

    [[nodiscard]] View alloc_uninit(int64_t count) override { return be_.alloc_uninit(count); }

    void free(View v) override { be_.free(v); }

    [[nodiscard]] int64_t bytes_in_use() const override { return be_.bytes_in_use(); }

    [[nodiscard]] int64_t peak_bytes() const override { return be_.peak_bytes(); }

    void reset_peak() override { be_.reset_peak(); }

    void upload(View dst, std::span<const float> src) override { be_.upload(dst, src); }

    void download(std::span<float> dst, View src) override { be_.download(dst, src); }

    [[nodiscard]] Group create_group(int color, int key, const std::string& label) override {
        return be_.create_group(color, key, label);
    }

    [[nodiscard]] int group_size(Group g) const override { return be_.group_size(g); }

    [[nodiscard]] int group_rank(Group g) const override { return be_.group_rank(g); }

    void all_reduce(Group g, View x, ReduceOp op) override;

    void all_gather(Group g, View in, View out) override;

    void reduce_scatter(Group g, View in, View out) override;

    void broadcast(Group g, View x, int root) override { be_.broadcast(g, x, root); }

    void send(Group g, View x, int peer, int tag) override;

    void recv(Group g, View x, int peer, int tag) override;

    void all_to_all_v(Group g,
                      View send,
                      std::span<const int64_t> send_counts,
                      View recv,
                      std::span<const int64_t> recv_counts) override;

    void gather_rows(View x, int64_t cols, std::span<const int64_t> rows, View out) override;

    [[nodiscard]] View pack_activation(View x) override { return be_.pack_activation(x); }

    [[nodiscard]] View unpack_activation(View x) override { return be_.unpack_activation(x); }

    [[nodiscard]] PendingRecv recv_start(Group g, View x, int peer, int tag) override {
        return be_.recv_start(g, x, peer, tag);
    }

    void recv_wait(const PendingRecv& r) override;

    void all_reduce_start(Group g, View x) override { be_.all_reduce_start(g, x); }

    double all_reduce_wait() override { return be_.all_reduce_wait(); }

    void synchronize() override { be_.synchronize(); }

    [[nodiscard]] double clock_s() override { return be_.clock_s(); }

    // ---- timed ----------------------------------------------------------------------------
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

    [[nodiscard]] int64_t
    attention_saved_size(int64_t seq, int64_t batch, int64_t heads) const override {
        return be_.attention_saved_size(seq, batch, heads);
    }

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

private:
    // Returns the key's entry after adding one call of f's time.
    template <class F>
    KernelStat& timed(const std::string& key, double flop, F&& f);

    Backend& be_;
    std::map<std::string, KernelStat> stats_;
    bool record_ = false;
    std::vector<Event> events_;
};

}  // namespace cleave::executor
