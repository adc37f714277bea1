// cleave report MODEL CLUSTER|--clusters A B ... <job flags> -o FILE.html: the plan search, the
// chosen plan's memory, time and simulated timeline, and the cost to train, as one
// self-contained HTML page (report/report.hpp, docs/report.md): api/cleave.hpp report().
#include "api/cleave.hpp"
#include "api/detail.hpp"
#include "core/errors.hpp"
#include "planner/search.hpp"
#include "report/report.hpp"
#include "simulator/simulate.hpp"

#include <array>
#include <cstdio>
#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cleave::api {

namespace {

/// Plans drawn on the scatter plot at most (every feasible plan up to this many).
constexpr int64_t max_points = 2000;


using detail::f;

/// Memory of every pipeline stage of `p`, part by part, from the cost model's per-stage
/// breakdown. The one place the report reads per-stage memory: today Estimate::stage holds the
/// first, a middle and the last stage (stage_cost()); when true per-stage maps land, only this
/// function changes.
std::vector<report::StageMemory> stage_memories(const Plan& p, const Estimate& e) {
    std::vector<report::StageMemory> out;
    for (int64_t s = 0; s < p.pp; ++s) {
        const StageCost& c = stage_cost(e, s, p.pp);
        const MemoryBreakdown& m = c.memory;
        out.push_back({"stage " + std::to_string(s) + " (" + std::to_string(c.layers) + " L)",
                       {{"weights", to_gib(m.weights)},
                        {"gradients", to_gib(m.grads)},
                        {"optimizer", to_gib(m.optimizer)},
                        {"activations", to_gib(m.activations)},
                        {"logits", to_gib(m.logits)},
                        {"buffers", to_gib(m.comm_buffers)},
                        {"reserved", to_gib(m.reserved)}}});
    }
    return out;
}

std::vector<report::Part> time_parts(const TimeBreakdown& t) {
    std::vector<report::Part> out;
    const std::array<std::pair<const char*, Seconds>, 8> all = {{{"compute", t.compute},
                                                                 {"TP comm", t.tp_comm},
                                                                 {"CP comm", t.cp_comm},
                                                                 {"EP comm", t.ep_comm},
                                                                 {"PP comm", t.pp_comm},
                                                                 {"bubble", t.bubble},
                                                                 {"DP comm", t.dp_comm},
                                                                 {"optimizer", t.optimizer}}};
    for (const auto& [name, s] : all) {
        if (s.value() > 0.0) {
            out.push_back({name, s.value()});
        }
    }
    return out;
}

std::vector<report::TimelineEvent> timeline(const Inputs& in, const RankedPlan& rp, double& end) {
    SimOptions so;
    so.record_timeline = true;
    const SimResult sim = simulate(in.model, in.cluster, in.job, rp.plan, rp.estimate, so);
    end = sim.iteration_time.value();
    std::vector<report::TimelineEvent> out;
    for (std::size_t s = 0; s < sim.stages.size(); ++s) {
        for (const SimEvent& ev : sim.stages[s].events) {
            const int lane = ev.stream == SimStream::compute ? 0
                             : ev.stream == SimStream::dp    ? 2
                                                             : 1;
            out.push_back({static_cast<int>(s),
                           lane,
                           ev.start_s,
                           ev.end_s,
                           to_string(ev.phase),
                           ev.microbatch});
        }
    }
    return out;
}

std::vector<std::string> plan_cells(const Plan& p, const Estimate& e) {
    return {std::to_string(p.dp),
            std::to_string(p.tp),
            std::to_string(p.pp),
            std::to_string(p.cp),
            std::to_string(p.ep),
            std::to_string(p.vpp),
            std::to_string(p.mbs),
            to_string(p.schedule),
            to_string(p.recompute),
            p.sp ? "on" : "off",
            std::to_string(p.zero),
            f("%.3f", e.iteration_time.value()),
            f("%.0f", e.tokens_per_s),
            f("%.1f", 100.0 * e.mfu),
            f("%.1f", to_gib(e.memory.total))};
}

report::Table top_table(const SearchResult& r, int64_t top) {
    report::Table t;
    t.header = {"#",
                "dp",
                "tp",
                "pp",
                "cp",
                "ep",
                "vpp",
                "mbs",
                "schedule",
                "recompute",
                "sp",
                "zero",
                "step (s)",
                "tokens/s",
                "MFU %",
                "memory (GiB)"};
    for (std::size_t i = 0; i < r.plans.size() && static_cast<int64_t>(i) < top; ++i) {
        std::vector<std::string> row = {std::to_string(i + 1)};
        for (std::string& c : plan_cells(r.plans[i].plan, r.plans[i].estimate)) {
            row.push_back(std::move(c));
        }
        t.rows.push_back(std::move(row));
    }
    return t;
}

std::string json_num(const nlohmann::json& j, const char* key, const char* spec) {
    return j.contains(key) && j[key].is_number() ? f(spec, j[key].get<double>()) : "-";
}

/// 3e11 -> "300B", 1.5e13 -> "15T" (the --tokens spelling).
std::string tokens_text(double v) {
    constexpr std::array<std::pair<double, const char*>, 4> units = {
        {{1e15, "P"}, {1e12, "T"}, {1e9, "B"}, {1e6, "M"}}};
    for (const auto& [scale, suffix] : units) {
        if (v >= scale) {
            return f("%.4g", v / scale) + suffix;
        }
    }
    return f("%.4g", v);
}

report::Table train_table(const Inputs& in, const Estimate& e) {
    nlohmann::json j;
    add_train_json(j, in, e);
    report::Table t;
    if (!j.contains("train_days")) {
        return t;
    }
    t.header = {"tokens",
                "days",
                "computing (days)",
                "lost to interruptions (days)",
                "interruptions",
                "GPU-hours",
                "energy (MWh)",
                "cost ($)"};
    const nlohmann::json& tr = j["train"];
    t.rows.push_back({tokens_text(in.train.tokens),
                      json_num(j, "train_days", "%.1f"),
                      json_num(tr, "compute_days", "%.1f"),
                      json_num(tr, "lost_days", "%.2f"),
                      json_num(tr, "interruptions", "%.1f"),
                      json_num(j, "gpu_hours", "%.4g"),
                      json_num(j, "energy_mwh", "%.4g"),
                      json_num(j, "cost", "%.4g")});
    return t;
}

report::Table why_not_table(const Inputs& in, const SearchOptions& so, const SearchResult& r) {
    report::Table t;
    t.header = {"reason", "plans", "best of them"};
    for (std::size_t i = 0; i < reject_reason_count; ++i) {
        const auto why = static_cast<RejectReason>(i);
        const Rejection& rj = r.rejected[i];
        if (rj.count > 0) {
            t.rows.push_back({to_string(why),
                              std::to_string(rj.count),
                              describe_rejection(in.model, in.job, so, why, rj)});
        }
    }
    return t;
}

report::Table risk_table(const Inputs& in, const RankedPlan& rp) {
    report::Table t;
    t.header = {"risk", "cause", "fix"};
    for (const Risk& k : describe_risks(in.model, in.cluster, in.job, rp.plan, rp.estimate)) {
        t.rows.push_back({to_string(k.kind), k.message, k.fix});
    }
    return t;
}

struct ClusterRun {
    Inputs in;
    SearchOptions so;
    SearchResult r;
};

report::Section section_of(const ClusterRun& cr, int64_t top) {
    const Inputs& in0 = cr.in;
    const SearchResult& r = cr.r;
    report::Section s;
    s.title = in0.model.name + " on " + in0.cluster.name;
    s.subtitle = in0.cluster.display_name + "; " + std::to_string(in0.job.gpus) +
                 " GPUs, global batch " + std::to_string(in0.job.global_batch) + ", seq " +
                 std::to_string(in0.job.seq_len) + ", " + to_string(in0.job.compute) +
                 "; objective " + to_string(cr.so.objective) + "; " +
                 std::to_string(r.candidates_evaluated) + " plans priced, " +
                 std::to_string(r.feasible) + " feasible";
    s.points_total = static_cast<std::size_t>(r.feasible);
    s.why_not = why_not_table(in0, cr.so, r);
    if (r.plans.empty()) {
        s.headline = {"no feasible plan"};
        return s;
    }
    const RankedPlan& best = r.plans.front();
    Inputs in = in0;
    in.job.gpus = plan_gpus(best.plan);
    const Estimate& e = best.estimate;
    s.headline = {"plan: " + to_flags(best.plan),
                  "step " + f("%.3f", e.iteration_time.value()) + " s",
                  f("%.0f", e.tokens_per_s) + " tokens/s",
                  "MFU " + f("%.1f", 100.0 * e.mfu) + " %",
                  "peak " + f("%.1f", to_gib(e.memory.total)) + " of " +
                      f("%.1f", to_gib(e.memory_usable)) + " GiB"};
    s.top_plans = top_table(r, top);
    for (std::size_t i = 0; i < r.plans.size(); ++i) {
        s.points.push_back({to_flags(r.plans[i].plan),
                            r.plans[i].estimate.iteration_time.value(),
                            to_gib(r.plans[i].estimate.memory.total),
                            i == 0});
    }
    s.usable_memory_gib = to_gib(e.memory_usable);
    s.memory_headroom_gib = to_gib(e.memory_headroom);
    s.stages = stage_memories(best.plan, e);
    s.time_parts = time_parts(e.time);
    s.timeline = timeline(in, best, s.timeline_end_s);
    s.train = train_table(in, e);
    s.risks = risk_table(in, best);
    s.cautions = cautions(in, best.plan.schedule);
    return s;
}

report::Table comparison(const std::vector<ClusterRun>& runs) {
    report::Table t;
    t.header = {"profile",
                "best plan",
                "step (s)",
                "tokens/s",
                "MFU %",
                "memory (GiB)",
                "train days",
                "GPU-hours",
                "cost ($)"};
    for (const ClusterRun& cr : runs) {
        if (cr.r.plans.empty()) {
            t.rows.push_back(
                {cr.in.cluster.name, "no feasible plan", "-", "-", "-", "-", "-", "-", "-"});
            continue;
        }
        const RankedPlan& b = cr.r.plans.front();
        Inputs in = cr.in;
        in.job.gpus = plan_gpus(b.plan);
        nlohmann::json j;
        add_train_json(j, in, b.estimate);
        t.rows.push_back({cr.in.cluster.name,
                          to_flags(b.plan),
                          f("%.3f", b.estimate.iteration_time.value()),
                          f("%.0f", b.estimate.tokens_per_s),
                          f("%.1f", 100.0 * b.estimate.mfu),
                          f("%.1f", to_gib(b.estimate.memory.total)),
                          json_num(j, "train_days", "%.1f"),
                          json_num(j, "gpu_hours", "%.4g"),
                          json_num(j, "cost", "%.4g")});
    }
    return t;
}

}  // namespace

Reported report(const JobOptions& job,
                const std::vector<std::string>& clusters,
                Objective objective,
                int64_t top,
                const std::function<ProgressFn(const std::string&)>& progress,
                const ModelSpec* model) {
    if (clusters.empty()) {
        throw ConfigError("cleave report: give CLUSTER or --clusters A B ...");
    }
    std::vector<ClusterRun> runs;
    for (const std::string& c : clusters) {
        JobOptions jf = job;
        jf.cluster = c;
        ClusterRun cr{model != nullptr ? load_inputs(jf, *model, load_cluster(c)) : load_inputs(jf),
                      {},
                      {}};
        cr.so.objective = objective;
        cr.so.top_k = max_points;
        const ProgressFn bar = progress ? progress(c) : ProgressFn{};
        cr.r = bar ? search(cr.in.model, cr.in.cluster, cr.in.job, cr.so, bar)
                   : search(cr.in.model, cr.in.cluster, cr.in.job, cr.so);
        runs.push_back(std::move(cr));
    }
    Reported out;
    report::Page& page = out.page;
    page.title = "cleave report: " + runs.front().in.model.name;
    page.intro = "How to split the training of " + runs.front().in.model.name + " across " +
                 std::to_string(runs.front().in.job.gpus) +
                 " GPUs, as cleave's cost model and simulator price it (cleave 0.1.0).";
    if (runs.size() > 1) {
        page.comparison = comparison(runs);
    }
    for (const ClusterRun& cr : runs) {
        page.sections.push_back(section_of(cr, top));
        out.any_feasible = out.any_feasible || !cr.r.plans.empty();
    }
    return out;
}

void write_html(const std::string& path, const Reported& r) {
    std::ofstream file(path, std::ios::binary);
    if (!file) {
        throw ConfigError("-o: cannot write '" + path + "'");
    }
    file << report::page_html(r.page);
    file.close();
    if (!file) {
        throw ConfigError("-o: failed writing '" + path + "'");
    }
}

}  // namespace cleave::api
