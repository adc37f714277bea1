#pragma once
// Per-rank phase clocks and (optionally) trace events of one iteration.

#include "core/trace.hpp"
#include "executor/backend.hpp"

#include <array>
#include <string>
#include <vector>

namespace cleave::executor {

// ep_comm: the MoE token dispatch and combine all-to-alls on the expert-parallel group (issue 16).
// dp_wait: a DP rank waiting for the slowest one before the gradient reduction (issue 18).
enum class Phase { compute, tp_comm, pp_wait, dp_comm, optimizer, ep_comm, dp_wait };
inline constexpr int phase_count = 7;

/// Trace threads, aligned with the simulator's streams (0 compute, 1 PP forward direction, 2 PP
/// backward direction, 3 DP) plus the executor's own TP, optimizer and expert-parallel streams.
enum class Stream { compute = 0, pp_fwd = 1, pp_bwd = 2, dp = 3, tp = 4, optimizer = 5, ep = 6 };

class Recorder {
public:
    Recorder(Backend& be, bool trace, int64_t pid)
        : be_(be)
        , trace_(trace)
        , pid_(pid) {}

    /// Clears the phase accumulators (kept trace events stay).
    void start_iteration() {
        acc_.fill(0.0);
        hidden_dp_s_ = 0.0;
        iteration_start_s_ = be_.clock_s();
    }

    /// Sets the trace's time origin (call after a barrier, so ranks share it approximately).
    void set_origin(double t_s) { origin_s_ = t_s; }

    [[nodiscard]] double origin_s() const { return origin_s_; }

    /// Runs f and charges its wall time to `phase`, and to a trace event on `stream`.
    template <class F>
    void timed(Phase phase, Stream stream, const char* name, F&& f) {
        const double t0 = be_.clock_s();
        f();
        const double t1 = be_.clock_s();
        acc_[static_cast<size_t>(phase)] += t1 - t0;
        if (trace_) {
            event(name, stream, t0, t1);
        }
    }

    /// Records a trace event [t0, t1] (seconds on the backend clock) without charging a phase.
    void event(std::string name, Stream stream, double t0_s, double t1_s) {
        if (!trace_) {
            return;
        }
        TraceEvent e;
        e.name = std::move(name);
        e.category = category(stream);
        e.pid = pid_;
        e.tid = static_cast<int64_t>(stream);
        e.ts_us = (t0_s - origin_s_) * 1e6;
        e.dur_us = (t1_s - t0_s) * 1e6;
        events_.push_back(std::move(e));
    }

    [[nodiscard]] double now_s() { return be_.clock_s(); }

    [[nodiscard]] bool tracing() const { return trace_; }

    [[nodiscard]] double phase_s(Phase p) const { return acc_[static_cast<size_t>(p)]; }

    /// DP communication that ran hidden behind other work (Backend::all_reduce_wait()); not
    /// part of the iteration's disjoint phases, which charge DP only with the time it blocks.
    void add_hidden_dp(double s) { hidden_dp_s_ += s; }

    [[nodiscard]] double hidden_dp_s() const { return hidden_dp_s_; }

    [[nodiscard]] double iteration_start_s() const { return iteration_start_s_; }

    [[nodiscard]] std::vector<TraceEvent>& events() { return events_; }

    static const char* category(Stream s) {
        switch (s) {
        case Stream::compute:
            return "compute";
        case Stream::pp_fwd:
        case Stream::pp_bwd:
            return "pp";
        case Stream::dp:
            return "dp";
        case Stream::tp:
            return "tp";
        case Stream::optimizer:
            return "optimizer";
        case Stream::ep:
            return "ep";
        }
        return "";
    }

private:
    Backend& be_;
    bool trace_ = false;
    int64_t pid_ = 0;
    double origin_s_ = 0.0;
    double iteration_start_s_ = 0.0;
    std::array<double, phase_count> acc_{};
    double hidden_dp_s_ = 0.0;
    std::vector<TraceEvent> events_;
};

}  // namespace cleave::executor
