// The hand-written backward of the MoE MLP (executor/moe.cpp), checked against finite
// differences in tests/executor/test_gradcheck.cpp: the combine's gradient is dispatched to the
// experts by the same all-to-all as the tokens, the experts' input gradients come back by the
// reverse one, and the router gets the gate and load-balancing gradients through the softmax.
#include "executor/moe.hpp"
#include "executor/transformer.hpp"

namespace cleave::executor {

namespace {

size_t idx(int64_t i) {
    return static_cast<size_t>(i);
}

// d logits (n x E) from d gates (n x k): through the renormalisation and the softmax, plus
// `aux` * C_e on every probability (see moe_router_bwd).
std::vector<float>
router_logit_grads(const MoeDims& m, const MoeCache& mc, const std::vector<float>& dg, double aux) {
    const int64_t E = m.experts;
    const int64_t K = m.top_k;
    std::vector<float> dz(idx(mc.tokens * E));
    std::vector<double> dp(idx(E));
    for (int64_t t = 0; t < mc.tokens; ++t) {
        const float* p = &mc.probs[idx(t * E)];
        double s = 0.0;
        double dot = 0.0;
        for (int64_t k = 0; k < K; ++k) {
            s += p[mc.chosen[idx(t * K + k)]];
            dot += static_cast<double>(dg[idx(t * K + k)]) * mc.gates[idx(t * K + k)];
        }
        for (int64_t e = 0; e < E; ++e) {
            dp[idx(e)] = aux * mc.expert_load[idx(e)];
        }
        for (int64_t k = 0; k < K; ++k) {
            dp[idx(mc.chosen[idx(t * K + k)])] += (dg[idx(t * K + k)] - dot) / s;
        }
        double pdp = 0.0;
        for (int64_t e = 0; e < E; ++e) {
            pdp += p[e] * dp[idx(e)];
        }
        for (int64_t e = 0; e < E; ++e) {
            dz[idx(t * E + e)] = static_cast<float>(p[e] * (dp[idx(e)] - pdp));
        }
    }
    return dz;
}

// d gate_tk = dy_t . expert_k(x_t) for every slot.
std::vector<float>
gate_grads(const std::vector<float>& dy, const MoeCache& mc, int64_t h, int64_t K) {
    std::vector<float> dgate(idx(mc.tokens * K));
    for (int64_t slot = 0; slot < mc.tokens * K; ++slot) {
        double dot = 0.0;
        for (int64_t c = 0; c < h; ++c) {
            dot += static_cast<double>(dy[idx((slot / K) * h + c)]) * mc.slot_out[idx(slot * h + c)];
        }
        dgate[idx(slot)] = static_cast<float>(dot);
    }
    return dgate;
}

}  // namespace

// Each local expert's backward on its block: weight gradients accumulate, dx is this rank's
// shard's contribution (the source sums the etp partials).
Buffer Transformer::moe_experts_bwd(const LayerHandles& l, MoeCache& mc, View dy) {
    const int64_t h = d_.hidden;
    const int64_t f = d_.moe.ffn_local();
    const int64_t R = static_cast<int64_t>(mc.to_expert_major.size());
    Buffer dx = buf(R * h);
    Buffer dact = buf(R * f);
    Buffer da = buf(R * f);
    Buffer dup = d_.swiglu ? buf(R * f) : Buffer();
    int64_t off = 0;
    for (size_t le = 0; le < l.experts.size(); ++le) {
        const int64_t n = mc.expert_rows[le];
        const ExpertHandles& e = l.experts[le];
        if (n > 0) {
            const View xr = mc.xr.view().slice(off * h, n * h);
            const View dyr = dy.slice(off * h, n * h);
            const View dxr = dx.view().slice(off * h, n * h);
            const auto rows_f = [&](const Buffer& b) { return b.view().slice(off * f, n * f); };
            linear_bwd(rows_f(mc.act), dyr, n, f, h, e.w2, -1, rows_f(dact), 0.0f);
            if (d_.swiglu) {
                be_.swiglu_bwd(rows_f(mc.a), rows_f(mc.up), rows_f(dact), rows_f(da), rows_f(dup));
                linear_bwd(xr, rows_f(da), n, h, f, e.w1, -1, dxr, 0.0f);
                linear_bwd(xr, rows_f(dup), n, h, f, e.w3, -1, dxr, 1.0f);
            } else {
                act_bwd(rows_f(mc.a), rows_f(dact), rows_f(da));
                linear_bwd(xr, rows_f(da), n, h, f, e.w1, -1, dxr, 0.0f);
            }
        }
        off += n;
    }
    return dx;
}

// Router: dgate -> dprob of the chosen experts through the renormalisation g_k = p_k / s
// (s = sum of the chosen p): dp_m = (dg_m - sum_k dg_k g_k) / s; the load-balancing loss adds
// w alpha E C_e / (k T^2) to every dp_e (d aux / d S_e, eq. 4 in moe.cpp; C_e carries no
// gradient); softmax: dz_e = p_e (dp_e - sum_j p_j dp_j). Then dW_router += x^T dz and
// dx = dz W_router^T.
Buffer
Transformer::moe_router_bwd(const LayerHandles& l, View x, const MoeCache& mc, View dslot_gate) {
    const MoeDims& m = d_.moe;
    const int64_t E = m.experts;
    std::vector<float> dg(idx(mc.tokens * m.top_k));
    be_.download(dg, dslot_gate);
    const auto T = static_cast<double>(d_.tokens());
    const double aux = static_cast<double>(m.microbatch_weight) * m.aux_coeff *
                       static_cast<double>(E) / (static_cast<double>(m.top_k) * T * T);
    Buffer dz = buf(mc.tokens * E);
    be_.upload(dz, router_logit_grads(m, mc, dg, aux));
    const ParamRef r = params_.ref(l.router);
    be_.gemm(Trans::yes, Trans::no, d_.hidden, E, mc.tokens, 1.0f, x, dz, 1.0f, r.g);
    Buffer dx = buf(mc.tokens * d_.hidden);
    be_.gemm(Trans::no, Trans::yes, mc.tokens, d_.hidden, E, 1.0f, dz, r.w, 0.0f, dx);
    return dx;
}

Buffer Transformer::moe_bwd(const LayerHandles& l, View x, View dy, MoeCache& mc) {
    const int64_t h = d_.hidden;
    const int64_t K = d_.moe.top_k;
    const int64_t n = mc.tokens;
    std::vector<float> dout(idx(n * h));
    be_.download(dout, dy);
    // d expert_k(x_t) = gate_tk dy_t, sent in dispatch order.
    std::vector<float> rows(mc.send_rows.size() * idx(h));
    for (size_t i = 0; i < mc.send_rows.size(); ++i) {
        const int64_t slot = mc.send_rows[i];
        const float g = mc.gates[idx(slot)];
        for (int64_t c = 0; c < h; ++c) {
            rows[i * idx(h) + idx(c)] = g * dout[idx((slot / K) * h + c)];
        }
    }
    Buffer send = buf(static_cast<int64_t>(rows.size()));
    be_.upload(send, rows);
    Buffer dyr = moe_exchange(send, mc, true, "ep all_to_all dispatch (backward)");
    Buffer dxr = moe_experts_bwd(l, mc, dyr);
    Buffer back = moe_exchange(dxr, mc, false, "ep all_to_all combine (backward)");
    be_.download(rows, back);
    Buffer dg = buf(n * K);
    be_.upload(dg, gate_grads(dout, mc, h, K));
    Buffer dx = moe_router_bwd(l, x, mc, dg);
    std::vector<float> dxh(idx(n * h));
    be_.download(dxh, dx);
    for (size_t i = 0; i < mc.send_rows.size(); ++i) {
        const int64_t t = mc.send_rows[i] / K;
        for (int64_t c = 0; c < h; ++c) {
            dxh[idx(t * h + c)] += rows[i * idx(h) + idx(c)];
        }
    }
    be_.upload(dx, dxh);
    return dx;
}

}  // namespace cleave::executor
