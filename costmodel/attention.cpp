#include "costmodel/attention.hpp"
#include "costmodel/num.hpp"

#include "costmodel/flops.hpp"
#include "costmodel/packing.hpp"
#include "costmodel/precision.hpp"

#include <algorithm>
#include <cmath>

namespace cleave {

namespace {

using detail::d;

/// ASCII lower case: std::tolower in the "C" locale cleave runs in, without its call per
/// character (the planner compares a GPU name per attention curve per layer shape).
constexpr char ascii_lower(char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool contains_nocase(const std::string& hay, const std::string& needle) {
    const auto it =
        std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                    [](char a, char b) { return ascii_lower(a) == ascii_lower(b); });
    return !needle.empty() && it != hay.end();
}

// Linear in log(x) between points, clamped at the ends (as gemm_efficiency reads its curve).
double interpolate(const std::vector<double>& xs, const std::vector<double>& ys, double x) {
    if (x <= xs.front()) {
        return ys.front();
    }
    if (x >= xs.back()) {
        return ys.back();
    }
    const auto hi =
        static_cast<std::size_t>(std::upper_bound(xs.begin(), xs.end(), x) - xs.begin());
    const std::size_t lo = hi - 1;
    const double f = std::log(x / xs[lo]) / std::log(xs[hi] / xs[lo]);
    return ys[lo] + f * (ys[hi] - ys[lo]);
}

}  // namespace

std::optional<AttentionEfficiency> fused_attention_efficiency(const SoftwareStack& stack,
                                                              const GpuSpec& gpu,
                                                              double head_dim,
                                                              double seq) {
    const AttentionCurve* best = nullptr;
    double best_dist = 0.0;
    for (const AttentionCurve& c : stack.attention_curves) {
        if (!contains_nocase(gpu.name, c.gpu) || c.seq.empty()) {
            continue;
        }
        const double dist = std::abs(std::log(head_dim / c.head_dim));
        if (best == nullptr || dist < best_dist) {
            best = &c;
            best_dist = dist;
        }
    }
    if (best == nullptr) {
        return std::nullopt;
    }
    return AttentionEfficiency{interpolate(best->seq, best->fwd, seq),
                               interpolate(best->seq, best->bwd, seq)};
}

namespace {

// One kind of layer's fused attention: `keys` keys per query (causal factor already in), read at
// `call_seq` keys per kernel call.
FusedAttentionCost fused_cost_at(const ModelSpec& m,
                                 const GpuSpec& gpu,
                                 const JobSpec& job,
                                 const Plan& p,
                                 double keys,
                                 double call_seq,
                                 double fallback_scale,
                                 Seconds fallback_fwd) {
    const SoftwareStack& st = job.stack;
    const double cp = d(std::max<int64_t>(1, p.cp));
    const double s = d(job.seq_len);
    const double hd = d(head_dim(m));
    FusedAttentionCost c;
    // 2 b (a/t) (s/cp) k (d_qk + d_v): Q K^T over d_qk, P V over d_v (= 4 b a s k d when equal).
    c.fwd_flops =
        flop(2.0 * d(p.mbs) * d(m.heads) / d(p.tp) * (s / cp) * keys * (hd + d(v_head_dim(m))));
    const Seconds overhead = us(st.attention_step_overhead_us) * cp;
    // The core runs in 16-bit even under fp8 training (Transformer Engine: linear layers only).
    FlopsPerSecond peak = peak_flops(gpu, unquantised(job.compute));  // also mxfp8 / nvfp4
    if (peak.value() <= 0.0) {
        peak = gpu.peak_fp32;
    }
    const auto eff = fused_attention_efficiency(st, gpu, hd, call_seq);
    // attention_factor: a trace calibration's measured / priced rate (1 by default).
    const double f = gpu.attention_factor > 0.0 ? gpu.attention_factor : 1.0;
    if (!eff || peak.value() <= 0.0) {
        c.fwd = fallback_fwd * (fallback_scale / f) + overhead;
        c.bwd = fallback_fwd * (2.5 * fallback_scale / f) + overhead;
        return c;
    }
    // The attention kernel is tensor-core work like a GEMM: the power-limited clock caps it too
    // (core/cluster.hpp tensor_clock_ceiling; binds only where a curve exceeds it).
    const double cap = tensor_clock_ceiling(gpu);
    c.fwd = c.fwd_flops / (peak * std::min(eff->fwd * f, cap)) + overhead;
    c.bwd = (2.5 * c.fwd_flops) / (peak * std::min(eff->bwd * f, cap)) + overhead;
    return c;
}

}  // namespace

FusedAttentionCost fused_attention_cost(const ModelSpec& m,
                                        const GpuSpec& gpu,
                                        const JobSpec& job,
                                        const Plan& p,
                                        Seconds fallback_fwd) {
    const double cp = d(std::max<int64_t>(1, p.cp));
    const double causal = job.stack.causal_skip ? 0.5 : 1.0;
    const double s = d(job.seq_len);
    // Packed sequences (costmodel/packing.hpp): a query meets the keys of its own sample, span
    // L = E[L^2] / E[L] of them instead of s, and the varlen kernel runs each sample as a call
    // of L keys (L / cp on a CP rank: THD splits every sample over the ranks, TE
    // thd_get_partitioned_indices), so its efficiency is read at L / cp.
    const double span = attention_span(job);
    const FusedAttentionCost full =
        fused_cost_at(m, gpu, job, p, span * causal, span / cp, causal * span / s, fallback_fwd);
    const double n_window = d(windowed_layer_count(m));
    if (n_window <= 0.0 || m.sliding_window <= 0 || d(m.sliding_window) >= span) {
        return full;
    }
    // A windowed layer's query i sees min(i + 1, w) keys: (s w - w (w - 1) / 2) / s per query
    // when the kernel skips the masked tiles (FA2 window_size; FA3 local attention), w without
    // (s the span: a packed sample's window restarts at its first token).
    const double w = d(m.sliding_window);
    const double keys = job.stack.causal_skip ? w - w * (w - 1.0) / (2.0 * span) : w;
    const FusedAttentionCost win =
        fused_cost_at(m, gpu, job, p, keys, std::min(span / cp, w), keys / s, fallback_fwd);
    // The layer kinds are priced per representative layer: average over the model's pattern.
    const double fw = n_window / d(m.layers);
    FusedAttentionCost c;
    c.fwd_flops = full.fwd_flops * (1.0 - fw) + win.fwd_flops * fw;
    c.fwd = full.fwd * (1.0 - fw) + win.fwd * fw;
    c.bwd = full.bwd * (1.0 - fw) + win.bwd * fw;
    return c;
}

double fused_attention_saved_bytes(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    return 4.0 * d(p.mbs) * d(m.heads) / d(p.tp) * d(job.seq_len) / d(std::max<int64_t>(1, p.cp));
}

}  // namespace cleave
