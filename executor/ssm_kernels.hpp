#pragma once
// Host kernels of the Mamba-2 mixer (issue 26) and of the squared-ReLU MLP: plain loops and Eigen
// products on host memory, fp32. The CPU backend calls them on its own memory; every other
// backend reaches them through Backend's default implementations (executor/backend_host.cpp),
// which copy through host memory.
//
// Layouts follow the rest of the executor: rows in [seq, batch] order (row r = s * batch + b);
// a per-head tensor holds head h's values in columns [h * width, (h + 1) * width).

#include "executor/backend.hpp"

#include <cstdint>

namespace cleave::executor::host {


/// Depthwise causal convolution along the sequence (torch conv1d, groups = channels, padding
/// kernel - 1, the first seq outputs; Megatron-Core MambaMixer.conv1d): for x [rows, channels]
/// and w [kernel, channels] (tap k of channel c at w[k * channels + c]),
/// y[s, b, c] = bias[c] + sum_k w[k, c] x[s - kernel + 1 + k, b, c], x = 0 before the start.
void causal_conv1d_fwd(const float* x,
                       int64_t seq,
                       int64_t batch,
                       int64_t channels,
                       int64_t kernel,
                       const float* w,
                       const float* bias,
                       float* y);
/// Its gradient: dx overwritten; dw and dbias accumulated.
void causal_conv1d_bwd(const float* x,
                       const float* dy,
                       int64_t seq,
                       int64_t batch,
                       int64_t channels,
                       int64_t kernel,
                       const float* w,
                       float* dx,
                       float* dw,
                       float* dbias);

/// y = x sigmoid(x) (the SiLU after the conv).
void silu_fwd(const float* x, int64_t n, float* y);
/// dx = dy silu'(x), silu'(x) = s (1 + x (1 - s)), s = sigmoid(x). dx may alias dy.
void silu_bwd(const float* x, const float* dy, int64_t n, float* dx);

/// y = max(x, 0)^2 (Nemotron-H's MLP activation, Megatron --squared-relu).
void squared_relu_fwd(const float* x, int64_t n, float* y);
/// dx = 2 max(x, 0) dy. dx may alias dy.
void squared_relu_bwd(const float* x, const float* dy, int64_t n, float* dx);

/// The chunked SSD scan of Mamba-2 (Dao & Gu 2024, arXiv:2405.21060, Sec. 6 and Listing 1,
/// ssd_minimal_discrete), per batch element and head h (group g = h / (H / G)):
///   dt_t = softplus(dt_raw[t, h] + dt_bias[h]),  A = -exp(a_log[h]),
///   state_t = exp(dt_t A) state_{t-1} + dt_t x_t B_t^T   (P x N, state_0 = 0),
///   y_t = state_t C_t + d[h] x_t,
/// computed chunk by chunk as the paper does: within a chunk, the quadratic form
/// (C B^T o L) (dt x) with L[l, s] = exp(sum_{s < i <= l} dt_i A); across chunks, the state
/// entering each chunk, decayed into each position (C state) and carried on. x, y: [rows, H P];
/// dt_raw: [rows, H]; b, c: [rows, G N]; dt_bias, a_log, d: [H].
void ssd_fwd(const SsdShape& s,
             const float* x,
             const float* dt_raw,
             const float* dt_bias,
             const float* a_log,
             const float* b,
             const float* c,
             const float* d,
             float* y);
/// Its gradient given dy: dx, ddt_raw, db, dc overwritten; ddt_bias, da_log, dd accumulated.
/// The states entering each chunk are recomputed (not saved by the forward), as the fused
/// kernels do.
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
             float* dd);

/// Mamba-2's gated RMSNorm with the gate before the norm (Megatron-Core RMSNormGated,
/// norm_before_gate = False): v = y silu(z), out = v rstd gamma with rstd = 1 / sqrt(mean(v^2)
/// + eps) over each `group` consecutive columns of a row (d_inner / n_groups). y, z, out:
/// [rows, cols]; rstd: [rows, cols / group].
void gated_rmsnorm_fwd(const float* y,
                       const float* z,
                       int64_t rows,
                       int64_t cols,
                       int64_t group,
                       const float* gamma,
                       float eps,
                       float* out,
                       float* rstd);
/// Its gradient: dy, dz overwritten; dgamma accumulated.
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
                       float* dgamma);

}  // namespace cleave::executor::host
