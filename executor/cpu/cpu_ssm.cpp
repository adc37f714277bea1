// The CPU backend's Mamba-2 and squared-ReLU operations (issue 26): the host kernels of
// executor/ssm_kernels.cpp on this backend's memory, with the size checks of the interface.
#include "executor/cpu/cpu_backend.hpp"
#include "executor/ssm_kernels.hpp"

namespace cleave::executor {

namespace {

void need_len(View v, int64_t n, const char* what) {
    CLEAVE_ASSERT(v.size >= n, what);
}

void need_shape(const SsdShape& s, View x, View dt, View b, View c, const char* what) {
    CLEAVE_ASSERT(s.groups > 0 && s.heads % s.groups == 0 && s.chunk > 0, what);
    need_len(x, s.rows() * s.heads * s.head_dim, what);
    need_len(dt, s.rows() * s.heads, what);
    need_len(b, s.rows() * s.groups * s.state, what);
    need_len(c, s.rows() * s.groups * s.state, what);
}

}  // namespace

void CpuBackend::squared_relu_fwd(View x, View y) {
    need_len(y, x.size, "squared_relu_fwd: y too small");
    host::squared_relu_fwd(x.data, x.size, y.data);
}

void CpuBackend::squared_relu_bwd(View x, View dy, View dx) {
    need_len(dy, x.size, "squared_relu_bwd: dy too small");
    need_len(dx, x.size, "squared_relu_bwd: dx too small");
    host::squared_relu_bwd(x.data, dy.data, x.size, dx.data);
}

void CpuBackend::causal_conv1d_fwd(View x,
                                   int64_t seq,
                                   int64_t batch,
                                   int64_t channels,
                                   int64_t kernel,
                                   View w,
                                   View bias,
                                   View y) {
    need_len(x, seq * batch * channels, "causal_conv1d_fwd: x too small");
    need_len(y, seq * batch * channels, "causal_conv1d_fwd: y too small");
    need_len(w, kernel * channels, "causal_conv1d_fwd: w too small");
    need_len(bias, channels, "causal_conv1d_fwd: bias too small");
    host::causal_conv1d_fwd(x.data, seq, batch, channels, kernel, w.data, bias.data, y.data);
}

void CpuBackend::causal_conv1d_bwd(View x,
                                   View dy,
                                   int64_t seq,
                                   int64_t batch,
                                   int64_t channels,
                                   int64_t kernel,
                                   View w,
                                   View dx,
                                   View dw,
                                   View dbias) {
    need_len(x, seq * batch * channels, "causal_conv1d_bwd: x too small");
    need_len(dy, seq * batch * channels, "causal_conv1d_bwd: dy too small");
    need_len(dx, seq * batch * channels, "causal_conv1d_bwd: dx too small");
    need_len(dw, kernel * channels, "causal_conv1d_bwd: dw too small");
    need_len(dbias, channels, "causal_conv1d_bwd: dbias too small");
    host::causal_conv1d_bwd(
        x.data, dy.data, seq, batch, channels, kernel, w.data, dx.data, dw.data, dbias.data);
}

void CpuBackend::silu_fwd(View x, View y) {
    need_len(y, x.size, "silu_fwd: y too small");
    host::silu_fwd(x.data, x.size, y.data);
}

void CpuBackend::silu_bwd(View x, View dy, View dx) {
    need_len(dy, x.size, "silu_bwd: dy too small");
    need_len(dx, x.size, "silu_bwd: dx too small");
    host::silu_bwd(x.data, dy.data, x.size, dx.data);
}

void CpuBackend::ssd_fwd(const SsdShape& s,
                         View x,
                         View dt_raw,
                         View dt_bias,
                         View a_log,
                         View b,
                         View c,
                         View d,
                         View y) {
    need_shape(s, x, dt_raw, b, c, "ssd_fwd: bad shape or operand");
    need_len(y, x.size, "ssd_fwd: y too small");
    need_len(dt_bias, s.heads, "ssd_fwd: dt_bias too small");
    need_len(a_log, s.heads, "ssd_fwd: a_log too small");
    need_len(d, s.heads, "ssd_fwd: d too small");
    host::ssd_fwd(s, x.data, dt_raw.data, dt_bias.data, a_log.data, b.data, c.data, d.data, y.data);
}

void CpuBackend::ssd_bwd(const SsdShape& s,
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
    need_shape(s, x, dt_raw, b, c, "ssd_bwd: bad shape or operand");
    need_shape(s, dx, ddt_raw, db, dc, "ssd_bwd: bad gradient operand");
    need_len(dy, x.size, "ssd_bwd: dy too small");
    need_len(ddt_bias, s.heads, "ssd_bwd: ddt_bias too small");
    need_len(da_log, s.heads, "ssd_bwd: da_log too small");
    need_len(dd, s.heads, "ssd_bwd: dd too small");
    host::ssd_bwd(s,
                  x.data,
                  dt_raw.data,
                  dt_bias.data,
                  a_log.data,
                  b.data,
                  c.data,
                  d.data,
                  dy.data,
                  dx.data,
                  ddt_raw.data,
                  db.data,
                  dc.data,
                  ddt_bias.data,
                  da_log.data,
                  dd.data);
}

void CpuBackend::gated_rmsnorm_fwd(View y,
                                   View z,
                                   int64_t rows,
                                   int64_t cols,
                                   int64_t group,
                                   View gamma,
                                   float eps,
                                   View out,
                                   View rstd) {
    CLEAVE_ASSERT(group > 0 && cols % group == 0, "gated_rmsnorm_fwd: group must divide cols");
    need_len(y, rows * cols, "gated_rmsnorm_fwd: y too small");
    need_len(z, rows * cols, "gated_rmsnorm_fwd: z too small");
    need_len(out, rows * cols, "gated_rmsnorm_fwd: out too small");
    need_len(gamma, cols, "gated_rmsnorm_fwd: gamma too small");
    need_len(rstd, rows * (cols / group), "gated_rmsnorm_fwd: rstd too small");
    host::gated_rmsnorm_fwd(y.data, z.data, rows, cols, group, gamma.data, eps, out.data, rstd.data);
}

void CpuBackend::gated_rmsnorm_bwd(View dout,
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
    CLEAVE_ASSERT(group > 0 && cols % group == 0, "gated_rmsnorm_bwd: group must divide cols");
    need_len(dout, rows * cols, "gated_rmsnorm_bwd: dout too small");
    need_len(y, rows * cols, "gated_rmsnorm_bwd: y too small");
    need_len(z, rows * cols, "gated_rmsnorm_bwd: z too small");
    need_len(dy, rows * cols, "gated_rmsnorm_bwd: dy too small");
    need_len(dz, rows * cols, "gated_rmsnorm_bwd: dz too small");
    need_len(dgamma, cols, "gated_rmsnorm_bwd: dgamma too small");
    need_len(rstd, rows * (cols / group), "gated_rmsnorm_bwd: rstd too small");
    host::gated_rmsnorm_bwd(dout.data,
                            y.data,
                            z.data,
                            rows,
                            cols,
                            group,
                            gamma.data,
                            rstd.data,
                            dy.data,
                            dz.data,
                            dgamma.data);
}

}  // namespace cleave::executor
