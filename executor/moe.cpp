// The MoE MLP of the executor (issue 16), forward and backward, on the rows this rank holds
// (its sequence-parallel shard: MoE with tp > 1 runs with SP, as Megatron-Core requires,
// megatron/core/model_parallel_config.py at d98e8a64).
//
// Routing (Mixtral / Qwen3-MoE order, Hugging Face MixtralSparseMoeBlock): softmax over all
// experts in fp32, the top-k probabilities, renormalised to sum to 1. Dispatch: every routed
// slot (token t, choice k) is sent to the ranks holding its expert, by one all-to-all on the
// expert-model-parallel group (ep x etp ranks); each expert sees its rows ordered by source
// rank, then token. With expert TP (etp > 1) a slot goes to all etp ranks of its expert, each
// computes its column (fc1 / gate / up) and row (fc2 / down) shard, and the source sums the
// etp partial outputs it gets back: the all-gather / reduce-scatter of Megatron's SP form,
// folded into the two all-to-alls. Combine: y_t = sum_k gate_tk * expert_k(x_t).
#include "executor/moe.hpp"

#include "executor/transformer.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace cleave::executor {

MoeDims make_moe_dims(const ModelSpec& model,
                      const Plan& plan,
                      const RankCoords& at,
                      float aux_coeff,
                      int64_t global_batch) {
    MoeDims m;
    if (!model.moe.enabled()) {
        return m;
    }
    m.experts = model.moe.experts;
    m.top_k = model.moe.top_k;
    m.ffn = model.moe.expert_ffn_hidden;
    m.ep = plan.ep;
    m.etp = expert_tp(plan);
    m.edp = expert_dp(plan);
    // Rank within the stage (cp = 1): dense tp innermost, then dp; the expert grid re-reads the
    // same index as etp innermost, then ep, then edp (Megatron-Core RankGenerator order).
    const int64_t local = at.dp_rank * plan.tp + at.tp_rank;
    m.etp_rank = local % m.etp;
    m.ep_rank = (local / m.etp) % m.ep;
    m.edp_rank = local / (m.etp * m.ep);
    m.aux_coeff = aux_coeff;
    m.microbatch_weight = static_cast<float>(plan.mbs) / static_cast<float>(global_batch);
    return m;
}

namespace {

size_t at(int64_t i) {
    return static_cast<size_t>(i);
}

// Softmax of one row of logits (fp32 output, double sums), then the top-k, ties to the lower
// expert id, and their renormalised gates.
void route_row(const float* logits,
               int64_t experts,
               int64_t top_k,
               float* probs,
               int32_t* chosen,
               float* gates) {
    const float mx = *std::max_element(logits, logits + experts);
    double sum = 0.0;
    for (int64_t e = 0; e < experts; ++e) {
        sum += std::exp(static_cast<double>(logits[e] - mx));
    }
    for (int64_t e = 0; e < experts; ++e) {
        probs[e] = static_cast<float>(std::exp(static_cast<double>(logits[e] - mx)) / sum);
    }
    std::vector<int32_t> order(at(experts));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t b) {
        return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
    });
    double kept = 0.0;
    for (int64_t k = 0; k < top_k; ++k) {
        chosen[k] = order[at(k)];
        kept += probs[order[at(k)]];
    }
    for (int64_t k = 0; k < top_k; ++k) {
        gates[k] = static_cast<float>(probs[chosen[k]] / kept);
    }
}

// Routes every row of `logits` (n x E) into mc; returns the micro-batch statistics of this
// rank's rows: C_e (routed slots of expert e), then S_e (sum of its probabilities).
std::vector<float>
route_rows(const std::vector<float>& logits, int64_t n, int64_t E, int64_t K, MoeCache& mc) {
    mc.probs.assign(at(n * E), 0.0f);
    mc.chosen.assign(at(n * K), 0);
    mc.gates.assign(at(n * K), 0.0f);
    std::vector<float> stats(at(2 * E), 0.0f);
    for (int64_t t = 0; t < n; ++t) {
        route_row(&logits[at(t * E)],
                  E,
                  K,
                  &mc.probs[at(t * E)],
                  &mc.chosen[at(t * K)],
                  &mc.gates[at(t * K)]);
        for (int64_t k = 0; k < K; ++k) {
            stats[at(mc.chosen[at(t * K + k)])] += 1.0f;
        }
        for (int64_t e = 0; e < E; ++e) {
            stats[at(E + e)] += mc.probs[at(t * E + e)];
        }
    }
    return stats;
}

// aux = alpha E sum_e (C_e / (T k)) (S_e / T) over the micro-batch's T tokens.
double aux_loss(const std::vector<float>& stats, int64_t E, int64_t K, double T, float alpha) {
    double fp = 0.0;
    for (int64_t e = 0; e < E; ++e) {
        fp += static_cast<double>(stats[at(e)]) * stats[at(E + e)];
    }
    return alpha * static_cast<double>(E) * fp / (static_cast<double>(K) * T * T);
}

// Slots in send order (destination rank q, its local expert, then slot t * k + j, so tokens in
// order) and the row counts per (q, local expert), as floats for the counts all-to-all.
std::vector<float> send_order(const MoeDims& m, MoeCache& mc) {
    const int64_t P = m.group_size();
    const int64_t El = m.local_experts();
    std::vector<float> send_le(at(P * El), 0.0f);
    mc.send_rows.clear();
    mc.send_counts.assign(at(P), 0);
    for (int64_t q = 0; q < P; ++q) {
        for (int64_t le = 0; le < El; ++le) {
            const auto e = static_cast<int32_t>((q / m.etp) * El + le);
            for (int64_t slot = 0; slot < mc.tokens * m.top_k; ++slot) {
                if (mc.chosen[at(slot)] == e) {
                    mc.send_rows.push_back(slot);
                    send_le[at(q * El + le)] += 1.0f;
                }
            }
            mc.send_counts[at(q)] += static_cast<int64_t>(send_le[at(q * El + le)]);
        }
    }
    return send_le;
}

// From the received counts per (source p, local expert): rows per source, rows per expert,
// and the permutation between the receive order (p, expert, token) and the expert-major one
// (expert, p, token): an expert's rows by source rank, then token.
void receive_order(const MoeDims& m, const std::vector<float>& recv_le, MoeCache& mc) {
    const int64_t P = m.group_size();
    const int64_t El = m.local_experts();
    mc.recv_counts.assign(at(P), 0);
    mc.expert_rows.assign(at(El), 0);
    std::vector<int64_t> block_begin(at(P * El), 0);
    int64_t offset = 0;
    for (int64_t p = 0; p < P; ++p) {
        for (int64_t le = 0; le < El; ++le) {
            const auto c = static_cast<int64_t>(recv_le[at(p * El + le)]);
            block_begin[at(p * El + le)] = offset;
            offset += c;
            mc.recv_counts[at(p)] += c;
            mc.expert_rows[at(le)] += c;
        }
    }
    mc.to_expert_major.clear();
    for (int64_t le = 0; le < El; ++le) {
        for (int64_t p = 0; p < P; ++p) {
            const int64_t b = block_begin[at(p * El + le)];
            for (int64_t i = 0; i < static_cast<int64_t>(recv_le[at(p * El + le)]); ++i) {
                mc.to_expert_major.push_back(b + i);
            }
        }
    }
    mc.to_received.assign(mc.to_expert_major.size(), 0);
    for (size_t i = 0; i < mc.to_expert_major.size(); ++i) {
        mc.to_received[at(mc.to_expert_major[i])] = static_cast<int64_t>(i);
    }
}

// The combine: each slot's output is the sum of its etp partials (in send order, so in etp
// rank order), kept for the backward; y_t = sum_k gate_tk * slot_out_tk.
std::vector<float> combine(const std::vector<float>& rows, int64_t h, int64_t K, MoeCache& mc) {
    mc.slot_out.assign(at(mc.tokens * K * h), 0.0f);
    for (size_t i = 0; i < mc.send_rows.size(); ++i) {
        float* dst = &mc.slot_out[at(mc.send_rows[i] * h)];
        const float* src = &rows[i * at(h)];
        for (int64_t c = 0; c < h; ++c) {
            dst[c] += src[c];
        }
    }
    std::vector<float> out(at(mc.tokens * h), 0.0f);
    for (int64_t t = 0; t < mc.tokens; ++t) {
        for (int64_t k = 0; k < K; ++k) {
            const float g = mc.gates[at(t * K + k)];
            const float* src = &mc.slot_out[at((t * K + k) * h)];
            for (int64_t c = 0; c < h; ++c) {
                out[at(t * h + c)] += g * src[c];
            }
        }
    }
    return out;
}

}  // namespace

// Router GEMM, softmax and top-k on the host, and the load-balancing loss of Switch
// Transformers (Fedus et al. 2021, eq. 4, with top-k as Megatron-Core's
// switch_load_balancing_loss_func, moe_utils.py at d98e8a64):
//   aux = alpha * E * sum_e f_e * P_e,  f_e = C_e / (T k),  P_e = S_e / T
// over the micro-batch's T tokens: C_e routed slots of expert e, S_e the sum of its softmax
// probabilities. With SP the rows are split over TP, so C and S are summed over the TP group.
void Transformer::moe_route(const LayerHandles& l, View x, MoeCache& mc) {
    const MoeDims& m = d_.moe;
    const int64_t E = m.experts;
    const int64_t K = m.top_k;
    const int64_t n = d_.local_tokens();
    mc.tokens = n;
    Buffer logits = buf(n * E);
    be_.gemm(Trans::no, Trans::no, n, E, d_.hidden, 1.0f, x, params_.ref(l.router).w, 0.0f, logits);
    std::vector<float> host(at(n * E));
    be_.download(host, logits);
    std::vector<float> stats = route_rows(host, n, E, K, mc);
    if (d_.sp) {
        Buffer s = buf(2 * E);
        be_.upload(s, stats);
        rec_.timed(Phase::tp_comm, Stream::tp, "tp all_reduce router statistics", [&] {
            be_.all_reduce(groups_.tp, s, ReduceOp::sum);
        });
        be_.download(stats, s);
    }
    mc.expert_load.assign(stats.begin(), stats.begin() + E);
    if (!recomputing_ && m.aux_coeff > 0.0f) {
        aux_sum_ += aux_loss(stats, E, K, static_cast<double>(d_.tokens()), m.aux_coeff);
    }
}

// The dispatch order and the counts: slots in send order (destination rank, its local expert,
// token), the counts exchanged by a first all-to-all, and the expert-major receive order.
void Transformer::moe_plan(MoeCache& mc) {
    const MoeDims& m = d_.moe;
    const int64_t P = m.group_size();
    const int64_t El = m.local_experts();
    const std::vector<float> send_le = send_order(m, mc);
    Buffer s = buf(P * El);
    Buffer r = buf(P * El);
    be_.upload(s, send_le);
    const std::vector<int64_t> fixed(at(P), El);
    rec_.timed(Phase::ep_comm, Stream::ep, "ep all_to_all counts", [&] {
        be_.all_to_all_v(groups_.ep, s, fixed, r, fixed);
    });
    std::vector<float> recv_le(at(P * El));
    be_.download(recv_le, r);
    receive_order(m, recv_le, mc);
}

// to_experts: rows in send order -> the experts' rows in expert-major order; otherwise the
// reverse (expert-major rows -> rows in send order at their source).
Buffer Transformer::moe_exchange(View rows, const MoeCache& mc, bool to_experts, const char* what) {
    const int64_t h = d_.hidden;
    std::vector<int64_t> sent(mc.send_counts.size());
    std::vector<int64_t> received(mc.recv_counts.size());
    for (size_t p = 0; p < sent.size(); ++p) {
        sent[p] = mc.send_counts[p] * h;
        received[p] = mc.recv_counts[p] * h;
    }
    const int64_t n_recv = static_cast<int64_t>(mc.to_expert_major.size());
    const int64_t n_send = static_cast<int64_t>(mc.send_rows.size());
    if (to_experts) {
        Buffer got = buf(n_recv * h);
        rec_.timed(Phase::ep_comm, Stream::ep, what, [&] {
            be_.all_to_all_v(groups_.ep, rows, sent, got, received);
        });
        Buffer out = buf(n_recv * h);
        be_.gather_rows(got, h, mc.to_expert_major, out);
        return out;
    }
    Buffer ordered = buf(n_recv * h);
    be_.gather_rows(rows, h, mc.to_received, ordered);
    Buffer out = buf(n_send * h);
    rec_.timed(Phase::ep_comm, Stream::ep, what, [&] {
        be_.all_to_all_v(groups_.ep, ordered, received, out, sent);
    });
    return out;
}

// Each local expert's MLP on its block of rows: y = act(x W1 [, x W3]) W2 (this rank's shard).
void Transformer::moe_experts_fwd(const LayerHandles& l, MoeCache& mc, View y) {
    const int64_t h = d_.hidden;
    const int64_t f = d_.moe.ffn_local();
    const int64_t R = static_cast<int64_t>(mc.to_expert_major.size());
    mc.a = buf(R * f);
    mc.act = buf(R * f);
    if (d_.swiglu) {
        mc.up = buf(R * f);
    }
    int64_t off = 0;
    for (size_t le = 0; le < l.experts.size(); ++le) {
        const int64_t n = mc.expert_rows[le];
        const ExpertHandles& x = l.experts[le];
        if (n > 0) {
            const View xr = mc.xr.view().slice(off * h, n * h);
            const View a = mc.a.view().slice(off * f, n * f);
            const View act = mc.act.view().slice(off * f, n * f);
            linear(xr, n, h, f, x.w1, -1, a);
            if (d_.swiglu) {
                const View up = mc.up.view().slice(off * f, n * f);
                linear(xr, n, h, f, x.w3, -1, up);
                be_.swiglu_fwd(a, up, act);
            } else {
                act_fwd(a, act);
            }
            linear(act, n, f, h, x.w2, -1, y.slice(off * h, n * h));
        }
        off += n;
    }
}

Buffer Transformer::moe_fwd(const LayerHandles& l, View x, MoeCache& mc) {
    const int64_t h = d_.hidden;
    const int64_t K = d_.moe.top_k;
    moe_route(l, x, mc);
    moe_plan(mc);
    std::vector<int64_t> token_of(mc.send_rows.size());
    for (size_t i = 0; i < token_of.size(); ++i) {
        token_of[i] = mc.send_rows[i] / K;
    }
    const auto n_send = static_cast<int64_t>(mc.send_rows.size());
    Buffer send = buf(n_send * h);
    be_.gather_rows(x, h, token_of, send);
    mc.xr = moe_exchange(send, mc, true, "ep all_to_all dispatch");
    Buffer yr = buf(static_cast<int64_t>(mc.to_expert_major.size()) * h);
    moe_experts_fwd(l, mc, yr);
    Buffer back = moe_exchange(yr, mc, false, "ep all_to_all combine");
    std::vector<float> rows(at(n_send * h));
    be_.download(rows, back);
    const std::vector<float> out = combine(rows, h, K, mc);
    Buffer y = buf(mc.tokens * h);
    be_.upload(y, out);
    return y;
}

}  // namespace cleave::executor
