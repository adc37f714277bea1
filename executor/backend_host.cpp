// Backend's default implementations of the Mamba-2 and squared-ReLU operations (issue 26): copy
// the operands to host memory, run the host kernels (executor/ssm_kernels.cpp), copy the results
// back. Correct on every backend, and slow on a GPU (two transfers per call and the math on the
// host): the CUDA backend has no kernels of its own for these yet. The CPU backend overrides them
// with direct calls. Compiled into the executor and into the CUDA module (executor/cuda/).
#include "executor/backend.hpp"
#include "executor/ssm_kernels.hpp"

#include <deque>
#include <vector>

namespace cleave::executor {

namespace {

// Host copies of a call's operands; outputs go back on finish().
class HostCall {
public:
    explicit HostCall(Backend& be)
        : be_(be) {}

    // An input, or an output that is accumulated into (its current values are needed).
    const float* in(View v) { return fetch(v); }

    // An output overwritten by the kernel.
    float* out(View v) {
        held_.emplace_back(static_cast<size_t>(v.size));
        outputs_.push_back({v, &held_.back()});
        return held_.back().data();
    }

    // An output accumulated into: fetched, then written back.
    float* inout(View v) {
        float* p = fetch(v);
        outputs_.push_back({v, &held_.back()});
        return p;
    }

    void finish() {
        for (const auto& [view, host] : outputs_) {
            be_.upload(view, *host);
        }
    }

private:
    float* fetch(View v) {
        held_.emplace_back(static_cast<size_t>(v.size));
        be_.download(held_.back(), v);
        return held_.back().data();
    }

    Backend& be_;
    std::deque<std::vector<float>> held_;  // deque: pointers stay valid as it grows
    std::vector<std::pair<View, const std::vector<float>*>> outputs_;
};

void need(View v, int64_t n, const char* what) {
    CLEAVE_ASSERT(v.size >= n, what);
}

}  // namespace

void Backend::squared_relu_fwd(View x, View y) {
    need(y, x.size, "squared_relu_fwd: y too small");
    HostCall h(*this);
    host::squared_relu_fwd(h.in(x), x.size, h.out(y));
    h.finish();
}

void Backend::squared_relu_bwd(View x, View dy, View dx) {
    need(dy, x.size, "squared_relu_bwd: dy too small");
    need(dx, x.size, "squared_relu_bwd: dx too small");
    HostCall h(*this);
    host::squared_relu_bwd(h.in(x), h.in(dy), x.size, h.out(dx));
    h.finish();
}

void Backend::causal_conv1d_fwd(View x,
                                int64_t seq,
                                int64_t batch,
                                int64_t channels,
                                int64_t kernel,
                                View w,
                                View bias,
                                View y) {
    need(x, seq * batch * channels, "causal_conv1d_fwd: x too small");
    need(w, kernel * channels, "causal_conv1d_fwd: w too small");
    need(bias, channels, "causal_conv1d_fwd: bias too small");
    need(y, seq * batch * channels, "causal_conv1d_fwd: y too small");
    HostCall h(*this);
    host::causal_conv1d_fwd(
        h.in(x), seq, batch, channels, kernel, h.in(w), h.in(bias), h.out(y));
    h.finish();
}

void Backend::causal_conv1d_bwd(View x,
                                View dy,
                                int64_t seq,
                                int64_t batch,
                                int64_t channels,
                                int64_t kernel,
                                View w,
                                View dx,
                                View dw,
                                View dbias) {
    need(dy, seq * batch * channels, "causal_conv1d_bwd: dy too small");
    need(dx, seq * batch * channels, "causal_conv1d_bwd: dx too small");
    need(dw, kernel * channels, "causal_conv1d_bwd: dw too small");
    need(dbias, channels, "causal_conv1d_bwd: dbias too small");
    HostCall h(*this);
    host::causal_conv1d_bwd(h.in(x),
                            h.in(dy),
                            seq,
                            batch,
                            channels,
                            kernel,
                            h.in(w),
                            h.out(dx),
                            h.inout(dw),
                            h.inout(dbias));
    h.finish();
}

void Backend::silu_fwd(View x, View y) {
    need(y, x.size, "silu_fwd: y too small");
    HostCall h(*this);
    host::silu_fwd(h.in(x), x.size, h.out(y));
    h.finish();
}

void Backend::silu_bwd(View x, View dy, View dx) {
    need(dy, x.size, "silu_bwd: dy too small");
    need(dx, x.size, "silu_bwd: dx too small");
    HostCall h(*this);
    host::silu_bwd(h.in(x), h.in(dy), x.size, h.out(dx));
    h.finish();
}

void Backend::ssd_fwd(const SsdShape& s,
                      View x,
                      View dt_raw,
                      View dt_bias,
                      View a_log,
                      View b,
                      View c,
                      View d,
                      View y) {
    need(x, s.rows() * s.heads * s.head_dim, "ssd_fwd: x too small");
    need(y, s.rows() * s.heads * s.head_dim, "ssd_fwd: y too small");
    need(dt_raw, s.rows() * s.heads, "ssd_fwd: dt too small");
    need(b, s.rows() * s.groups * s.state, "ssd_fwd: b too small");
    need(c, s.rows() * s.groups * s.state, "ssd_fwd: c too small");
    CLEAVE_ASSERT(s.groups > 0 && s.heads % s.groups == 0 && s.chunk > 0, "ssd_fwd: bad shape");
    HostCall h(*this);
    host::ssd_fwd(s,
                  h.in(x),
                  h.in(dt_raw),
                  h.in(dt_bias),
                  h.in(a_log),
                  h.in(b),
                  h.in(c),
                  h.in(d),
                  h.out(y));
    h.finish();
}

void Backend::ssd_bwd(const SsdShape& s,
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
    need(dy, s.rows() * s.heads * s.head_dim, "ssd_bwd: dy too small");
    need(dx, s.rows() * s.heads * s.head_dim, "ssd_bwd: dx too small");
    need(ddt_raw, s.rows() * s.heads, "ssd_bwd: ddt too small");
    need(db, s.rows() * s.groups * s.state, "ssd_bwd: db too small");
    need(dc, s.rows() * s.groups * s.state, "ssd_bwd: dc too small");
    CLEAVE_ASSERT(s.groups > 0 && s.heads % s.groups == 0 && s.chunk > 0, "ssd_bwd: bad shape");
    HostCall h(*this);
    host::ssd_bwd(s,
                  h.in(x),
                  h.in(dt_raw),
                  h.in(dt_bias),
                  h.in(a_log),
                  h.in(b),
                  h.in(c),
                  h.in(d),
                  h.in(dy),
                  h.out(dx),
                  h.out(ddt_raw),
                  h.out(db),
                  h.out(dc),
                  h.inout(ddt_bias),
                  h.inout(da_log),
                  h.inout(dd));
    h.finish();
}

void Backend::gated_rmsnorm_fwd(View y,
                                View z,
                                int64_t rows,
                                int64_t cols,
                                int64_t group,
                                View gamma,
                                float eps,
                                View out,
                                View rstd) {
    CLEAVE_ASSERT(group > 0 && cols % group == 0, "gated_rmsnorm_fwd: group must divide cols");
    need(y, rows * cols, "gated_rmsnorm_fwd: y too small");
    need(z, rows * cols, "gated_rmsnorm_fwd: z too small");
    need(out, rows * cols, "gated_rmsnorm_fwd: out too small");
    need(rstd, rows * (cols / group), "gated_rmsnorm_fwd: rstd too small");
    HostCall h(*this);
    host::gated_rmsnorm_fwd(
        h.in(y), h.in(z), rows, cols, group, h.in(gamma), eps, h.out(out), h.out(rstd));
    h.finish();
}

void Backend::gated_rmsnorm_bwd(View dout,
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
    need(dout, rows * cols, "gated_rmsnorm_bwd: dout too small");
    need(dy, rows * cols, "gated_rmsnorm_bwd: dy too small");
    need(dz, rows * cols, "gated_rmsnorm_bwd: dz too small");
    need(dgamma, cols, "gated_rmsnorm_bwd: dgamma too small");
    HostCall h(*this);
    host::gated_rmsnorm_bwd(h.in(dout),
                            h.in(y),
                            h.in(z),
                            rows,
                            cols,
                            group,
                            h.in(gamma),
                            h.in(rstd),
                            h.out(dy),
                            h.out(dz),
                            h.inout(dgamma));
    h.finish();
}

}  // namespace cleave::executor
