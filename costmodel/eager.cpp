#include "costmodel/eager.hpp"

#include "costmodel/compute.hpp"
#include "costmodel/flops.hpp"
#include "costmodel/num.hpp"

namespace cleave {

using detail::d;

namespace {

bool hf_code(const JobSpec& job) {
    return job.stack.model_code == ModelCode::hf_transformers;
}

}  // namespace

bool eager_chains(const JobSpec& job) {
    return (job.stack.framework == StackFramework::torchtitan || hf_code(job)) &&
           !job.stack.torch_compile;
}

EagerTraffic eager_traffic(
    const ModelSpec& m, const JobSpec& job, const Plan& p, bool has_attn, bool has_ffn, bool moe) {
    EagerTraffic e;
    const bool hf = hf_code(job);
    if ((job.stack.framework != StackFramework::torchtitan && !hf) || m.mla.enabled()) {
        return e;
    }
    const double a = activation_bytes(job);
    const double t = d(p.tp);
    const double tok = tokens_per_gpu(job, p);
    const double h = tok * d(m.hidden) / (p.sp ? t : 1.0);  // one norm's elements
    const double hd = d(head_dim(m));
    const double q = tok * d(m.heads) * hd / t;
    const double kv = tok * d(m.kv_heads) * hd / t;
    const double f = tok * d(m.ffn_hidden) / t;
    const bool swiglu = m.mlp == MlpKind::swiglu;
    if (has_attn && m.kv_heads < m.heads && !hf) {
        // repeat_kv: k and v expanded and copied to q's width; backward sums them back. Compiled
        // too: SDPA is an extern kernel, so Inductor materialises its expanded inputs (it may
        // fuse k's copy into RoPE: not priced).
        const double copies = 2.0 * a * (kv + q);
        e.fwd_bytes += copies;
        e.bwd_bytes += copies;
        e.fwd_launches += 2.0;
        e.bwd_launches += 2.0;
    }
    if (job.stack.torch_compile) {
        return e;
    }
    const double norms = (has_attn ? 1.0 : 0.0) + (has_ffn ? 1.0 : 0.0);
    // RMSNorm's chain (4a + 28 forward, 8a + 68 backward) against a fused norm (2a, 3a).
    const double norm_fwd = norms * h * (4.0 * a + 28.0);
    e.fwd_bytes += norm_fwd - norms * h * 2.0 * a;
    e.bwd_bytes += norms * h * (8.0 * a + 68.0 - 3.0 * a);
    e.fwd_launches += norms * 7.0;
    e.bwd_launches += norms * 12.0;
    if (has_attn && m.positions == PositionKind::rope) {
        // Against the fused rotation's 2a and 1 launch a tensor (q and k) each way: HF's
        // rotate_half 10a forward / 8a backward in 5 / 4 launches, torchtitan's complex64
        // 2a + 16 in 3 each way.
        const double fwd = hf ? 10.0 * a : 2.0 * a + 16.0;
        const double bwd = hf ? 8.0 * a : 2.0 * a + 16.0;
        e.fwd_bytes += (q + kv) * (fwd - 2.0 * a);
        e.bwd_bytes += (q + kv) * (bwd - 2.0 * a);
        e.fwd_launches += 2.0 * ((hf ? 5.0 : 3.0) - 1.0);
        e.bwd_launches += 2.0 * ((hf ? 4.0 : 3.0) - 1.0);
    }
    if (has_ffn && swiglu && !moe) {
        // silu and the gate's product apart: 5a forward, 9a backward, against 3a and 5a.
        e.fwd_bytes += 2.0 * a * f;
        e.bwd_bytes += 4.0 * a * f;
        e.fwd_launches += 1.0;
        e.bwd_launches += 2.0;
    }
    return e;
}

bool op_level_sac(const ModelSpec& m, const JobSpec& job, const Plan& p, bool moe, bool full_layer) {
    return p.recompute == Recompute::selective && job.stack.op_level_sac && !moe &&
           !m.mla.enabled() && full_layer && p.recompute_modules == 0;
}

double op_sac_recomputed_linear_share(const ModelSpec& m) {
    const double h = d(m.hidden);
    const double hd = d(head_dim(m));
    const double q = d(m.heads) * hd;
    const double kv = d(m.kv_heads) * hd;
    const double f = d(m.ffn_hidden);
    const bool gated = m.mlp == MlpKind::swiglu;
    // Parameters of each matmul in forward order (FLOPs per token are twice these, alike).
    const double wq = h * q;
    const double wk = h * kv;
    const double wv = h * kv;
    const double wo = q * h;
    const double w1 = h * f;
    const double w3 = gated ? h * f : 0.0;
    const double w2 = f * h;
    const double all = wq + wk + wv + wo + w1 + w3 + w2;
    const double again = wk + wo + (gated ? w3 : w2);
    return all > 0.0 ? again / all : 0.0;
}

}  // namespace cleave
