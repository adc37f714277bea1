// A layer's kernel launches and the gaps between them (costmodel/launches.hpp).
#include "costmodel/launches.hpp"

#include <algorithm>

namespace cleave {

LayerLaunches layer_launches(const ModelSpec& m,
                             const JobSpec& job,
                             const Plan& p,
                             bool moe,
                             bool has_attn,
                             bool has_ffn,
                             const LaunchInputs& in) {
    LayerLaunches l;
    const bool titan = job.stack.framework == StackFramework::torchtitan;
    const double wgrad = job.peft == Peft::none ? 2.0 : 1.0;  // frozen base: dgrad alone
    const double cp = static_cast<double>(std::max<int64_t>(1, p.cp));
    double attn_gemms = 0.0;
    double ffn_gemms = 0.0;
    double attn_mem = 0.0;
    if (has_attn) {
        attn_gemms = m.mla.enabled() ? 5.0 : titan ? 4.0 : 2.0;
        // Its norm (MLA: and the two latent norms), residual add, RoPE on q and k.
        attn_mem = 1.0 + (m.mla.enabled() ? 2.0 : 0.0) + 1.0 +
                   (m.positions == PositionKind::rope ? 2.0 : 0.0);
    }
    double experts = 0.0;
    if (has_ffn) {
        if (moe) {
            experts = 2.0 * (in.batched_experts ? 1.0 : std::max(1.0, in.local_experts));
            ffn_gemms = 1.0 + (m.moe.shared_ffn_hidden > 0 ? 2.0 : 0.0);  // router, shared
            l.router_fwd = 3.0 + 2.0;  // router GEMM, softmax, top-k; preprocessing
            l.router_bwd = 3.0;
        } else {
            ffn_gemms = titan ? 3.0 : 2.0;
        }
    }
    const double gemms = attn_gemms + ffn_gemms + experts;
    const double attn_share_of_gemms = gemms > 0.0 ? attn_gemms / gemms : 0.0;
    // The memory-bound launches split: the attention block's own, the rest to the FFN block.
    const double attn_mem_fwd = std::min(attn_mem, in.memory_fwd);
    const double attn_mem_bwd =
        in.memory_fwd > 0.0 ? in.memory_bwd * attn_mem_fwd / in.memory_fwd : 0.0;
    const double core = has_attn ? cp : 0.0;
    l.attn_fwd = attn_gemms + core + attn_mem_fwd + in.casts * attn_share_of_gemms;
    l.attn_bwd = attn_gemms * wgrad + core + attn_mem_bwd + in.casts * attn_share_of_gemms;
    l.ffn_fwd = ffn_gemms + experts + (in.memory_fwd - attn_mem_fwd) +
                in.casts * (1.0 - attn_share_of_gemms);
    l.ffn_bwd = (ffn_gemms + experts) * wgrad + (in.memory_bwd - attn_mem_bwd) +
                in.casts * (1.0 - attn_share_of_gemms);
    if (job.peft != Peft::none) {
        const auto adapted = [&job](uint8_t bit) { return (job.lora_targets & bit) != 0 ? 1.0 : 0.0; };
        const double a = has_attn ? adapted(lora_target::linear_qkv) + adapted(lora_target::linear_proj) : 0.0;
        const double f = has_ffn && !moe ? adapted(lora_target::linear_fc1) + adapted(lora_target::linear_fc2) : 0.0;
        l.attn_fwd += 4.0 * a;
        l.attn_bwd += 6.0 * a;
        l.ffn_fwd += 4.0 * f;
        l.ffn_bwd += 6.0 * f;
    }
    return l;
}

double uncaptured_launches(const JobSpec& job, const LayerLaunches& l, bool moe, bool fwd) {
    const double attn = fwd ? l.attn_fwd : l.attn_bwd;
    const double ffn = fwd ? l.ffn_fwd : l.ffn_bwd;
    const double router = fwd ? l.router_fwd : l.router_bwd;
    if (job.cuda_graph_impl == CudaGraphImpl::none) {
        return attn + ffn;
    }
    namespace cg = cuda_graph_scope;
    const uint8_t s = job.cuda_graph_scope;
    if ((s & cg::full_iteration) != 0) {
        return 0.0;
    }
    double left = (s & cg::attn) != 0 ? 0.0 : attn;
    if (!moe) {
        left += (s & cg::mlp) != 0 ? 0.0 : ffn;
    } else if ((s & cg::moe) != 0) {
        // the whole MoE layer's FFN block
    } else {
        const bool router_part = (s & (cg::moe_router | cg::moe_preprocess)) != 0;
        left += ffn - (router_part ? std::min(router, ffn) : 0.0);
    }
    return left;
}

Seconds launch_gap_time(const GpuSpec& gpu, const JobSpec& job, const LayerLaunches& l, bool moe,
                        bool fwd) {
    return gpu.launch_gap * uncaptured_launches(job, l, moe, fwd);
}

}  // namespace cleave
