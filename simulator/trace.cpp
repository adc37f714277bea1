#include "simulator/trace.hpp"

#include "core/errors.hpp"
#include "core/trace.hpp"

#include <string>

namespace cleave {

namespace {

std::string event_name(const SimEvent& e) {
    std::string name = to_string(e.phase);
    if (e.phase == SimPhase::dp_reduce) {
        return name + " " + std::to_string(e.chunk);
    }
    if (e.microbatch >= 0) {
        name += " mb" + std::to_string(e.microbatch) + " c" + std::to_string(e.chunk);
    }
    return name;
}

const char* category(SimStream s) {
    switch (s) {
    case SimStream::compute:
        return "compute";
    case SimStream::pp_send_fwd:
    case SimStream::pp_send_bwd:
        return "pp";
    case SimStream::dp:
        return "dp";
    }
    return "";
}

TraceEvent to_trace_event(const SimInput& in, int64_t stage, const SimEvent& e) {
    TraceEvent t;
    t.name = event_name(e);
    t.category = category(e.stream);
    t.pid = stage;
    t.tid = static_cast<int64_t>(e.stream);
    t.ts_us = e.start_s * 1e6;
    t.dur_us = (e.end_s - e.start_s) * 1e6;
    if (e.microbatch >= 0) {
        const auto& chunk =
            in.ranks[static_cast<size_t>(stage)].chunks[static_cast<size_t>(e.chunk)];
        const int64_t pp = static_cast<int64_t>(in.ranks.size());
        t.args.push_back({"microbatch", int64_t{e.microbatch}});
        t.args.push_back({"chunk", int64_t{e.chunk}});
        t.args.push_back({"virtual_stage", int64_t{e.chunk} * pp + stage});
        if (e.phase == SimPhase::forward) {
            t.args.push_back({"tp_cp_comm_us", chunk.fwd_comm.value() * 1e6});
        } else if (e.phase == SimPhase::backward) {
            t.args.push_back({"tp_cp_comm_us", chunk.bwd_comm.value() * 1e6});
        }
    }
    return t;
}

}  // namespace

int64_t sim_trace_event_count(const SimResult& res) {
    int64_t n = 0;
    for (const auto& st : res.stages) {
        n += static_cast<int64_t>(st.events.size());
    }
    return n;
}

void write_sim_trace(std::ostream& os, const SimInput& in, const SimResult& res) {
    if (res.stages.size() != in.ranks.size() || sim_trace_event_count(res) == 0) {
        throw ConfigError("trace: the simulation kept no timeline (set record_timeline)");
    }
    ChromeTraceWriter w(os);
    const SimStream streams[] = {
        SimStream::compute, SimStream::pp_send_fwd, SimStream::pp_send_bwd, SimStream::dp};
    for (size_t s = 0; s < res.stages.size(); ++s) {
        const auto pid = static_cast<int64_t>(s);
        w.track({pid, -1, "stage " + std::to_string(s)});
        for (const SimStream st : streams) {
            w.track({pid, static_cast<int64_t>(st), to_string(st)});
        }
    }
    for (size_t s = 0; s < res.stages.size(); ++s) {
        for (const auto& e : res.stages[s].events) {
            w.event(to_trace_event(in, static_cast<int64_t>(s), e));
        }
    }
    w.finish();
}

}  // namespace cleave
