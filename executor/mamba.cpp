// A Mamba-2 layer of a hybrid model (issue 26): pre-norm, in_proj, depthwise causal conv + SiLU
// over x, B and C, the chunked SSD scan, the gated RMSNorm, out_proj, residual (Dao & Gu 2024,
// arXiv:2405.21060, Fig. 6 "Mamba-2 block"; Megatron-Core megatron/core/ssm/mamba_mixer.py
// @d98e8a64). Tensor parallelism as Megatron-Core does it: in_proj column-parallel (heads and
// B / C groups split over TP), everything up to out_proj local to the rank's heads, out_proj
// row-parallel; with SP the normed input is all-gathered along the sequence and the output
// reduce-scattered, as for attention. Checked against finite differences in
// tests/executor/test_gradcheck.cpp and against one rank in tests/executor/test_mpi_run.cpp.
#include "executor/transformer.hpp"

namespace cleave::executor {

Transformer::MambaConv Transformer::mamba_conv(const MambaHandles& m, const MambaCache& mc) {
    const int64_t T = d_.tokens();
    const int64_t di = d_.d_inner_local();
    const int64_t bcw = d_.bc_local();
    MambaConv out{buf(T * di), buf(T * di), buf(T * bcw), buf(T * bcw), buf(T * bcw), buf(T * bcw)};
    const auto one = [&](View in, int64_t channels, int64_t w, int64_t b, View pre, View act) {
        be_.causal_conv1d_fwd(in,
                              d_.seq,
                              d_.batch,
                              channels,
                              d_.ssm.conv_kernel,
                              params_.ref(w).w,
                              params_.ref(b).w,
                              pre);
        be_.silu_fwd(pre, act);
    };
    one(mc.xr, di, m.conv_x_w, m.conv_x_b, out.xc, out.xs);
    one(mc.br, bcw, m.conv_b_w, m.conv_b_b, out.bc, out.bs);
    one(mc.cr, bcw, m.conv_c_w, m.conv_c_b, out.cc, out.cs);
    return out;
}

Buffer Transformer::mamba_fwd(const LayerHandles& l, Buffer x, LayerCache& lc) {
    const int64_t T = d_.tokens();
    const int64_t Tl = d_.local_tokens();
    const int64_t h = d_.hidden;
    const int64_t di = d_.d_inner_local();
    const int64_t bc = d_.bc_local();
    const int64_t H = d_.ssm_heads_local();
    const MambaHandles& m = l.mamba;
    MambaCache& mc = lc.mamba;
    lc.n1 = buf(Tl * h);
    lc.mean1 = buf(Tl);
    lc.rstd1 = buf(Tl);
    norm(x, l.norm1_g, l.norm1_b, lc.n1, lc.mean1, lc.rstd1);
    const View n1 = gather_seq(lc.n1, lc.n1_full);
    mc.z = buf(T * di);
    mc.xr = buf(T * di);
    mc.br = buf(T * bc);
    mc.cr = buf(T * bc);
    mc.dt = buf(T * H);
    linear(n1, T, h, di, m.in_z, -1, mc.z);
    linear(n1, T, h, di, m.in_x, -1, mc.xr);
    linear(n1, T, h, bc, m.in_b, -1, mc.br);
    linear(n1, T, h, bc, m.in_c, -1, mc.cr);
    linear(n1, T, h, H, m.in_dt, -1, mc.dt);
    const MambaConv cv = mamba_conv(m, mc);
    mc.y = buf(T * di);
    be_.ssd_fwd(d_.ssd_shape(),
                cv.xs,
                mc.dt,
                params_.ref(m.dt_bias).w,
                params_.ref(m.a_log).w,
                cv.bs,
                cv.cs,
                params_.ref(m.d).w,
                mc.y);
    // RMSNormGated over d_inner / ngroups columns (mamba_mixer.py: group_size =
    // d_inner_local_tp / ngroups_local_tp), gate z before the norm.
    const int64_t groups = d_.ssm_groups_local();
    mc.g = buf(T * di);
    mc.rstd = buf(T * groups);
    be_.gated_rmsnorm_fwd(
        mc.y, mc.z, T, di, di / groups, params_.ref(m.norm_g).w, d_.eps, mc.g, mc.rstd);
    Buffer o = buf(T * h);
    linear(mc.g, T, di, h, m.out, -1, o);
    o = reduce_out(std::move(o));
    be_.axpy(1.0f, x, o);  // residual
    lc.x = std::move(x);
    return o;
}

Buffer Transformer::mamba_bwd(const LayerHandles& l, View dy, LayerCache& lc) {
    const int64_t T = d_.tokens();
    const int64_t Tl = d_.local_tokens();
    const int64_t h = d_.hidden;
    const int64_t di = d_.d_inner_local();
    const int64_t bc = d_.bc_local();
    const int64_t H = d_.ssm_heads_local();
    const int64_t K = d_.ssm.conv_kernel;
    const MambaHandles& m = l.mamba;
    MambaCache& mc = lc.mamba;
    Buffer dy_storage;
    const View dyf = gather_seq(dy, dy_storage);
    Buffer dg = buf(T * di);
    linear_bwd(mc.g, dyf, T, di, h, m.out, -1, dg, 0.0f);
    const int64_t groups = d_.ssm_groups_local();
    Buffer dscan = buf(T * di);
    Buffer dz = buf(T * di);
    const ParamRef norm_g = params_.ref(m.norm_g);
    be_.gated_rmsnorm_bwd(dg, mc.y, mc.z, T, di, di / groups, norm_g.w, mc.rstd, dscan, dz, norm_g.g);
    dg = Buffer();
    // The conv and its SiLU again, from the saved in_proj outputs.
    MambaConv cv = mamba_conv(m, mc);
    Buffer dxs = buf(T * di);
    Buffer ddt = buf(T * H);
    Buffer dbs = buf(T * bc);
    Buffer dcs = buf(T * bc);
    const ParamRef dt_bias = params_.ref(m.dt_bias);
    const ParamRef a_log = params_.ref(m.a_log);
    const ParamRef dskip = params_.ref(m.d);
    be_.ssd_bwd(d_.ssd_shape(),
                cv.xs,
                mc.dt,
                dt_bias.w,
                a_log.w,
                cv.bs,
                cv.cs,
                dskip.w,
                dscan,
                dxs,
                ddt,
                dbs,
                dcs,
                dt_bias.g,
                a_log.g,
                dskip.g);
    dscan = Buffer();
    // Back through SiLU and the conv, to the in_proj outputs.
    const auto conv_bwd = [&](View in, View pre, View dout, int64_t ch, int64_t w, int64_t b) {
        Buffer dpre = buf(T * ch);
        be_.silu_bwd(pre, dout, dpre);
        Buffer din = buf(T * ch);
        const ParamRef pw = params_.ref(w);
        be_.causal_conv1d_bwd(
            in, dpre, d_.seq, d_.batch, ch, K, pw.w, din, pw.g, params_.ref(b).g);
        return din;
    };
    const Buffer dxr = conv_bwd(mc.xr, cv.xc, dxs, di, m.conv_x_w, m.conv_x_b);
    const Buffer dbr = conv_bwd(mc.br, cv.bc, dbs, bc, m.conv_b_w, m.conv_b_b);
    const Buffer dcr = conv_bwd(mc.cr, cv.cc, dcs, bc, m.conv_c_w, m.conv_c_b);
    cv = MambaConv();
    const View n1 = d_.sp ? lc.n1_full.view() : lc.n1.view();
    Buffer dn1 = buf(T * h);
    linear_bwd(n1, dz, T, h, di, m.in_z, -1, dn1, 0.0f);
    linear_bwd(n1, dxr, T, h, di, m.in_x, -1, dn1, 1.0f);
    linear_bwd(n1, dbr, T, h, bc, m.in_b, -1, dn1, 1.0f);
    linear_bwd(n1, dcr, T, h, bc, m.in_c, -1, dn1, 1.0f);
    linear_bwd(n1, ddt, T, h, H, m.in_dt, -1, dn1, 1.0f);
    dn1 = reduce_out(std::move(dn1));
    Buffer dx = buf(Tl * h);
    norm_bwd(dn1, lc.x, l.norm1_g, l.norm1_b, lc.mean1, lc.rstd1, dx);
    return dx;
}

}  // namespace cleave::executor
