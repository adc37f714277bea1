// Host kernels of the Mamba-2 mixer (executor/ssm_kernels.hpp). The SSD scan's backward is
// derived by hand from the chunked forward below (the derivation is in docs/executor.md,
// "Mamba-2"); tests/executor/test_ssm.cpp checks the forward against the plain recurrence and
// the backward against finite differences.
#include "executor/ssm_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <Eigen/Core>

namespace cleave::executor::host {

namespace {

using MatRM = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vec = Eigen::VectorXf;
using Strided = Eigen::Map<MatRM, 0, Eigen::OuterStride<>>;
using CStrided = Eigen::Map<const MatRM, 0, Eigen::OuterStride<>>;

float sigmoid(float x) {
    return 1.0f / (1.0f + std::exp(-x));
}

// log(1 + e^u), without overflow for large u.
float softplus(float u) {
    return u > 20.0f ? u : std::log1p(std::exp(u));
}

// What one (batch element, chunk, head) of the scan needs, recomputed from the inputs.
struct ChunkHead {
    Vec dtv;  // dt after softplus, per position
    Vec u;    // dt_raw + dt_bias (the softplus input)
    Vec acs;  // cumulative sum of dt A within the chunk
    float a = 0.0f;

    ChunkHead(const SsdShape& s,
              const float* dt_raw,
              const float* dt_bias,
              const float* a_log,
              int64_t bi,
              int64_t c0,
              int64_t len,
              int64_t h)
        : dtv(len)
        , u(len)
        , acs(len)
        , a(-std::exp(a_log[h])) {
        float sum = 0.0f;
        for (int64_t l = 0; l < len; ++l) {
            u(l) = dt_raw[((c0 + l) * s.batch + bi) * s.heads + h] + dt_bias[h];
            dtv(l) = softplus(u(l));
            sum += dtv(l) * a;
            acs(l) = sum;
        }
    }

    // L[l, s] = exp(acs_l - acs_s) for s <= l, else 0: the decay from position s to l.
    [[nodiscard]] MatRM decay() const {
        const int64_t len = acs.size();
        MatRM m = MatRM::Zero(len, len);
        for (int64_t l = 0; l < len; ++l) {
            for (int64_t j = 0; j <= l; ++j) {
                m(l, j) = std::exp(acs(l) - acs(j));
            }
        }
        return m;
    }

    // exp(acs_last - acs_s): how much of position s's input is left at the chunk's end.
    [[nodiscard]] Vec to_end() const {
        const float last = acs(acs.size() - 1);
        return (last - acs.array()).exp().matrix();
    }
};

// Strided views of one chunk of a [rows, heads_or_groups x width] tensor for batch element bi.
struct Layout {
    const SsdShape& s;

    [[nodiscard]] int64_t x_stride() const { return s.batch * s.heads * s.head_dim; }

    [[nodiscard]] int64_t bc_stride() const { return s.batch * s.groups * s.state; }

    [[nodiscard]] int64_t x_at(int64_t bi, int64_t c0, int64_t h) const {
        return (c0 * s.batch + bi) * s.heads * s.head_dim + h * s.head_dim;
    }

    [[nodiscard]] int64_t bc_at(int64_t bi, int64_t c0, int64_t g) const {
        return (c0 * s.batch + bi) * s.groups * s.state + g * s.state;
    }
};

}  // namespace

void causal_conv1d_fwd(const float* x,
                       int64_t seq,
                       int64_t batch,
                       int64_t channels,
                       int64_t kernel,
                       const float* w,
                       const float* bias,
                       float* y) {
    for (int64_t t = 0; t < seq; ++t) {
        for (int64_t bi = 0; bi < batch; ++bi) {
            float* yr = y + (t * batch + bi) * channels;
            std::copy(bias, bias + channels, yr);
            for (int64_t k = 0; k < kernel; ++k) {
                const int64_t src = t - kernel + 1 + k;
                if (src < 0) {
                    continue;
                }
                const float* xr = x + (src * batch + bi) * channels;
                const float* wk = w + k * channels;
                for (int64_t ch = 0; ch < channels; ++ch) {
                    yr[ch] += wk[ch] * xr[ch];
                }
            }
        }
    }
}

void causal_conv1d_bwd(const float* x,
                       const float* dy,
                       int64_t seq,
                       int64_t batch,
                       int64_t channels,
                       int64_t kernel,
                       const float* w,
                       float* dx,
                       float* dw,
                       float* dbias) {
    std::fill(dx, dx + seq * batch * channels, 0.0f);
    for (int64_t t = 0; t < seq; ++t) {
        for (int64_t bi = 0; bi < batch; ++bi) {
            const float* dyr = dy + (t * batch + bi) * channels;
            for (int64_t ch = 0; ch < channels; ++ch) {
                dbias[ch] += dyr[ch];
            }
            for (int64_t k = 0; k < kernel; ++k) {
                const int64_t src = t - kernel + 1 + k;
                if (src < 0) {
                    continue;
                }
                const float* xr = x + (src * batch + bi) * channels;
                float* dxr = dx + (src * batch + bi) * channels;
                const float* wk = w + k * channels;
                float* dwk = dw + k * channels;
                for (int64_t ch = 0; ch < channels; ++ch) {
                    dxr[ch] += wk[ch] * dyr[ch];
                    dwk[ch] += xr[ch] * dyr[ch];
                }
            }
        }
    }
}

void silu_fwd(const float* x, int64_t n, float* y) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = x[i] * sigmoid(x[i]);
    }
}

void silu_bwd(const float* x, const float* dy, int64_t n, float* dx) {
    for (int64_t i = 0; i < n; ++i) {
        const float sg = sigmoid(x[i]);
        dx[i] = dy[i] * sg * (1.0f + x[i] * (1.0f - sg));
    }
}

void squared_relu_fwd(const float* x, int64_t n, float* y) {
    for (int64_t i = 0; i < n; ++i) {
        const float r = std::max(x[i], 0.0f);
        y[i] = r * r;
    }
}

void squared_relu_bwd(const float* x, const float* dy, int64_t n, float* dx) {
    for (int64_t i = 0; i < n; ++i) {
        dx[i] = 2.0f * std::max(x[i], 0.0f) * dy[i];
    }
}

void ssd_fwd(const SsdShape& s,
             const float* x,
             const float* dt_raw,
             const float* dt_bias,
             const float* a_log,
             const float* b,
             const float* c,
             const float* d,
             float* y) {
    const Layout at{s};
    const int64_t per_group = s.heads / s.groups;
    std::vector<MatRM> state(static_cast<size_t>(s.heads));
    for (int64_t bi = 0; bi < s.batch; ++bi) {
        for (MatRM& st : state) {
            st = MatRM::Zero(s.state, s.head_dim);
        }
        for (int64_t c0 = 0; c0 < s.seq; c0 += s.chunk) {
            const int64_t len = std::min(s.chunk, s.seq - c0);
            for (int64_t g = 0; g < s.groups; ++g) {
                const CStrided bm(b + at.bc_at(bi, c0, g), len, s.state, at.bc_stride());
                const CStrided cm(c + at.bc_at(bi, c0, g), len, s.state, at.bc_stride());
                const MatRM cb = cm * bm.transpose();  // len x len, shared by the group's heads
                for (int64_t h = g * per_group; h < (g + 1) * per_group; ++h) {
                    const ChunkHead ch(s, dt_raw, dt_bias, a_log, bi, c0, len, h);
                    const CStrided xm(x + at.x_at(bi, c0, h), len, s.head_dim, at.x_stride());
                    Strided ym(y + at.x_at(bi, c0, h), len, s.head_dim, at.x_stride());
                    const MatRM xd = ch.dtv.asDiagonal() * xm;
                    MatRM& st = state[static_cast<size_t>(h)];
                    // Within the chunk, from the state entering it, and the skip.
                    const MatRM m = cb.cwiseProduct(ch.decay());
                    ym.noalias() = m * xd;
                    ym.noalias() += ch.acs.array().exp().matrix().asDiagonal() * (cm * st);
                    ym += d[h] * xm;
                    // The state leaving the chunk.
                    const float whole = std::exp(ch.acs(len - 1));
                    st = whole * st + bm.transpose() * (ch.to_end().asDiagonal() * xd);
                }
            }
        }
    }
}

void ssd_bwd(const SsdShape& s,
             const float* x,
             const float* dt_raw,
             const float* dt_bias,
             const float* a_log,
             const float* b,
             const float* c,
             const float* d,
             const float* dy,
             float* dx,
             float* ddt_raw,
             float* db,
             float* dc,
             float* ddt_bias,
             float* da_log,
             float* dd) {
    const Layout at{s};
    const int64_t per_group = s.heads / s.groups;
    const int64_t chunks = s.chunks();
    std::fill(dx, dx + s.rows() * s.heads * s.head_dim, 0.0f);
    std::fill(db, db + s.rows() * s.groups * s.state, 0.0f);
    std::fill(dc, dc + s.rows() * s.groups * s.state, 0.0f);
    std::vector<MatRM> entering(static_cast<size_t>(chunks * s.heads));
    std::vector<MatRM> grad(static_cast<size_t>(s.heads));  // d loss / d (state leaving chunk)
    for (int64_t bi = 0; bi < s.batch; ++bi) {
        // The states entering each chunk, recomputed.
        for (int64_t h = 0; h < s.heads; ++h) {
            MatRM st = MatRM::Zero(s.state, s.head_dim);
            const int64_t g = h / per_group;
            for (int64_t k = 0; k < chunks; ++k) {
                const int64_t c0 = k * s.chunk;
                const int64_t len = std::min(s.chunk, s.seq - c0);
                entering[static_cast<size_t>(k * s.heads + h)] = st;
                const ChunkHead ch(s, dt_raw, dt_bias, a_log, bi, c0, len, h);
                const CStrided bm(b + at.bc_at(bi, c0, g), len, s.state, at.bc_stride());
                const CStrided xm(x + at.x_at(bi, c0, h), len, s.head_dim, at.x_stride());
                const MatRM xd = ch.dtv.asDiagonal() * xm;
                st = std::exp(ch.acs(len - 1)) * st +
                     bm.transpose() * (ch.to_end().asDiagonal() * xd);
            }
            grad[static_cast<size_t>(h)] = MatRM::Zero(s.state, s.head_dim);
        }
        for (int64_t k = chunks - 1; k >= 0; --k) {
            const int64_t c0 = k * s.chunk;
            const int64_t len = std::min(s.chunk, s.seq - c0);
            for (int64_t g = 0; g < s.groups; ++g) {
                const CStrided bm(b + at.bc_at(bi, c0, g), len, s.state, at.bc_stride());
                const CStrided cm(c + at.bc_at(bi, c0, g), len, s.state, at.bc_stride());
                Strided dbm(db + at.bc_at(bi, c0, g), len, s.state, at.bc_stride());
                Strided dcm(dc + at.bc_at(bi, c0, g), len, s.state, at.bc_stride());
                const MatRM cb = cm * bm.transpose();
                MatRM dcb = MatRM::Zero(len, len);
                for (int64_t h = g * per_group; h < (g + 1) * per_group; ++h) {
                    const ChunkHead ch(s, dt_raw, dt_bias, a_log, bi, c0, len, h);
                    const CStrided xm(x + at.x_at(bi, c0, h), len, s.head_dim, at.x_stride());
                    const CStrided dym(dy + at.x_at(bi, c0, h), len, s.head_dim, at.x_stride());
                    Strided dxm(dx + at.x_at(bi, c0, h), len, s.head_dim, at.x_stride());
                    const MatRM& entry = entering[static_cast<size_t>(k * s.heads + h)];
                    MatRM& leaving = grad[static_cast<size_t>(h)];
                    const MatRM xd = ch.dtv.asDiagonal() * xm;
                    const Vec e = ch.acs.array().exp().matrix();
                    const Vec w = ch.to_end();
                    const float whole = e(len - 1);
                    Vec dacs = Vec::Zero(len);
                    MatRM dxd = MatRM::Zero(len, s.head_dim);
                    // Skip: y += d x.
                    dd[h] += dym.cwiseProduct(xm).sum();
                    dxm += d[h] * dym;
                    // From the entering state: y += diag(e) C entry.
                    const MatRM c_entry = cm * entry;
                    dacs += e.cwiseProduct(c_entry.cwiseProduct(dym).rowwise().sum());
                    dcm += e.asDiagonal() * (dym * entry.transpose());
                    MatRM dentry = cm.transpose() * (e.asDiagonal() * dym);
                    // The state leaving: whole x entry + B^T diag(w) xd.
                    dentry += whole * leaving;
                    dacs(len - 1) += whole * leaving.cwiseProduct(entry).sum();
                    const MatRM b_leave = bm * leaving;  // len x P
                    dxd += w.asDiagonal() * b_leave;
                    dbm += w.asDiagonal() * (xd * leaving.transpose());
                    const Vec dw = b_leave.cwiseProduct(xd).rowwise().sum().cwiseProduct(w);
                    dacs(len - 1) += dw.sum();
                    dacs -= dw;
                    // Within the chunk: y += (CB o L) xd.
                    const MatRM decay = ch.decay();
                    const MatRM m = cb.cwiseProduct(decay);
                    const MatRM dm = dym * xd.transpose();
                    dxd += m.transpose() * dym;
                    dcb += dm.cwiseProduct(decay);
                    const MatRM r = dm.cwiseProduct(m);
                    dacs += r.rowwise().sum();
                    dacs -= r.colwise().sum().transpose();
                    // acs = cumsum(dt A); xd = dt x; dt = softplus(u).
                    Vec ddtv = Vec::Zero(len);
                    float da = 0.0f;
                    float suffix = 0.0f;
                    for (int64_t l = len - 1; l >= 0; --l) {
                        suffix += dacs(l);
                        ddtv(l) += suffix * ch.a;
                        da += suffix * ch.dtv(l);
                    }
                    dxm += ch.dtv.asDiagonal() * dxd;
                    ddtv += xm.cwiseProduct(dxd).rowwise().sum();
                    for (int64_t l = 0; l < len; ++l) {
                        const float du = ddtv(l) * sigmoid(ch.u(l));
                        ddt_raw[((c0 + l) * s.batch + bi) * s.heads + h] = du;
                        ddt_bias[h] += du;
                    }
                    da_log[h] += da * ch.a;  // A = -exp(a_log): dA / da_log = A
                    leaving = dentry;        // the gradient leaving the previous chunk
                }
                dcm += dcb * bm;
                dbm += dcb.transpose() * cm;
            }
        }
    }
}

void gated_rmsnorm_fwd(const float* y,
                       const float* z,
                       int64_t rows,
                       int64_t cols,
                       int64_t group,
                       const float* gamma,
                       float eps,
                       float* out,
                       float* rstd) {
    const int64_t groups = cols / group;
    std::vector<float> v(static_cast<size_t>(group));
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t g = 0; g < groups; ++g) {
            const int64_t o = r * cols + g * group;
            double sq = 0.0;
            for (int64_t i = 0; i < group; ++i) {
                const float vi = y[o + i] * z[o + i] * sigmoid(z[o + i]);
                v[static_cast<size_t>(i)] = vi;
                sq += static_cast<double>(vi) * vi;
            }
            const auto rs = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(group) + eps));
            for (int64_t i = 0; i < group; ++i) {
                out[o + i] = v[static_cast<size_t>(i)] * rs * gamma[g * group + i];
            }
            rstd[r * groups + g] = rs;
        }
    }
}

void gated_rmsnorm_bwd(const float* dout,
                       const float* y,
                       const float* z,
                       int64_t rows,
                       int64_t cols,
                       int64_t group,
                       const float* gamma,
                       const float* rstd,
                       float* dy,
                       float* dz,
                       float* dgamma) {
    const int64_t groups = cols / group;
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t g = 0; g < groups; ++g) {
            const int64_t o = r * cols + g * group;
            const float rs = rstd[r * groups + g];
            // n = v rstd; dn = dout gamma; dv = rstd (dn - n mean(dn n)).
            double dot = 0.0;
            for (int64_t i = 0; i < group; ++i) {
                const float n = y[o + i] * z[o + i] * sigmoid(z[o + i]) * rs;
                const float dn = dout[o + i] * gamma[g * group + i];
                dgamma[g * group + i] += dout[o + i] * n;
                dot += static_cast<double>(dn) * n;
            }
            const auto mean = static_cast<float>(dot / static_cast<double>(group));
            for (int64_t i = 0; i < group; ++i) {
                const float sg = sigmoid(z[o + i]);
                const float gate = z[o + i] * sg;
                const float n = y[o + i] * gate * rs;
                const float dv = rs * (dout[o + i] * gamma[g * group + i] - n * mean);
                dy[o + i] = dv * gate;
                dz[o + i] = dv * y[o + i] * sg * (1.0f + z[o + i] * (1.0f - sg));
            }
        }
    }
}

}  // namespace cleave::executor::host
