#include "costmodel/splits.hpp"
#include "costmodel/num.hpp"

#include "costmodel/flops.hpp"

#include <algorithm>
#include <cmath>

namespace cleave {

namespace {

using detail::d;

/// The plan's stage-layer rules, for a pipeline of (pp, vpp) with split `s`.
bool accepted(
    const ModelSpec& m, const JobSpec& job, int64_t pp, int64_t vpp, Split s, bool even_chunks) {
    Plan p;
    p.pp = pp;
    p.vpp = vpp;
    p.schedule = vpp > 1 ? Schedule::interleaved : Schedule::one_f_one_b;
    p.first_layers = s.first;
    p.last_layers = s.last;
    if (!(keeps(Rule::sizes, m, job, p) && keeps(Rule::stage_split, m, job, p) &&
          keeps(Rule::stage_layers, m, job, p) && keeps(Rule::vpp_chunks, m, job, p))) {
        return false;
    }
    if (!even_chunks || vpp <= 1) {
        return true;
    }
    const StageLayers sl = stage_layers(m.layers, p);
    const auto end_ok = [vpp](int64_t n) { return n % vpp == 0 || (n + 1) % vpp == 0; };
    return end_ok(sl.first) && end_ok(sl.last) && (pp <= 2 || sl.middle % vpp == 0);
}

/// The split with first / last set to the counts given, or the even split when they equal the
/// middle share (so each map has one spelling).
Split normal(int64_t layers, int64_t pp, Split s) {
    Plan p;
    p.pp = pp;
    p.first_layers = s.first;
    p.last_layers = s.last;
    return uneven_stages(layers, p) ? s : Split{};
}

double load(int64_t layers, int64_t pp, int64_t vpp, Split s, const SplitWeights& w) {
    Plan p;
    p.pp = pp;
    p.vpp = std::max<int64_t>(1, vpp);
    p.first_layers = s.first;
    p.last_layers = s.last;
    if (!w.layer.empty()) {
        // Each stage's own layers, chunk by chunk (virtual-stage order c * pp + s).
        double worst = 0.0;
        for (int64_t st = 0; st < pp; ++st) {
            double sum = (st == 0 ? w.embedding : 0.0) + (st == pp - 1 ? w.output : 0.0);
            for (int64_t c = 0; c < p.vpp; ++c) {
                const int64_t first = chunk_first_layer(layers, p, st, c);
                const int64_t n = chunk_layers(layers, p, st, c);
                for (int64_t i = first; i < first + n && i < layers; ++i) {
                    sum += w.layer[static_cast<std::size_t>(i)];
                }
            }
            worst = std::max(worst, sum);
        }
        return worst;
    }
    const StageLayers sl = stage_layers(layers, p);
    const double ends = std::max(d(sl.first) + w.embedding, d(sl.last) + w.output);
    return pp > 2 ? std::max(ends, d(sl.middle)) : ends;
}

}  // namespace

SplitWeights split_weights(const ModelSpec& m, const JobSpec& job) {
    if (is_hybrid(m)) {
        // Work per token of each layer by kind (forward FLOPs; the backward is twice each).
        // The attention core 4 s a d with the config's head width (Nemotron-H: 128, not
        // hidden / heads), halved where the stack's kernel skips the masked half of a causal
        // sequence (SoftwareStack::causal_skip): the stages balance in time, not in the FLOPs
        // a paper counts.
        const int64_t head = m.head_size > 0 ? m.head_size : m.hidden / std::max<int64_t>(1, m.heads);
        const double attn_core =
            (job.stack.causal_skip ? 2.0 : 4.0) * d(job.seq_len) * d(m.heads) * d(head);
        const auto work = [&](LayerKind k) {
            switch (k) {
            case LayerKind::attention:
                return 2.0 * gemm_params_active(m, false, LayerShape::attention) + attn_core;
            case LayerKind::mlp:
                return 2.0 * gemm_params_active(m, false, LayerShape::ffn);
            case LayerKind::moe:
                return 2.0 * gemm_params_active(m, true, LayerShape::ffn);
            case LayerKind::mamba:
                return 2.0 * mamba_gemm_params(m) + mamba_scan_flops_per_token(m);
            case LayerKind::gdn:
                return 2.0 * gdn_gemm_params(m) + gdn_scan_flops_per_token(m);
            }
            return 0.0;
        };
        SplitWeights w;
        double total = 0.0;
        for (const LayerKind k : m.layer_kinds) {
            w.layer.push_back(work(k));
            total += w.layer.back();
        }
        const double mean = total / d(std::max<int64_t>(1, m.layers));
        for (double& x : w.layer) {
            x /= mean;
        }
        w.output = 2.0 * d(m.hidden) * d(m.vocab) / mean;
        if (job.mtp && m.mtp_layers > 0) {  // as below: one more block, its projection, a head
            w.output += d(m.mtp_layers * std::max<int64_t>(1, job.mtp_repeats)) *
                        (1.0 + 4.0 * d(m.hidden) * d(m.hidden) / mean + w.output);
        }
        return w;
    }
    const int64_t n_moe = moe_layers_in(m, 0, m.layers);
    const double g = (d(m.layers - n_moe) * gemm_params_active(m, false) +
                      d(n_moe) * (n_moe > 0 ? gemm_params_active(m, true) : 0.0)) /
                     d(std::max<int64_t>(1, m.layers));
    const double attn =
        4.0 * d(job.seq_len) * d(m.heads) * d(m.hidden / std::max<int64_t>(1, m.heads));
    SplitWeights w;
    const double layer = 2.0 * g + attn;
    w.output = 2.0 * d(m.hidden) * d(m.vocab) / layer;
    if (n_moe > 0 && n_moe < m.layers) {
        // Dense and MoE layers mixed (DeepSeek-V3's first 3 dense, moe_layer_freq patterns):
        // each layer weighs its own 2 G + attention over the mean `layer`, so a stage holding
        // the dense layers is not taken for as heavy as one of MoE layers.
        const double dense = 2.0 * gemm_params_active(m, false) + attn;
        const double moe = 2.0 * gemm_params_active(m, true) + attn;
        for (int64_t i = 0; i < m.layers; ++i) {
            w.layer.push_back((is_moe_layer(m, i) ? moe : dense) / layer);
        }
    }
    if (job.mtp && m.mtp_layers > 0) {
        // Each trained MTP module on the last stage: one more block (~ one layer), its 2h -> h
        // projection (2 x 2h x h per token) and another output head.
        w.output += d(m.mtp_layers * std::max<int64_t>(1, job.mtp_repeats)) *
                    (1.0 + 4.0 * d(m.hidden) * d(m.hidden) / layer + w.output);
    }
    return w;
}

std::vector<Split> balanced_splits(const ModelSpec& m,
                                   const JobSpec& job,
                                   int64_t pp,
                                   int64_t vpp,
                                   const SplitWeights& w,
                                   bool even_chunks) {
    std::vector<Split> out;
    const int64_t layers = m.layers;
    const double ideal = (d(layers) + w.embedding + w.output) / d(pp);
    const auto add = [&](Split s) {
        s = normal(layers, pp, s);
        if (accepted(m, job, pp, vpp, s, even_chunks) && load(layers, pp, vpp, s, w) <= ideal + 1.0 &&
            std::find(out.begin(), out.end(), s) == out.end()) {
            out.push_back(s);
        }
    };
    if (pp <= 1) {
        add(Split{});
        return out;
    }
    if (layers % pp == 0) {
        add(Split{});
    }
    // The least slowest-stage load over middle shares near the ideal; ends within that share.
    Split best;
    double best_load = HUGE_VAL;
    const auto lo = std::max<int64_t>(1, static_cast<int64_t>(std::floor(ideal)) - 1);
    const auto hi = pp > 2 ? static_cast<int64_t>(std::ceil(ideal)) + 1 : lo;
    for (int64_t mid = lo; mid <= hi; ++mid) {
        const int64_t ends = layers - (pp - 2) * mid;
        for (int64_t f = 1; f < ends; ++f) {
            const Split s = normal(layers, pp, {f, ends - f});
            const double l = load(layers, pp, vpp, s, w);
            if (l < best_load && accepted(m, job, pp, vpp, s, even_chunks)) {
                best_load = l;
                best = s;
            }
        }
    }
    if (best_load < HUGE_VAL) {
        add(best);
    }
    if ((layers + 2) % pp == 0) {
        const int64_t share = (layers + 2) / pp;
        add(Split{share - 1, share - 1});
    }
    return out;
}

}  // namespace cleave
