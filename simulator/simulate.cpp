#include "simulator/simulate.hpp"

#include "core/errors.hpp"
#include "simulator/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace cleave {

namespace {

using detail::OpKind;
using detail::SimOp;

constexpr double unknown = -1.0;

void validate_input(const SimInput& in) {
    std::vector<Diagnostic> ds;
    const auto bad = [&](std::string msg) { ds.push_back({{}, "simulate: " + std::move(msg)}); };
    const auto p = static_cast<int64_t>(in.ranks.size());
    if (p < 1) {
        bad("at least one pipeline rank is required");
    }
    if (in.microbatches < 1) {
        bad("microbatches=" + std::to_string(in.microbatches) + " must be at least 1");
    }
    const size_t v = p > 0 ? in.ranks[0].chunks.size() : 0;
    if (p > 0 && v < 1) {
        bad("every rank needs at least one chunk");
    }
    for (int64_t r = 0; r < p; ++r) {
        const auto& rk = in.ranks[static_cast<size_t>(r)];
        const std::string where = "rank " + std::to_string(r) + ": ";
        if (rk.chunks.size() != v) {
            bad(where + "has " + std::to_string(rk.chunks.size()) + " chunks, rank 0 has " +
                std::to_string(v));
        }
        for (const auto& c : rk.chunks) {
            if (!(c.fwd.value() >= 0.0) || !(c.bwd.value() >= 0.0) ||
                !(c.bwd_weight.value() >= 0.0) || c.bwd_weight > c.bwd) {
                bad(where + "chunk durations must be finite, >= 0, and bwd_weight <= bwd");
                break;
            }
        }
        if (!(rk.p2p_next.value() >= 0.0) || !(rk.optimizer.value() >= 0.0)) {
            bad(where + "p2p and optimizer times must be >= 0");
        }
        for (const auto& b : rk.dp_buckets) {
            if (b.chunk < 0 || static_cast<size_t>(b.chunk) >= v || !(b.ready_fraction > 0.0) ||
                b.ready_fraction > 1.0 || !(b.time.value() >= 0.0)) {
                bad(where + "DP buckets need 0 <= chunk < vpp, 0 < ready_fraction <= 1, time >= 0");
                break;
            }
        }
    }
    if (v > 1 && (in.schedule == SimSchedule::one_f_one_b || in.schedule == SimSchedule::zb_h1)) {
        bad(std::string(to_string(in.schedule)) + " runs one chunk per rank, got " +
            std::to_string(v) + " (use the interleaved schedule)");
    }
    if (in.schedule == SimSchedule::interleaved && v > 1 && p > 0 && in.microbatches < p) {
        bad("interleaved schedule needs at least pp (" + std::to_string(p) +
            ") micro-batches, got " + std::to_string(in.microbatches) + ", as Megatron-LM raises");
    }
    if (!ds.empty()) {
        throw ConfigError(std::move(ds));
    }
}

// Per-rank durations as plain doubles for the inner loop.
struct ChunkTimes {
    double fwd_s = 0.0;
    double bwd_s = 0.0;     // B op: whole backward, or ZB-H1 input-gradient part
    double weight_s = 0.0;  // ZB-H1 W op
};

// What is known about one (micro-batch, virtual stage): when its ops ended and when their
// outputs arrived at the neighbours; `unknown` until produced.
struct Cell {
    double f_end = unknown;
    double b_end = unknown;
    double act_arrive = unknown;   // activation from stage k - 1 arrived here
    double grad_arrive = unknown;  // gradient from stage k + 1 arrived here
};

// The state of one playback.
class Playback {
public:
    Playback(const SimInput& in, const SimOptions& opt);
    SimResult run();

private:
    void build_ops();

    [[nodiscard]] size_t index(int64_t mb, int64_t k) const {
        return static_cast<size_t>(mb * p_ * v_ + k);
    }

    bool advance(int64_t r);
    double op_ready(int64_t r, const SimOp& op, double& producer_end) const;
    void send(int64_t r, int64_t k, int64_t mb, bool forward, double t);
    void finish_dp_and_optimizer(SimResult& res);
    void record(
        int64_t r, double start, double end, int64_t mb, int64_t chunk, SimPhase ph, SimStream st);

    const SimInput& in_;
    const SimOptions& opt_;
    int64_t p_ = 0;
    int64_t v_ = 0;
    int64_t m_ = 0;
    bool split_w_ = false;
    std::vector<ChunkTimes> times_;  // rank * v + chunk
    std::vector<SimOp> ops_;         // every rank's ops, rank after rank
    std::vector<size_t> op_begin_;   // p + 1 offsets into ops_
    std::vector<size_t> pos_;        // next op per rank
    // Indexed micro-batch * (pp * vpp) + virtual stage: neighbouring stages of one micro-batch
    // share cache lines, which is where the wavefront of a pipeline reads and writes.
    std::vector<Cell> cells_;
    std::vector<double> free_, send_fwd_free_, send_bwd_free_;
    std::vector<double> last_grad_start_, last_grad_dur_;  // rank * v + chunk
    std::vector<int64_t> inflight_;
    std::vector<int64_t> stack_;
    std::vector<char> queued_;
    std::vector<StageResult> stages_;
};

Playback::Playback(const SimInput& in, const SimOptions& opt)
    : in_(in)
    , opt_(opt)
    , p_(static_cast<int64_t>(in.ranks.size()))
    , v_(static_cast<int64_t>(in.ranks[0].chunks.size()))
    , m_(in.microbatches)
    , split_w_(in.schedule == SimSchedule::zb_h1) {
    const auto pu = static_cast<size_t>(p_);
    const auto cells = static_cast<size_t>(p_ * v_ * m_);
    times_.reserve(pu * static_cast<size_t>(v_));
    for (const auto& rk : in.ranks) {
        for (const auto& c : rk.chunks) {
            const double w =
                !split_w_ ? 0.0
                          : (c.bwd_weight.value() > 0.0 ? c.bwd_weight.value() : c.bwd.value() / 2);
            times_.push_back({c.fwd.value(), c.bwd.value() - w, w});
        }
    }
    cells_.assign(cells, Cell{});
    free_.assign(pu, 0.0);
    send_fwd_free_.assign(pu, 0.0);
    send_bwd_free_.assign(pu, 0.0);
    last_grad_start_.assign(times_.size(), 0.0);
    last_grad_dur_.assign(times_.size(), 0.0);
    inflight_.assign(pu, 0);
    queued_.assign(pu, 0);
    stages_.resize(pu);
    build_ops();
}

void Playback::build_ops() {
    const size_t per_rank = static_cast<size_t>(v_ * m_) * (split_w_ ? 3 : 2);
    ops_.reserve(per_rank * static_cast<size_t>(p_));
    op_begin_.push_back(0);
    for (int64_t r = 0; r < p_; ++r) {
        detail::append_rank_ops(in_.schedule, p_, v_, m_, r, ops_);
        op_begin_.push_back(ops_.size());
        if (opt_.record_timeline) {
            stages_[static_cast<size_t>(r)].events.reserve(per_rank * 2);
        }
    }
    pos_.assign(op_begin_.begin(), op_begin_.end() - 1);
}

void Playback::record(
    int64_t r, double start, double end, int64_t mb, int64_t chunk, SimPhase ph, SimStream st) {
    if (opt_.record_timeline) {
        stages_[static_cast<size_t>(r)].events.push_back(
            {start, end, static_cast<int32_t>(mb), static_cast<int32_t>(chunk), ph, st});
    }
}

// When the op's cross-rank input is available (unknown if not yet produced); producer_end is
// when the producing op finished, so the gap between the two is time the data was in flight.
double Playback::op_ready(int64_t r, const SimOp& op, double& producer_end) const {
    const int64_t k = op.chunk * p_ + r;
    const size_t cell = index(op.mb, k);
    const int64_t last = p_ * v_ - 1;
    producer_end = 0.0;
    switch (op.kind) {
    case OpKind::forward:
        if (k == 0) {
            return 0.0;
        }
        producer_end = cells_[cell - 1].f_end;
        return cells_[cell].act_arrive;
    case OpKind::backward:
        CLEAVE_ASSERT(cells_[cell].f_end >= 0.0, "schedule runs a backward before its forward");
        if (k == last) {
            return cells_[cell].f_end;
        }
        producer_end = cells_[cell + 1].b_end;
        return cells_[cell].grad_arrive;
    case OpKind::backward_weight:
        CLEAVE_ASSERT(cells_[cell].b_end >= 0.0, "schedule runs W before its B");
        return cells_[cell].b_end;
    }
    return unknown;
}

// Hands the output of virtual stage k to k+1 (forward) or k-1 (backward). Transfers to the
// same rank (pp == 1) are free; others queue on the sender's stream for that direction.
void Playback::send(int64_t r, int64_t k, int64_t mb, bool forward, double t) {
    const int64_t to_k = forward ? k + 1 : k - 1;
    const int64_t to_r = to_k % p_;
    Cell& to = cells_[index(mb, to_k)];
    double& arrive = forward ? to.act_arrive : to.grad_arrive;
    if (to_r == r) {
        arrive = t;
        return;
    }
    // The link between ranks r and r+1 is described by the lower rank's p2p_next.
    const int64_t link = forward ? r : to_r;
    const double dur = in_.ranks[static_cast<size_t>(link)].p2p_next.value();
    auto& stream =
        forward ? send_fwd_free_[static_cast<size_t>(r)] : send_bwd_free_[static_cast<size_t>(r)];
    const double start = std::max(t, stream);
    stream = start + dur;
    arrive = stream;
    record(r,
           start,
           stream,
           mb,
           k / p_,
           forward ? SimPhase::send_activation : SimPhase::send_gradient,
           forward ? SimStream::pp_send_fwd : SimStream::pp_send_bwd);
    if (!queued_[static_cast<size_t>(to_r)]) {
        queued_[static_cast<size_t>(to_r)] = 1;
        stack_.push_back(to_r);
    }
}

// Runs rank r's ops in order until one waits for an input not produced yet.
bool Playback::advance(int64_t r) {
    const auto ru = static_cast<size_t>(r);
    auto& st = stages_[ru];
    double busy = st.compute_fb.value();
    double wait = st.comm_wait.value();
    size_t& pos = pos_[ru];
    const size_t end = op_begin_[ru + 1];
    while (pos < end) {
        const SimOp op = ops_[pos];
        double producer_end = 0.0;
        const double ready = op_ready(r, op, producer_end);
        if (ready < 0.0) {
            break;
        }
        const double start = std::max(free_[ru], ready);
        if (ready > free_[ru]) {
            wait += ready - std::max(free_[ru], producer_end);
        }
        const auto& t = times_[ru * static_cast<size_t>(v_) + static_cast<size_t>(op.chunk)];
        const int64_t k = op.chunk * p_ + r;
        Cell& cell = cells_[index(op.mb, k)];
        double dur = 0.0;
        SimPhase phase = SimPhase::forward;
        if (op.kind == OpKind::forward) {
            dur = t.fwd_s;
            cell.f_end = start + dur;
            st.peak_inflight_chunks = std::max(st.peak_inflight_chunks, ++inflight_[ru]);
        } else if (op.kind == OpKind::backward) {
            dur = t.bwd_s;
            phase = SimPhase::backward;
            cell.b_end = start + dur;
            --inflight_[ru];
        } else {
            dur = t.weight_s;
            phase = SimPhase::backward_weight;
        }
        free_[ru] = start + dur;
        busy += dur;
        record(r, start, start + dur, op.mb, op.chunk, phase, SimStream::compute);
        if (op.kind != OpKind::forward && (op.kind == OpKind::backward_weight || !split_w_)) {
            const size_t c = ru * static_cast<size_t>(v_) + static_cast<size_t>(op.chunk);
            last_grad_start_[c] = start;
            last_grad_dur_[c] = dur;
        }
        if (op.kind == OpKind::forward && k + 1 < p_ * v_) {
            send(r, k, op.mb, true, start + dur);
        } else if (op.kind == OpKind::backward && k > 0) {
            send(r, k, op.mb, false, start + dur);
        }
        ++pos;
    }
    st.compute_fb = seconds(busy);
    st.comm_wait = seconds(wait);
    st.compute_end = seconds(free_[ru]);
    return pos == end;
}

// DP buckets on their own stream once their grads are final, then the optimizer.
void Playback::finish_dp_and_optimizer(SimResult& res) {
    std::vector<std::pair<double, double>> ready;  // (ready time, duration)
    double pre_max = 0.0;
    for (int64_t r = 0; r < p_; ++r) {
        const auto ru = static_cast<size_t>(r);
        auto& st = stages_[ru];
        ready.clear();
        for (const auto& b : in_.ranks[ru].dp_buckets) {
            const size_t c = ru * static_cast<size_t>(v_) + static_cast<size_t>(b.chunk);
            const double t = in_.dp_overlap
                                 ? last_grad_start_[c] + b.ready_fraction * last_grad_dur_[c]
                                 : st.compute_end.value();
            ready.emplace_back(t, b.time.value());
        }
        std::stable_sort(ready.begin(), ready.end(), [](const auto& a, const auto& b) {
            return a.first < b.first;
        });
        double dp_free = st.compute_end.value();
        double stream = 0.0;
        int64_t index = 0;
        for (const auto& [t, dur] : ready) {
            const double start = std::max(t, stream);
            stream = start + dur;
            record(r, start, stream, -1, index++, SimPhase::dp_reduce, SimStream::dp);
        }
        dp_free = std::max(dp_free, stream);
        st.dp_end = seconds(dp_free);
        pre_max = std::max(pre_max, dp_free);
    }
    for (int64_t r = 0; r < p_; ++r) {
        const auto ru = static_cast<size_t>(r);
        auto& st = stages_[ru];
        const double start = in_.optimizer_sync ? pre_max : st.dp_end.value();
        st.optimizer_start = seconds(start);
        st.optimizer_end = seconds(start + in_.ranks[ru].optimizer.value());
        record(r, start, st.optimizer_end.value(), -1, -1, SimPhase::optimizer, SimStream::compute);
        res.iteration_time = max(res.iteration_time, st.optimizer_end);
    }
}

SimResult Playback::run() {
    for (int64_t r = p_ - 1; r >= 0; --r) {
        stack_.push_back(r);
        queued_[static_cast<size_t>(r)] = 1;
    }
    while (!stack_.empty()) {
        const int64_t r = stack_.back();
        stack_.pop_back();
        queued_[static_cast<size_t>(r)] = 0;
        advance(r);
    }
    for (int64_t r = 0; r < p_; ++r) {
        CLEAVE_ASSERT(pos_[static_cast<size_t>(r)] == op_begin_[static_cast<size_t>(r) + 1],
                      "pipeline schedule deadlocked");
    }
    SimResult res;
    finish_dp_and_optimizer(res);
    double span = 0.0;
    double work = 0.0;
    for (const auto& st : stages_) {
        span = std::max(span, st.compute_end.value());
        work += st.compute_fb.value();
    }
    res.pipeline_span = seconds(span);
    res.bubble_ratio = span > 0.0 ? 1.0 - work / (static_cast<double>(p_) * span) : 0.0;
    const double total = res.iteration_time.value();
    for (int64_t r = 0; r < p_; ++r) {
        auto& st = stages_[static_cast<size_t>(r)];
        const Seconds opt_time = st.optimizer_end - st.optimizer_start;
        st.busy = st.compute_fb + opt_time;
        st.comm_wait += max(seconds(0.0), st.dp_end - st.compute_end);
        st.idle = max(seconds(0.0), seconds(total) - st.busy - st.comm_wait);
        st.bubble_ratio = span > 0.0 ? 1.0 - st.compute_fb.value() / span : 0.0;
        st.peak_inflight_microbatches =
            static_cast<double>(st.peak_inflight_chunks) / static_cast<double>(v_);
    }
    res.stages = std::move(stages_);
    return res;
}

}  // namespace

const char* to_string(SimSchedule s) {
    switch (s) {
    case SimSchedule::gpipe:
        return "gpipe";
    case SimSchedule::one_f_one_b:
        return "1f1b";
    case SimSchedule::interleaved:
        return "interleaved";
    case SimSchedule::zb_h1:
        return "zb-h1";
    }
    return "?";
}

const char* to_string(SimStream s) {
    switch (s) {
    case SimStream::compute:
        return "compute";
    case SimStream::pp_send_fwd:
        return "pp send fwd";
    case SimStream::pp_send_bwd:
        return "pp send bwd";
    case SimStream::dp:
        return "dp grad reduce";
    }
    return "?";
}

const char* to_string(SimPhase p) {
    switch (p) {
    case SimPhase::forward:
        return "F";
    case SimPhase::backward:
        return "B";
    case SimPhase::backward_weight:
        return "W";
    case SimPhase::send_activation:
        return "send act";
    case SimPhase::send_gradient:
        return "send grad";
    case SimPhase::dp_reduce:
        return "dp bucket";
    case SimPhase::optimizer:
        return "optimizer";
    }
    return "?";
}

SimResult simulate(const SimInput& in, const SimOptions& opt) {
    validate_input(in);
    Playback pb(in, opt);
    return pb.run();
}

}  // namespace cleave
