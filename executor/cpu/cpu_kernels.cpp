// The CPU backend's math beyond GEMM: plain loops (double accumulators where a row is reduced),
// Eigen for the per-head attention products, and Eigen's vectorised exp and tanh (SIMD packets,
// a few ulp in float) for GeLU, SiLU, softmax and cross-entropy: the scalar libm calls ran GeLU
// at ~20 ns per element (18% of a small model's iteration, docs/calibrate.md), at a speed that
// depended on the values, where a GPU's activation kernels stream at memory speed.
#include "executor/cpu/cpu_backend.hpp"

#include <algorithm>
#include <cmath>

#include <Eigen/Core>

namespace cleave::executor {

namespace {

using MatRM = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Strided = Eigen::Map<MatRM, 0, Eigen::OuterStride<>>;
using CStrided = Eigen::Map<const MatRM, 0, Eigen::OuterStride<>>;
using Map = Eigen::Map<MatRM>;
using Arr = Eigen::Map<Eigen::ArrayXf>;
using CArr = Eigen::Map<const Eigen::ArrayXf>;

// Element-wise kernels work through blocks of this many elements, so that an intermediate
// (tanh, sigmoid) lives in a stack array rather than a heap temporary.
constexpr int64_t block = 1024;
using BlockArr = Eigen::Array<float, Eigen::Dynamic, 1, 0, block, 1>;

void need(View v, int64_t n, const char* what) {
    CLEAVE_ASSERT(v.size >= n, what);
}

// sqrt(2/pi) and the cubic coefficient of the tanh GeLU (Hendrycks & Gimpel 2016, eq. 2).
constexpr float gelu_c = 0.7978845608028654f;
constexpr float gelu_a = 0.044715f;

// tanh(sqrt(2/pi) (x + a x^3)) of the GeLU.
BlockArr gelu_tanh(const CArr& x) {
    return (gelu_c * (x + gelu_a * x.cube())).tanh();
}

BlockArr sigmoid(const CArr& x) {
    return 1.0f / (1.0f + (-x).exp());
}

}  // namespace

void CpuBackend::embedding_fwd(std::span<const int32_t> ids,
                               View table,
                               int64_t row_begin,
                               int64_t table_rows,
                               int64_t cols,
                               View out,
                               bool accumulate) {
    const auto n = static_cast<int64_t>(ids.size());
    need(out, n * cols, "embedding_fwd: out too small");
    need(table, table_rows * cols, "embedding_fwd: table too small");
    for (int64_t i = 0; i < n; ++i) {
        float* o = out.data + i * cols;
        const int64_t row = ids[static_cast<size_t>(i)] - row_begin;
        if (row < 0 || row >= table_rows) {
            if (!accumulate) {
                std::fill(o, o + cols, 0.0f);
            }
            continue;
        }
        const float* t = table.data + row * cols;
        for (int64_t c = 0; c < cols; ++c) {
            o[c] = accumulate ? o[c] + t[c] : t[c];
        }
    }
}

void CpuBackend::embedding_bwd(std::span<const int32_t> ids,
                               View dy,
                               int64_t row_begin,
                               int64_t table_rows,
                               int64_t cols,
                               View dtable) {
    const auto n = static_cast<int64_t>(ids.size());
    need(dy, n * cols, "embedding_bwd: dy too small");
    need(dtable, table_rows * cols, "embedding_bwd: dtable too small");
    for (int64_t i = 0; i < n; ++i) {
        const int64_t row = ids[static_cast<size_t>(i)] - row_begin;
        if (row < 0 || row >= table_rows) {
            continue;
        }
        float* t = dtable.data + row * cols;
        const float* d = dy.data + i * cols;
        for (int64_t c = 0; c < cols; ++c) {
            t[c] += d[c];
        }
    }
}

void CpuBackend::norm_fwd(NormType type,
                          View x,
                          int64_t rows,
                          int64_t cols,
                          View gamma,
                          View beta,
                          float eps,
                          View y,
                          View mean,
                          View rstd) {
    need(x, rows * cols, "norm_fwd: x too small");
    need(y, rows * cols, "norm_fwd: y too small");
    need(rstd, rows, "norm_fwd: rstd too small");
    const bool ln = type == NormType::layernorm;
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x.data + r * cols;
        float* yr = y.data + r * cols;
        double mu = 0.0;
        if (ln) {
            for (int64_t c = 0; c < cols; ++c) {
                mu += xr[c];
            }
            mu /= static_cast<double>(cols);
        }
        double var = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
            const double d = xr[c] - mu;
            var += d * d;
        }
        var /= static_cast<double>(cols);
        const auto rs = static_cast<float>(1.0 / std::sqrt(var + eps));
        const auto muf = static_cast<float>(mu);
        for (int64_t c = 0; c < cols; ++c) {
            const float xhat = (xr[c] - muf) * rs;
            yr[c] = xhat * gamma.data[c] + (ln ? beta.data[c] : 0.0f);
        }
        if (ln) {
            mean.data[r] = muf;
        }
        rstd.data[r] = rs;
    }
}

void CpuBackend::norm_bwd(NormType type,
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
    need(dy, rows * cols, "norm_bwd: dy too small");
    need(dx, rows * cols, "norm_bwd: dx too small");
    const bool ln = type == NormType::layernorm;
    const auto inv_n = 1.0 / static_cast<double>(cols);
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x.data + r * cols;
        const float* dyr = dy.data + r * cols;
        float* dxr = dx.data + r * cols;
        const float mu = ln ? mean.data[r] : 0.0f;
        const float rs = rstd.data[r];
        double sum_dxhat = 0.0;
        double sum_dxhat_xhat = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
            const float xhat = (xr[c] - mu) * rs;
            const float dxhat = dyr[c] * gamma.data[c];
            sum_dxhat += dxhat;
            sum_dxhat_xhat += static_cast<double>(dxhat) * xhat;
            dgamma.data[c] += dyr[c] * xhat;
            if (ln) {
                dbeta.data[c] += dyr[c];
            }
        }
        const auto m1 = ln ? static_cast<float>(sum_dxhat * inv_n) : 0.0f;
        const auto m2 = static_cast<float>(sum_dxhat_xhat * inv_n);
        for (int64_t c = 0; c < cols; ++c) {
            const float xhat = (xr[c] - mu) * rs;
            dxr[c] = rs * (dyr[c] * gamma.data[c] - m1 - xhat * m2);
        }
    }
}

void CpuBackend::gelu_fwd(View x, View y) {
    need(y, x.size, "gelu_fwd: y too small");
    for (int64_t i = 0; i < x.size; i += block) {
        const int64_t n = std::min(block, x.size - i);
        const CArr v(x.data + i, n);
        Arr(y.data + i, n) = 0.5f * v * (1.0f + gelu_tanh(v));
    }
}

void CpuBackend::gelu_bwd(View x, View dy, View dx) {
    need(dy, x.size, "gelu_bwd: dy too small");
    need(dx, x.size, "gelu_bwd: dx too small");
    for (int64_t i = 0; i < x.size; i += block) {
        const int64_t n = std::min(block, x.size - i);
        const CArr v(x.data + i, n);
        const BlockArr t = gelu_tanh(v);
        Arr(dx.data + i, n) =
            CArr(dy.data + i, n) * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * gelu_c *
                                                            (1.0f + 3.0f * gelu_a * v.square()));
    }
}

void CpuBackend::swiglu_fwd(View gate, View up, View y) {
    need(up, gate.size, "swiglu_fwd: up too small");
    need(y, gate.size, "swiglu_fwd: y too small");
    for (int64_t i = 0; i < gate.size; i += block) {
        const int64_t n = std::min(block, gate.size - i);
        const CArr g(gate.data + i, n);
        Arr(y.data + i, n) = g * sigmoid(g) * CArr(up.data + i, n);
    }
}

void CpuBackend::swiglu_bwd(View gate, View up, View dy, View dgate, View dup) {
    need(dgate, gate.size, "swiglu_bwd: dgate too small");
    need(dup, gate.size, "swiglu_bwd: dup too small");
    for (int64_t i = 0; i < gate.size; i += block) {
        const int64_t n = std::min(block, gate.size - i);
        const CArr g(gate.data + i, n);
        const CArr d(dy.data + i, n);
        const BlockArr sg = sigmoid(g);
        // dgate first: dup may alias up (it is only read for dgate).
        Arr(dgate.data + i, n) = d * CArr(up.data + i, n) * sg * (1.0f + g * (1.0f - sg));
        Arr(dup.data + i, n) = d * g * sg;
    }
}

void CpuBackend::rope(View x,
                      int64_t seq,
                      int64_t batch,
                      int64_t heads,
                      int64_t head_dim,
                      int64_t first_pos,
                      bool inverse) {
    CLEAVE_ASSERT(head_dim % 2 == 0, "rope: head_dim must be even");
    need(x, seq * batch * heads * head_dim, "rope: x too small");
    const double sign = inverse ? -1.0 : 1.0;
    for (int64_t r = 0; r < seq * batch; ++r) {
        const auto pos = static_cast<double>(first_pos + r / batch);
        for (int64_t i = 0; i < head_dim / 2; ++i) {
            // RoFormer (Su et al. 2021, eq. 34): theta_i = 10000^(-2i/d).
            const double theta =
                pos *
                std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
            const auto c = static_cast<float>(std::cos(theta));
            const auto s = static_cast<float>(sign * std::sin(theta));
            for (int64_t h = 0; h < heads; ++h) {
                float* p = x.data + (r * heads + h) * head_dim + 2 * i;
                const float x0 = p[0];
                const float x1 = p[1];
                p[0] = x0 * c - x1 * s;
                p[1] = x0 * s + x1 * c;
            }
        }
    }
}

void CpuBackend::attention_fwd(View q,
                               View k,
                               View v,
                               int64_t seq,
                               int64_t batch,
                               int64_t heads,
                               int64_t kv_heads,
                               int64_t head_dim,
                               View probs,
                               View out) {
    CLEAVE_ASSERT(kv_heads > 0 && heads % kv_heads == 0, "attention: kv_heads must divide heads");
    need(q, seq * batch * heads * head_dim, "attention_fwd: q too small");
    need(k, seq * batch * kv_heads * head_dim, "attention_fwd: k too small");
    need(v, seq * batch * kv_heads * head_dim, "attention_fwd: v too small");
    need(probs, batch * heads * seq * seq, "attention_fwd: probs too small");
    need(out, seq * batch * heads * head_dim, "attention_fwd: out too small");
    const int64_t group = heads / kv_heads;
    const Eigen::OuterStride<> q_stride(batch * heads * head_dim);
    const Eigen::OuterStride<> kv_stride(batch * kv_heads * head_dim);
    const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
    for (int64_t b = 0; b < batch; ++b) {
        for (int64_t h = 0; h < heads; ++h) {
            const int64_t kvh = h / group;
            CStrided Q(q.data + (b * heads + h) * head_dim, seq, head_dim, q_stride);
            CStrided K(k.data + (b * kv_heads + kvh) * head_dim, seq, head_dim, kv_stride);
            CStrided V(v.data + (b * kv_heads + kvh) * head_dim, seq, head_dim, kv_stride);
            Strided O(out.data + (b * heads + h) * head_dim, seq, head_dim, q_stride);
            Map P(probs.data + (b * heads + h) * seq * seq, seq, seq);
            P.noalias() = scale * Q * K.transpose();
            for (int64_t i = 0; i < seq; ++i) {
                Arr row(&P(i, 0), i + 1);  // the causal part of row i
                row = (row - row.maxCoeff()).exp();
                const double sum = row.cast<double>().sum();
                row *= static_cast<float>(1.0 / sum);
                Arr(&P(i, 0) + i + 1, seq - i - 1).setZero();
            }
            O.noalias() = P * V;
        }
    }
}

void CpuBackend::attention_bwd(View q,
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
    need(dq, seq * batch * heads * head_dim, "attention_bwd: dq too small");
    need(dk, seq * batch * kv_heads * head_dim, "attention_bwd: dk too small");
    need(dv, seq * batch * kv_heads * head_dim, "attention_bwd: dv too small");
    const int64_t group = heads / kv_heads;
    const Eigen::OuterStride<> q_stride(batch * heads * head_dim);
    const Eigen::OuterStride<> kv_stride(batch * kv_heads * head_dim);
    const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
    std::fill(dk.data, dk.data + seq * batch * kv_heads * head_dim, 0.0f);
    std::fill(dv.data, dv.data + seq * batch * kv_heads * head_dim, 0.0f);
    MatRM dP(seq, seq);
    for (int64_t b = 0; b < batch; ++b) {
        for (int64_t h = 0; h < heads; ++h) {
            const int64_t kvh = h / group;
            CStrided Q(q.data + (b * heads + h) * head_dim, seq, head_dim, q_stride);
            CStrided K(k.data + (b * kv_heads + kvh) * head_dim, seq, head_dim, kv_stride);
            CStrided V(v.data + (b * kv_heads + kvh) * head_dim, seq, head_dim, kv_stride);
            CStrided dO(dout.data + (b * heads + h) * head_dim, seq, head_dim, q_stride);
            Strided dQ(dq.data + (b * heads + h) * head_dim, seq, head_dim, q_stride);
            Strided dK(dk.data + (b * kv_heads + kvh) * head_dim, seq, head_dim, kv_stride);
            Strided dV(dv.data + (b * kv_heads + kvh) * head_dim, seq, head_dim, kv_stride);
            Eigen::Map<const MatRM> P(probs.data + (b * heads + h) * seq * seq, seq, seq);
            dV.noalias() += P.transpose() * dO;
            dP.noalias() = dO * V.transpose();
            // softmax backward: dS = P o (dP - rowsum(P o dP)); masked entries have P = 0.
            for (int64_t i = 0; i < seq; ++i) {
                double dot = 0.0;
                for (int64_t j = 0; j <= i; ++j) {
                    dot += static_cast<double>(P(i, j)) * dP(i, j);
                }
                const auto d = static_cast<float>(dot);
                for (int64_t j = 0; j < seq; ++j) {
                    dP(i, j) = P(i, j) * (dP(i, j) - d) * scale;
                }
            }
            dQ.noalias() = dP * K;
            dK.noalias() += dP.transpose() * Q;
        }
    }
}

void CpuBackend::xent_row_max(View logits, int64_t rows, int64_t cols, View row_max) {
    need(logits, rows * cols, "xent_row_max: logits too small");
    need(row_max, rows, "xent_row_max: row_max too small");
    for (int64_t r = 0; r < rows; ++r) {
        const float* l = logits.data + r * cols;
        row_max.data[r] = *std::max_element(l, l + cols);
    }
}

void CpuBackend::xent_partial(View logits,
                              int64_t rows,
                              int64_t cols,
                              int64_t col_begin,
                              std::span<const int32_t> targets,
                              View row_max,
                              View sum_exp,
                              View target_logit) {
    CLEAVE_ASSERT(static_cast<int64_t>(targets.size()) == rows, "xent_partial: targets size");
    need(sum_exp, rows, "xent_partial: sum_exp too small");
    need(target_logit, rows, "xent_partial: target_logit too small");
    for (int64_t r = 0; r < rows; ++r) {
        const float* l = logits.data + r * cols;
        const double s = (CArr(l, cols) - row_max.data[r]).exp().cast<double>().sum();
        sum_exp.data[r] = static_cast<float>(s);
        const int64_t t = targets[static_cast<size_t>(r)] - col_begin;
        target_logit.data[r] = t >= 0 && t < cols ? l[t] : 0.0f;
    }
}

void CpuBackend::xent_bwd(View logits,
                          int64_t rows,
                          int64_t cols,
                          int64_t col_begin,
                          std::span<const int32_t> targets,
                          View row_max,
                          View sum_exp,
                          float scale,
                          View dlogits) {
    need(dlogits, rows * cols, "xent_bwd: dlogits too small");
    for (int64_t r = 0; r < rows; ++r) {
        const float* l = logits.data + r * cols;
        float* d = dlogits.data + r * cols;
        const float inv = 1.0f / sum_exp.data[r];
        Arr(d, cols) = (scale * inv) * (CArr(l, cols) - row_max.data[r]).exp();
        const int64_t t = targets[static_cast<size_t>(r)] - col_begin;
        if (t >= 0 && t < cols) {
            d[t] -= scale;
        }
    }
}

void CpuBackend::adam(View w,
                      View g,
                      View m,
                      View v,
                      float lr,
                      float beta1,
                      float beta2,
                      float eps,
                      float weight_decay,
                      int64_t step) {
    CLEAVE_ASSERT(g.size == w.size && m.size == w.size && v.size == w.size, "adam: size mismatch");
    CLEAVE_ASSERT(step >= 1, "adam: step starts at 1");
    const auto c1 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta1), step));
    const auto c2 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta2), step));
    for (int64_t i = 0; i < w.size; ++i) {
        const float gi = g.data[i];
        m.data[i] = beta1 * m.data[i] + (1.0f - beta1) * gi;
        v.data[i] = beta2 * v.data[i] + (1.0f - beta2) * gi * gi;
        const float mhat = m.data[i] / c1;
        const float vhat = v.data[i] / c2;
        w.data[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + weight_decay * w.data[i]);
    }
}

}  // namespace cleave::executor
