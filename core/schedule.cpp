#include "core/schedule.hpp"

#include "core/errors.hpp"

#include <algorithm>

namespace cleave {

SimSchedule sim_schedule(Schedule s) {
    switch (s) {
    case Schedule::gpipe:
        return SimSchedule::gpipe;
    case Schedule::one_f_one_b:
        return SimSchedule::one_f_one_b;
    case Schedule::interleaved:
        return SimSchedule::interleaved;
    case Schedule::dualpipe:
    case Schedule::dualpipev:
        // No op order of DualPipe's here: the simulator and the executor refuse it before they
        // ask (api/simulate.cpp, api/run.cpp); the cost model prices it in closed form.
        return SimSchedule::one_f_one_b;
    }
    return SimSchedule::one_f_one_b;
}

namespace {

SimOp make_op(int64_t mb, int64_t chunk, OpKind kind) {
    return SimOp{static_cast<int32_t>(mb), static_cast<int16_t>(chunk), kind};
}

// Megatron-LM schedules.py get_schedule_table (d98e8a6): micro-batches in groups of N; within
// a group every chunk runs the group's micro-batches in order, chunk after chunk; the last group
// takes what is left. The k-th forward runs table[k]; the k-th backward table[k] with the chunks
// walked in reverse. With N = p and p | m this is Narayanan et al. 2021's order.
std::vector<SimOp> schedule_table(int64_t v, int64_t m, int64_t n) {
    std::vector<SimOp> table;
    table.reserve(static_cast<std::size_t>(v * m));
    for (int64_t g = 0; g < m; g += n) {
        const int64_t end = g + n >= m ? m : g + n;
        for (int64_t c = 0; c < v; ++c) {
            for (int64_t mb = g; mb < end; ++mb) {
                table.push_back(make_op(mb, c, OpKind::forward));
            }
        }
    }
    return table;
}

void append_interleaved(int64_t p, int64_t v, int64_t m, int64_t rank, std::vector<SimOp>& out) {
    const int64_t total = v * m;
    const int64_t warmup = warmup_forwards(SimSchedule::interleaved, p, v, m, rank);
    const int64_t steady = total - warmup;
    const std::vector<SimOp> table = schedule_table(v, m, interleave_group(p, m));
    const auto fwd = [&table](int64_t k) { return table[static_cast<std::size_t>(k)]; };
    const auto bwd = [&table, v](int64_t k) {
        SimOp op = table[static_cast<std::size_t>(k)];
        op.chunk = static_cast<int16_t>(v - 1 - op.chunk);
        op.kind = OpKind::backward;
        return op;
    };
    for (int64_t k = 0; k < warmup; ++k) {
        out.push_back(fwd(k));
    }
    for (int64_t k = 0; k < steady; ++k) {
        out.push_back(fwd(warmup + k));
        out.push_back(bwd(k));
    }
    for (int64_t k = steady; k < total; ++k) {
        out.push_back(bwd(k));
    }
}

// 1F1B (PipeDream-flush, Narayanan et al. 2021 Fig. 4 top): warm-up forwards, then one
// forward and one backward alternating, then the remaining backwards.
void append_1f1b(int64_t p, int64_t m, int64_t rank, std::vector<SimOp>& out) {
    const int64_t warmup = warmup_forwards(SimSchedule::one_f_one_b, p, 1, m, rank);
    for (int64_t i = 0; i < warmup; ++i) {
        out.push_back(make_op(i, 0, OpKind::forward));
    }
    for (int64_t i = 0; i < m - warmup; ++i) {
        out.push_back(make_op(warmup + i, 0, OpKind::forward));
        out.push_back(make_op(i, 0, OpKind::backward));
    }
    for (int64_t i = m - warmup; i < m; ++i) {
        out.push_back(make_op(i, 0, OpKind::backward));
    }
}

// ZB-H1 (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", Sec. 2.1): the 1F1B order with
// each backward split into B (input gradient) and W (weight gradient); rank s delays its W
// passes by s micro-batches, so every rank holds p - 1 micro-batches between warm-up forwards
// and deferred Ws, and the delayed Ws fill the cool-down where 1F1B idles.
void append_zb_h1(int64_t p, int64_t m, int64_t rank, std::vector<SimOp>& out) {
    const int64_t warmup = warmup_forwards(SimSchedule::zb_h1, p, 1, m, rank);
    const int64_t delay = rank;
    int64_t next_w = 0;
    const auto backward = [&](int64_t i) {
        out.push_back(make_op(i, 0, OpKind::backward));
        if (i - next_w >= delay) {
            out.push_back(make_op(next_w++, 0, OpKind::backward_weight));
        }
    };
    for (int64_t i = 0; i < warmup; ++i) {
        out.push_back(make_op(i, 0, OpKind::forward));
    }
    for (int64_t i = 0; i < m - warmup; ++i) {
        out.push_back(make_op(warmup + i, 0, OpKind::forward));
        backward(i);
    }
    for (int64_t i = m - warmup; i < m; ++i) {
        backward(i);
    }
    while (next_w < m) {
        out.push_back(make_op(next_w++, 0, OpKind::backward_weight));
    }
}

}  // namespace

int64_t warmup_forwards(SimSchedule s, int64_t p, int64_t v, int64_t m, int64_t rank) {
    CLEAVE_ASSERT(p >= 1 && v >= 1 && m >= 1 && rank >= 0 && rank < p, "bad pipeline shape");
    switch (s) {
    case SimSchedule::gpipe:
        return m;
    case SimSchedule::one_f_one_b:
    case SimSchedule::zb_h1:
        return std::min(p - rank - 1, m);
    case SimSchedule::interleaved:
        if (v == 1) {
            return std::min(p - rank - 1, m);
        }
        return std::min(2 * (p - rank - 1) + (v - 1) * interleave_group(p, m), v * m);
    }
    return m;
}

void append_rank_ops(
    SimSchedule s, int64_t p, int64_t v, int64_t m, int64_t rank, std::vector<SimOp>& out) {
    switch (s) {
    case SimSchedule::gpipe:
        for (int64_t c = 0; c < v; ++c) {
            for (int64_t i = 0; i < m; ++i) {
                out.push_back(make_op(i, c, OpKind::forward));
            }
        }
        for (int64_t c = v - 1; c >= 0; --c) {
            for (int64_t i = 0; i < m; ++i) {
                out.push_back(make_op(i, c, OpKind::backward));
            }
        }
        return;
    case SimSchedule::one_f_one_b:
        CLEAVE_ASSERT(v == 1, "1F1B has one chunk per rank");
        append_1f1b(p, m, rank, out);
        return;
    case SimSchedule::zb_h1:
        CLEAVE_ASSERT(v == 1, "ZB-H1 has one chunk per rank");
        append_zb_h1(p, m, rank, out);
        return;
    case SimSchedule::interleaved:
        if (v == 1) {
            append_1f1b(p, m, rank, out);
        } else {
            CLEAVE_ASSERT(m >= p, "interleaved needs at least pp micro-batches");
            append_interleaved(p, v, m, rank, out);
        }
        return;
    }
}

int64_t interleave_group(int64_t p, int64_t m) {
    for (int64_t n = p; n < m; ++n) {
        if (m % n == 0 || m % n >= p) {
            return n;
        }
    }
    return std::max(p, m);
}

int64_t peak_inflight_chunks(SimSchedule s, int64_t p, int64_t v, int64_t m, int64_t rank) {
    if (s == SimSchedule::gpipe) {
        return v * m;
    }
    const int64_t vv = s == SimSchedule::interleaved ? v : 1;
    return std::min(vv * m, warmup_forwards(s, p, vv, m, rank) + 1);
}

}  // namespace cleave
