// Kernel prices (costmodel/compute.hpp): GEMMs by shape and pass, the routed experts' GEMMs at
// their load, the memory-bound kernel classes and their launches, the casts of quantised training,
// norms without a tuned kernel, the straggler's pace.
#include "costmodel/compute.hpp"
#include "costmodel/compute_internal.hpp"
#include "costmodel/float8.hpp"
#include "costmodel/num.hpp"
#include "costmodel/precision.hpp"

#include <algorithm>
#include <cmath>

namespace cleave {

namespace {

using detail::d;
using detail::gemm_lookup_size;

}  // namespace

std::pair<int64_t, int64_t> router_groups(const ModelSpec& m, const JobSpec& job) {
    if (job.moe_router_groups > 0) {
        return {job.moe_router_groups, job.moe_router_group_topk};
    }
    return {m.moe.router_groups, m.moe.router_group_topk};
}

double expected_max_normal(int64_t n) {
    if (n <= 1) {
        return 0.0;
    }
    // One job has one GPU count: keep the last answer (the planner prices every candidate of a
    // job with the same n).
    thread_local int64_t last_n = 0;
    thread_local double last_z = 0.0;
    if (n == last_n) {
        return last_z;
    }
    const double q = (static_cast<double>(n) - 0.375) / (static_cast<double>(n) + 0.25);
    // Phi^-1(q) by Newton's method on Phi(z) = erfc(-z / sqrt 2) / 2, from z = 0 (Phi is convex
    // for z > 0, so the iterates rise monotonically to the root; q > 1/2 for n >= 2).
    double z = 0.0;
    for (int i = 0; i < 40; ++i) {
        const double phi = 0.5 * std::erfc(-z / std::sqrt(2.0));
        const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI);
        const double step = (phi - q) / pdf;
        z -= step;
        if (std::abs(step) < 1e-12) {
            break;
        }
    }
    last_n = n;
    last_z = z;
    return z;
}

double straggler_factor(const GpuSpec& gpu, int64_t gpus) {
    if (gpu.throughput_spread <= 0.0) {
        return 1.0;
    }
    return 1.0 + gpu.throughput_spread * expected_max_normal(gpus);
}

double activation_bytes(const JobSpec& job) {
    return job.compute == Dtype::fp32 ? 4.0 : 2.0;
}


double gemm_pass_bytes(const GemmShape& g, GemmPass pass, double operand_B) {
    const double mk = g.m * g.k;
    const double kn = g.k * g.n;
    const double mn = g.m * g.n;
    switch (pass) {
    case GemmPass::fprop:
        return (mk + kn) * operand_B + 2.0 * mn;
    case GemmPass::dgrad:
        return (mn + kn) * operand_B + 2.0 * mk;
    case GemmPass::wgrad:
        return (mk + mn) * operand_B + 8.0 * kn;
    }
    return 0.0;
}

Seconds shaped_gemm_time(
    const GpuSpec& gpu, Dtype run, double tensor_efficiency, const GemmShape& g, GemmPass pass) {
    const Flops f = gemm_flops(g);
    if (f.value() <= 0.0) {
        return {};
    }
    const double e = std::min(tensor_efficiency, tensor_clock_ceiling(gpu));
    const double stream = gpu.hbm_efficiency > 0.0 ? gpu.hbm_efficiency : 1.0;
    return f / (peak_flops(gpu, run) * e) +
           bytes(gemm_pass_bytes(g, pass, bytes_of(run)) * g.count) / (gpu.hbm_bw * stream);
}

namespace {

// The profile's shape model for GEMMs run in `run` (0: none, the size curve prices them).
double tensor_efficiency(const GpuSpec& gpu, Dtype run) {
    return run == Dtype::fp8 && peak_flops(gpu, run).value() > 0.0 && gpu.hbm_bw.value() > 0.0
               ? gpu.gemm_tensor_efficiency_fp8
               : 0.0;
}

}  // namespace

double compute_sm_share(const GpuSpec& gpu, const JobSpec& job, const Plan& p) {
    const int64_t held = job.stack.moe_deepep_num_sms;
    const bool beside = bidirectional(p.schedule) || job.stack.moe_a2a_overlap;
    if (job.stack.moe_dispatcher != MoeDispatcher::deepep || p.ep <= 1 || !beside ||
        gpu.sm_count <= 0 || held <= 0 || held >= gpu.sm_count) {
        return 1.0;
    }
    return d(gpu.sm_count - held) / d(gpu.sm_count);
}

Seconds gemm_time(const GpuSpec& gpu, Dtype dtype, const GemmShape& g, GemmPass pass) {
    const Flops f = gemm_flops(g);
    if (f.value() <= 0.0) {
        return {};
    }
    // A precision the GPU lacks runs in the next wider one it has (fp8 on an A100: bf16).
    const Dtype run = runnable_dtype(gpu, dtype);
    if (const double e = tensor_efficiency(gpu, run); e > 0.0) {
        return shaped_gemm_time(gpu, run, e, g, pass);
    }
    FlopsPerSecond peak = peak_flops(gpu, run);
    if (peak.value() <= 0.0) {
        peak = gpu.peak_fp32;
    }
    // Each precision has its own curve.
    double eff = gemm_efficiency(gpu, gemm_lookup_size(gpu, g), run);
    if (eff <= 0.0) {
        eff = 1.0;  // no curve in the profile: peak
    }
    return f / (peak * eff);
}

double expert_load_ratio(const JobSpec& job) {
    const double r = std::max(1.0, job.moe_imbalance);
    if (job.moe_pad && job.moe_capacity > 0.0) {
        return job.moe_capacity;  // every expert padded to (and capped at) the capacity
    }
    return job.moe_capacity > 0.0 ? std::min(r, job.moe_capacity) : r;
}

namespace {

// Tokens of an expert other than the busiest over the average: 1, capped by the capacity;
// padded, exactly the capacity (Megatron moe_utils.py get_capacity; token_dispatcher.py
// drop_and_pad).
double other_expert_load(const JobSpec& job) {
    if (job.moe_capacity <= 0.0) {
        return 1.0;
    }
    return job.moe_pad ? job.moe_capacity : std::min(1.0, job.moe_capacity);
}

}  // namespace

double rank_load_ratio(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    const double local = d(m.moe.experts) / d(std::max<int64_t>(1, p.ep));
    if (local <= 0.0) {
        return 1.0;
    }
    return (expert_load_ratio(job) + (local - 1.0) * other_expert_load(job)) / local;
}

ExpertGemms expert_gemms(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    ExpertGemms e;
    const double local = d(m.moe.experts) / d(std::max<int64_t>(1, p.ep));
    if (local <= 0.0) {
        return e;
    }
    const double etp = d(expert_tp(p));
    const double rows = tokens_per_gpu(job, p) / d(p.tp) * d(m.moe.top_k) * etp / local;
    const double rest = other_expert_load(job);
    const double f = d(m.moe.expert_ffn_hidden) / etp;
    const double in_mult = m.mlp == MlpKind::swiglu ? 2.0 : 1.0;
    const double h = d(moe_token_width(m));  // the experts' input width (LatentMoE: latent)
    const double hot = rows * expert_load_ratio(job);
    e.avg_in = {rows * rest, in_mult * f, h, 1.0};
    e.avg_out = {rows * rest, h, f, 1.0};
    e.hot_in = {hot, in_mult * f, h, 1.0};
    e.hot_out = {hot, h, f, 1.0};
    e.others = local - 1.0;
    return e;
}

Seconds expert_gemm_time(const GpuSpec& gpu,
                         const JobSpec& job,
                         const GemmShape& g,
                         Flops group,
                         double local,
                         GemmPass pass) {
    const Flops f = gemm_flops(g);
    if (f.value() <= 0.0) {
        return {};
    }
    const Dtype run = runnable_dtype(gpu, job.compute);
    if (const double e = tensor_efficiency(gpu, run); e > 0.0) {
        return shaped_gemm_time(gpu, run, e, g, pass);
    }
    FlopsPerSecond peak = peak_flops(gpu, run);
    if (peak.value() <= 0.0) {
        peak = gpu.peak_fp32;
    }
    const SoftwareStack& st = job.stack;
    const double streams = d(st.moe_grouped_gemm_streams);
    const Flops lookup = !st.moe_grouped_gemm ? f
                         : streams > 0.0      ? f * std::max(1.0, std::min(local, streams))
                                              : group;
    double eff = gemm_efficiency(gpu, lookup, run);
    if (eff <= 0.0) {
        eff = 1.0;
    }
    // Roofline: the expert's weight (k x n) and its rows in and out (m x k, m x n) cross HBM
    // at least once (Williams et al. 2009, Roofline, CACM 52(4)).
    const Bytes stream = bytes((g.m * g.k + g.k * g.n + g.m * g.n) * g.count * bytes_of(run));
    return max(f / (peak * eff), stream / gpu.hbm_bw);
}

const char* to_string(KernelClass k) {
    switch (k) {
    case KernelClass::norm:
        return "norm";
    case KernelClass::elementwise:
        return "elementwise";
    case KernelClass::activation:
        return "activation";
    case KernelClass::gated_activation:
        return "gated_activation";
    case KernelClass::softmax:
        return "softmax";
    case KernelClass::cross_entropy:
        return "cross_entropy";
    case KernelClass::optimizer:
        return "optimizer";
    case KernelClass::ssm:
        return "ssm";
    }
    return "";
}

double& kernel_efficiency_field(GpuSpec& gpu, KernelClass k) {
    switch (k) {
    case KernelClass::norm:
        return gpu.norm_efficiency;
    case KernelClass::elementwise:
        return gpu.elementwise_efficiency;
    case KernelClass::activation:
        return gpu.activation_efficiency;
    case KernelClass::gated_activation:
        return gpu.gated_activation_efficiency;
    case KernelClass::softmax:
        return gpu.softmax_efficiency;
    case KernelClass::cross_entropy:
        return gpu.cross_entropy_efficiency;
    case KernelClass::optimizer:
        return gpu.optimizer_efficiency;
    case KernelClass::ssm:
        return gpu.ssm_efficiency;
    }
    CLEAVE_ASSERT(false, "kernel_efficiency_field: unknown kernel class");
    return gpu.hbm_efficiency;
}

double kernel_efficiency(const GpuSpec& gpu, KernelClass k) {
    double e = kernel_efficiency_field(const_cast<GpuSpec&>(gpu), k);
    if (e <= 0.0) {
        e = gpu.hbm_efficiency;
    }
    return e > 0.0 ? e : 1.0;
}

Seconds memory_time(const GpuSpec& gpu, KernelClass k, Bytes b) {
    return b / (gpu.hbm_bw * kernel_efficiency(gpu, k));
}

double quantize_efficiency(const GpuSpec& gpu, const JobSpec& job) {
    if (gpu.quantize_efficiency > 0.0) {
        return gpu.quantize_efficiency;
    }
    double e = 0.0;
    switch (job.compute) {
    case Dtype::fp8:
        // torchao's casts (inductor-fused under compile) at the per-tensor rate, every recipe:
        // a guess, no torchao cast measured (costmodel/float8.hpp).
        e = float8_run(job).active                    ? gpu.quantize_efficiency_tensorwise
            : job.fp8_recipe == Fp8Recipe::blockwise  ? gpu.quantize_efficiency_blockwise
            : job.fp8_recipe == Fp8Recipe::tensorwise ? gpu.quantize_efficiency_tensorwise
                                                      : gpu.quantize_efficiency_delayed;
        break;
    case Dtype::mxfp8:
        e = gpu.quantize_efficiency_mxfp8;
        break;
    case Dtype::nvfp4:
        e = gpu.quantize_efficiency_nvfp4;
        break;
    default:
        break;
    }
    return e > 0.0 ? e : kernel_efficiency(gpu, KernelClass::elementwise);
}

Seconds quantize_time(const GpuSpec& gpu, const JobSpec& job, Bytes b) {
    return b / (gpu.hbm_bw * quantize_efficiency(gpu, job));
}

Seconds memory_time(const GpuSpec& gpu, const KernelBytes& b, const KernelLaunches& n) {
    const auto floored = [&gpu](KernelClass k, Bytes x, double launches) {
        return max(memory_time(gpu, k, x), gpu.kernel_floor * launches);
    };
    return floored(KernelClass::norm, b.norm, n.norm) +
           floored(KernelClass::elementwise, b.elementwise, n.elementwise) +
           floored(KernelClass::activation, b.activation, n.activation) +
           floored(KernelClass::gated_activation, b.gated_activation, n.gated_activation) +
           floored(KernelClass::softmax, b.softmax, n.softmax) +
           memory_time(gpu, KernelClass::cross_entropy, b.cross_entropy) +
           memory_time(gpu, KernelClass::optimizer, b.optimizer) +
           memory_time(gpu, KernelClass::ssm, b.ssm);
}

double norm_kernel_factor(const SoftwareStack& s, NormKind kind, double width, bool backward) {
    const std::vector<double>& tuned =
        kind == NormKind::rmsnorm ? s.norm_tuned_rmsnorm : s.norm_tuned_layernorm;
    if (tuned.empty() || std::find(tuned.begin(), tuned.end(), width) != tuned.end()) {
        return 1.0;
    }
    return backward ? s.norm_general_bwd : s.norm_general_fwd;
}

KernelBytes norm_timed(KernelBytes b, double norm_factor) {
    b.norm = b.norm * norm_factor;
    return b;
}

double deepep_rank_copies(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    const double k = d(m.moe.top_k);
    double ranks = d(std::max<int64_t>(1, p.ep));
    const auto [groups, group_topk] = router_groups(m, job);
    if (groups > 0 && group_topk > 0 && group_topk < groups) {
        ranks = std::max(1.0, ranks * d(group_topk) / d(groups));
    }
    return ranks <= 1.0 ? 1.0 : ranks * (1.0 - std::pow(1.0 - 1.0 / ranks, k));
}

}  // namespace cleave
