#include "executor/profiling_backend.hpp"

#include <algorithm>

namespace cleave::executor {

template <class F>
KernelStat& ProfilingBackend::timed(const std::string& key, double flop, F&& f) {
    const double t0 = be_.clock_s();
    f();
    const double t1 = be_.clock_s();
    KernelStat& s = stats_[key];
    if (s.name.empty()) {
        s.name = key;
    }
    s.calls += 1;
    s.total_s += t1 - t0;
    s.flop += flop;
    if (record_) {
        events_.push_back({key, t0, t1, false});
    }
    return s;
}

std::vector<KernelStat> ProfilingBackend::stats() const {
    std::vector<KernelStat> out;
    out.reserve(stats_.size());
    for (const auto& [key, s] : stats_) {
        out.push_back(s);
    }
    std::stable_sort(out.begin(), out.end(), [](const KernelStat& a, const KernelStat& b) {
        return a.total_s > b.total_s;
    });
    return out;
}

namespace {

std::string sized(const char* op, View v) {
    return std::string(op) + " " + std::to_string(v.size * 4) + " B";
}

}  // namespace

void ProfilingBackend::all_reduce(Group g, View x, ReduceOp op) {
    timed(sized("all_reduce", x), 0.0, [&] { be_.all_reduce(g, x, op); }).comm = true;
}

void ProfilingBackend::all_gather(Group g, View in, View out) {
    timed(sized("all_gather", out), 0.0, [&] { be_.all_gather(g, in, out); }).comm = true;
}

void ProfilingBackend::reduce_scatter(Group g, View in, View out) {
    timed(sized("reduce_scatter", in), 0.0, [&] { be_.reduce_scatter(g, in, out); }).comm = true;
}

void ProfilingBackend::all_to_all_v(Group g,
                                    View send,
                                    std::span<const int64_t> send_counts,
                                    View recv,
                                    std::span<const int64_t> recv_counts) {
    int64_t out = 0;
    for (const int64_t c : send_counts) {
        out += c;
    }
    timed("all_to_all_v " + std::to_string(out * 4) + " B", 0.0, [&] {
        be_.all_to_all_v(g, send, send_counts, recv, recv_counts);
    }).comm = true;
}

void ProfilingBackend::gather_rows(View x, int64_t cols, std::span<const int64_t> rows, View out) {
    timed(sized("gather_rows", out), 0.0, [&] { be_.gather_rows(x, cols, rows, out); });
}

void ProfilingBackend::send(Group g, View x, int peer, int tag) {
    timed(sized("send", x), 0.0, [&] { be_.send(g, x, peer, tag); }).comm = true;
}

void ProfilingBackend::recv(Group g, View x, int peer, int tag) {
    timed(sized("recv", x), 0.0, [&] { be_.recv(g, x, peer, tag); }).comm = true;
}

void ProfilingBackend::recv_wait(const PendingRecv& r) {
    timed(sized("recv", r.x), 0.0, [&] { be_.recv_wait(r); }).comm = true;
}

void ProfilingBackend::copy(View dst, View src) {
    timed("copy", 0.0, [&] { be_.copy(dst, src); });
}

void ProfilingBackend::fill(View x, float value) {
    timed("fill", 0.0, [&] { be_.fill(x, value); });
}

void ProfilingBackend::gemm(Trans ta,
                            Trans tb,
                            int64_t m,
                            int64_t n,
                            int64_t k,
                            float alpha,
                            View a,
                            View b,
                            float beta,
                            View c) {
    const std::string key = std::string("gemm ") + (ta == Trans::yes ? "T" : "N") +
                            (tb == Trans::yes ? "T" : "N") + " " + std::to_string(m) + "x" +
                            std::to_string(n) + "x" + std::to_string(k);
    const double flop =
        2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    KernelStat& s = timed(key, flop, [&] { be_.gemm(ta, tb, m, n, k, alpha, a, b, beta, c); });
    s.m = m;
    s.n = n;
    s.k = k;
}

void ProfilingBackend::axpy(float alpha, View x, View y) {
    timed("axpy", 0.0, [&] { be_.axpy(alpha, x, y); });
}

void ProfilingBackend::scale(View x, float alpha) {
    timed("scale", 0.0, [&] { be_.scale(x, alpha); });
}

void ProfilingBackend::add_bias(View x, int64_t rows, int64_t cols, View bias) {
    timed("add_bias", 0.0, [&] { be_.add_bias(x, rows, cols, bias); });
}

void ProfilingBackend::bias_grad(View dy, int64_t rows, int64_t cols, View dbias) {
    timed("bias_grad", 0.0, [&] { be_.bias_grad(dy, rows, cols, dbias); });
}

void ProfilingBackend::embedding_fwd(std::span<const int32_t> ids,
                                     View table,
                                     int64_t row_begin,
                                     int64_t table_rows,
                                     int64_t cols,
                                     View out,
                                     bool accumulate) {
    timed("embedding_fwd", 0.0, [&] {
        be_.embedding_fwd(ids, table, row_begin, table_rows, cols, out, accumulate);
    });
}

void ProfilingBackend::embedding_bwd(std::span<const int32_t> ids,
                                     View dy,
                                     int64_t row_begin,
                                     int64_t table_rows,
                                     int64_t cols,
                                     View dtable) {
    timed("embedding_bwd", 0.0, [&] {
        be_.embedding_bwd(ids, dy, row_begin, table_rows, cols, dtable);
    });
}

void ProfilingBackend::norm_fwd(NormType type,
                                View x,
                                int64_t rows,
                                int64_t cols,
                                View gamma,
                                View beta,
                                float eps,
                                View y,
                                View mean,
                                View rstd) {
    timed("norm_fwd", 0.0, [&] {
        be_.norm_fwd(type, x, rows, cols, gamma, beta, eps, y, mean, rstd);
    });
}

void ProfilingBackend::norm_bwd(NormType type,
                                View dy,
                                View x,
                                int64_t rows,
                                int64_t cols,
                                View gamma,
                                View mean,
                                View rstd,
                                View dx,
                                View dgamma,
                                View dbeta) {
    timed("norm_bwd", 0.0, [&] {
        be_.norm_bwd(type, dy, x, rows, cols, gamma, mean, rstd, dx, dgamma, dbeta);
    });
}

void ProfilingBackend::gelu_fwd(View x, View y) {
    timed("gelu_fwd", 0.0, [&] { be_.gelu_fwd(x, y); });
}

void ProfilingBackend::gelu_bwd(View x, View dy, View dx) {
    timed("gelu_bwd", 0.0, [&] { be_.gelu_bwd(x, dy, dx); });
}

void ProfilingBackend::swiglu_fwd(View gate, View up, View y) {
    timed("swiglu_fwd", 0.0, [&] { be_.swiglu_fwd(gate, up, y); });
}

void ProfilingBackend::swiglu_bwd(View gate, View up, View dy, View dgate, View dup) {
    timed("swiglu_bwd", 0.0, [&] { be_.swiglu_bwd(gate, up, dy, dgate, dup); });
}

void ProfilingBackend::squared_relu_fwd(View x, View y) {
    timed("squared_relu_fwd", 0.0, [&] { be_.squared_relu_fwd(x, y); });
}

void ProfilingBackend::squared_relu_bwd(View x, View dy, View dx) {
    timed("squared_relu_bwd", 0.0, [&] { be_.squared_relu_bwd(x, dy, dx); });
}

void ProfilingBackend::causal_conv1d_fwd(View x,
                                         int64_t seq,
                                         int64_t batch,
                                         int64_t channels,
                                         int64_t kernel,
                                         View w,
                                         View bias,
                                         View y) {
    timed("causal_conv1d_fwd", 0.0, [&] {
        be_.causal_conv1d_fwd(x, seq, batch, channels, kernel, w, bias, y);
    });
}

void ProfilingBackend::causal_conv1d_bwd(View x,
                                         View dy,
                                         int64_t seq,
                                         int64_t batch,
                                         int64_t channels,
                                         int64_t kernel,
                                         View w,
                                         View dx,
                                         View dw,
                                         View dbias) {
    timed("causal_conv1d_bwd", 0.0, [&] {
        be_.causal_conv1d_bwd(x, dy, seq, batch, channels, kernel, w, dx, dw, dbias);
    });
}

void ProfilingBackend::silu_fwd(View x, View y) {
    timed("silu_fwd", 0.0, [&] { be_.silu_fwd(x, y); });
}

void ProfilingBackend::silu_bwd(View x, View dy, View dx) {
    timed("silu_bwd", 0.0, [&] { be_.silu_bwd(x, dy, dx); });
}

void ProfilingBackend::ssd_fwd(const SsdShape& s,
                               View x,
                               View dt_raw,
                               View dt_bias,
                               View a_log,
                               View b,
                               View c,
                               View d,
                               View y) {
    timed("ssd_fwd", 0.0, [&] { be_.ssd_fwd(s, x, dt_raw, dt_bias, a_log, b, c, d, y); });
}

void ProfilingBackend::ssd_bwd(const SsdShape& s,
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
                               View dd) {
    timed("ssd_bwd", 0.0, [&] {
        be_.ssd_bwd(
            s, x, dt_raw, dt_bias, a_log, b, c, d, dy, dx, ddt_raw, db, dc, ddt_bias, da_log, dd);
    });
}

void ProfilingBackend::gated_rmsnorm_fwd(View y,
                                         View z,
                                         int64_t rows,
                                         int64_t cols,
                                         int64_t group,
                                         View gamma,
                                         float eps,
                                         View out,
                                         View rstd) {
    timed("gated_rmsnorm_fwd", 0.0, [&] {
        be_.gated_rmsnorm_fwd(y, z, rows, cols, group, gamma, eps, out, rstd);
    });
}

void ProfilingBackend::gated_rmsnorm_bwd(View dout,
                                         View y,
                                         View z,
                                         int64_t rows,
                                         int64_t cols,
                                         int64_t group,
                                         View gamma,
                                         View rstd,
                                         View dy,
                                         View dz,
                                         View dgamma) {
    timed("gated_rmsnorm_bwd", 0.0, [&] {
        be_.gated_rmsnorm_bwd(dout, y, z, rows, cols, group, gamma, rstd, dy, dz, dgamma);
    });
}

void ProfilingBackend::rope(View x,
                            int64_t seq,
                            int64_t batch,
                            int64_t heads,
                            int64_t head_dim,
                            int64_t first_pos,
                            bool inverse) {
    timed("rope", 0.0, [&] { be_.rope(x, seq, batch, heads, head_dim, first_pos, inverse); });
}

void ProfilingBackend::attention_fwd(View q,
                                     View k,
                                     View v,
                                     int64_t seq,
                                     int64_t batch,
                                     int64_t heads,
                                     int64_t kv_heads,
                                     int64_t head_dim,
                                     View probs,
                                     View out) {
    timed("attention_fwd", 0.0, [&] {
        be_.attention_fwd(q, k, v, seq, batch, heads, kv_heads, head_dim, probs, out);
    });
}

void ProfilingBackend::attention_bwd(View q,
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
                                     View dv) {
    timed("attention_bwd", 0.0, [&] {
        be_.attention_bwd(q, k, v, probs, dout, seq, batch, heads, kv_heads, head_dim, dq, dk, dv);
    });
}

void ProfilingBackend::xent_row_max(View logits, int64_t rows, int64_t cols, View row_max) {
    timed("xent_row_max", 0.0, [&] { be_.xent_row_max(logits, rows, cols, row_max); });
}

void ProfilingBackend::xent_partial(View logits,
                                    int64_t rows,
                                    int64_t cols,
                                    int64_t col_begin,
                                    std::span<const int32_t> targets,
                                    View row_max,
                                    View sum_exp,
                                    View target_logit) {
    timed("xent_partial", 0.0, [&] {
        be_.xent_partial(logits, rows, cols, col_begin, targets, row_max, sum_exp, target_logit);
    });
}

void ProfilingBackend::xent_bwd(View logits,
                                int64_t rows,
                                int64_t cols,
                                int64_t col_begin,
                                std::span<const int32_t> targets,
                                View row_max,
                                View sum_exp,
                                float scale,
                                View dlogits) {
    timed("xent_bwd", 0.0, [&] {
        be_.xent_bwd(logits, rows, cols, col_begin, targets, row_max, sum_exp, scale, dlogits);
    });
}

void ProfilingBackend::adam(View w,
                            View g,
                            View m,
                            View v,
                            float lr,
                            float beta1,
                            float beta2,
                            float eps,
                            float weight_decay,
                            int64_t step) {
    timed("adam", 0.0, [&] { be_.adam(w, g, m, v, lr, beta1, beta2, eps, weight_decay, step); });
}

}  // namespace cleave::executor
