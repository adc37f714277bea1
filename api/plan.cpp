// cleave plan: search every plan for a job, rank the best, say why the others were rejected
// (DESIGN §3, docs/planner.md); api/cleave.hpp plan().
#include "api/cleave.hpp"
#include "api/detail.hpp"
#include "core/errors.hpp"
#include "core/schedule.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/risks.hpp"
#include "export/export.hpp"
#include "planner/search.hpp"
#include "planner/why_empty.hpp"
#include "simulator/simulate.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cleave::api {

namespace {


using SimScores = std::vector<SimScore>;

using detail::f;

const char* risk_code(RiskKind k) {
    switch (k) {
    case RiskKind::oom:
        return "oom";
    case RiskKind::nccl_timeout:
        return "nccl";
    case RiskKind::slow_network:
        return "slownet";
    case RiskKind::tp_cross_node:
        return "tpnode";
    case RiskKind::tp_over_pcie:
        return "tppcie";
    case RiskKind::few_microbatches:
        return "fewmb";
    case RiskKind::large_bubble:
        return "bubble";
    case RiskKind::shared_communicator:
        return "sharedcomm";
    case RiskKind::ep_cross_domain:
        return "epnic";
    case RiskKind::moe_imbalance:
        return "moeimb";
    case RiskKind::moe_fixed_cost:
        return "moefix";
    case RiskKind::count:
        break;
    }
    return "?";
}

std::string risk_codes(const Estimate& e, char sep) {
    std::string s;
    for (unsigned k = 0; k < static_cast<unsigned>(RiskKind::count); ++k) {
        if (e.has(static_cast<RiskKind>(k))) {
            s += (s.empty() ? "" : std::string(1, sep)) + risk_code(static_cast<RiskKind>(k));
        }
    }
    return s.empty() ? "-" : s;
}

const char* short_schedule(Schedule s) {
    return s == Schedule::interleaved ? "inter"
           : s == Schedule::dualpipe  ? "dual"
           : s == Schedule::dualpipev ? "dualv"
                                      : to_string(s);
}

const char* short_recompute(Recompute r) {
    return r == Recompute::selective ? "sel" : to_string(r);
}

const char* objective_words(Objective o) {
    switch (o) {
    case Objective::time:
        return "fastest iteration";
    case Objective::memory:
        return "least memory per GPU";
    case Objective::gpus:
        return "fewest GPUs reaching the target tokens/s";
    case Objective::cost:
        return "fewest GPU-hours per iteration, on up to --gpus GPUs";
    }
    return "?";
}



void print_header(std::ostream& os, const Inputs& in, const SearchOptions& so) {
    os << "# cleave plan: " << in.model.name << " on " << in.cluster.name << ", " << in.job.gpus
       << " GPUs, global batch " << in.job.global_batch << ", seq " << in.job.seq_len << ", "
       << to_string(in.job.compute) << "\n";
    os << "# objective: " << objective_words(so.objective);
    if (so.objective == Objective::gpus) {
        os << " (" << f("%.0f", so.target_tokens_per_s) << " tokens/s)";
    }
    os << "; TP across nodes " << (so.allow_tp_cross_node ? "allowed" : "disallowed")
       << (so.heuristics ? "; heuristics on" : "") << "\n";
    const std::string fixed = fixed_flags(so.fixed);
    if (!fixed.empty()) {
        os << "# fixed by the user (not searched): " << fixed << "\n";
    }
    if (const std::string peft = peft_summary(in.model, in.job); !peft.empty()) {
        os << "# peft: " << peft << "\n";
    }
    if (const std::string pk = packed_summary(in.job); !pk.empty()) {
        os << "# packed: " << pk << "\n";
    }
    if (const std::string cg = cuda_graph_summary(in.cluster.gpu, in.job); !cg.empty()) {
        os << "# cuda graphs: " << cg << "\n";
    }
    for (const std::string& c : caution_lines(in, so.fixed.schedule)) {
        os << "# caution: " << c << "\n";
    }
}

/// "7/8/7" (first / middle / last stage layers) for an uneven map, "even" otherwise.
std::string stage_column(const ModelSpec& m, const Plan& p) {
    if (!uneven_stages(m.layers, p)) {
        return "even";
    }
    const StageLayers sl = stage_layers(m.layers, p);
    return std::to_string(sl.first) + "/" + (p.pp > 2 ? std::to_string(sl.middle) + "/" : "") +
           std::to_string(sl.last);
}

std::string etp_cell(const Plan& p) {
    std::array<char, 16> b{};
    std::snprintf(b.data(), b.size(), " %3lld", static_cast<long long>(expert_tp(p)));
    return b.data();
}

void print_rows(std::ostream& os, const ModelSpec& m, const SearchResult& r) {
    // MoE models get an etp column (the expert grid's tensor-parallel size) after ep.
    const bool moe = m.moe.enabled();
    os << "#  #    dp tp  pp cp ep" << (moe ? " etp" : "")
       << "  v mbs sched rc   sp z  iter(s)     tok/s  MFU%  mem(GiB) bub% "
          "layers   risks\n";
    int rank = 0;
    for (const RankedPlan& rp : r.plans) {
        const Plan& p = rp.plan;
        const Estimate& e = rp.estimate;
        std::array<char, 160> b{};
        std::snprintf(b.data(),
                      b.size(),
                      "%4d %5lld %2lld %3lld %2lld %2lld%s %2lld %3lld %-5s %-4s %2d %1d %8.3f "
                      "%9.0f %5.1f %9.1f %4.1f ",
                      ++rank,
                      static_cast<long long>(p.dp),
                      static_cast<long long>(p.tp),
                      static_cast<long long>(p.pp),
                      static_cast<long long>(p.cp),
                      static_cast<long long>(p.ep),
                      moe ? etp_cell(p).c_str() : "",
                      static_cast<long long>(p.vpp),
                      static_cast<long long>(p.mbs),
                      short_schedule(p.schedule),
                      short_recompute(p.recompute),
                      p.sp ? 1 : 0,
                      p.zero,
                      e.iteration_time.value(),
                      e.tokens_per_s,
                      100.0 * e.mfu,
                      to_gib(e.memory.total),
                      100.0 * e.bubble_ratio);
        std::string layers = stage_column(m, p);
        layers.resize(std::max<std::size_t>(layers.size(), 8), ' ');
        os << b.data() << layers << " " << risk_codes(e, ',') << "\n";
    }
}

void print_why_not(std::ostream& os,
                   const Inputs& in,
                   const SearchOptions& so,
                   const SearchResult& r) {
    os << "# why not: " << r.rejected_total() << " rejected";
    if (r.rejected_total() == 0) {
        os << "\n";
        return;
    }
    os << " (reason, count, best rejected)\n";
    if (r.has_baseline && !r.baseline.estimate.fits) {
        const Estimate& e = r.baseline.estimate;
        os << "#   baseline pure DP (dp" << r.baseline.plan.dp
           << ", mbs 1, no recompute, no ZeRO): needs " << f("%.1f", to_gib(e.memory.total))
           << " GiB per GPU";
        if (e.memory_headroom.value() > 0.0) {
            os << " + " << f("%.1f", to_gib(e.memory_headroom)) << " GiB headroom";
        }
        os << ", has " << f("%.1f", to_gib(e.memory_usable)) << "\n";
    }
    for (std::size_t i = 0; i < reject_reason_count; ++i) {
        const auto why = static_cast<RejectReason>(i);
        const Rejection& rj = r.rejected[i];
        if (rj.count == 0) {
            continue;
        }
        const std::string d = describe_rejection(in.model, in.job, so, why, rj);
        const std::size_t cut = d.find("): ");
        const std::size_t split = cut != std::string::npos ? cut + 1 : d.find(": ");
        std::array<char, 64> b{};
        std::snprintf(b.data(),
                      b.size(),
                      "#   %-14s %9lld  ",
                      to_string(why),
                      static_cast<long long>(rj.count));
        os << b.data() << d.substr(0, split) << "\n";
        if (split != std::string::npos) {
            os << "#       " << d.substr(split + 2) << "\n";
        }
    }
}

void print_top_risks(std::ostream& os, const Inputs& in, const SearchResult& r) {
    if (r.plans.empty()) {
        return;
    }
    const RankedPlan& best = r.plans.front();
    const Inputs bi = inputs_for(in, best.plan);
    const auto risks = describe_risks(bi.model, bi.cluster, bi.job, best.plan, best.estimate);
    os << "# plan 1: cleave explain " << to_flags(best.plan) << "\n";
    for (const Risk& k : risks) {
        os << "# risk " << to_string(k.kind) << ": " << k.message << "\n";
        if (!k.fix.empty()) {
            os << "#   fix: " << k.fix << "\n";
        }
    }
    for (const std::string& n : plan_notes(best.plan)) {
        os << "# note: " << n << "\n";
    }
}

void print_sim_rows(std::ostream& os, const SearchResult& r, const SimScores& sims) {
    if (sims.empty()) {
        return;
    }
    os << "# simulated (simulator/, event by event): re-ranked by simulated iteration time\n";
    os << "#  # was   sim(s) analytic(s) sim bub% plan\n";
    for (std::size_t i = 0; i < sims.size(); ++i) {
        std::array<char, 96> b{};
        std::snprintf(b.data(),
                      b.size(),
                      "%4zu %3lld %8.3f %11.3f %8.1f ",
                      i + 1,
                      static_cast<long long>(sims[i].analytic_rank),
                      sims[i].iteration_time_s,
                      r.plans[i].estimate.iteration_time.value(),
                      100.0 * sims[i].bubble_ratio);
        os << b.data() << to_string(r.plans[i].plan) << "\n";
    }
}

void print_why_empty(std::ostream& os, const std::string& why) {
    std::size_t at = 0;
    while (at < why.size()) {
        const std::size_t end = std::min(why.find('\n', at), why.size());
        os << "# why empty: " << why.substr(at, end - at) << "\n";
        at = end + 1;
    }
}

void print_table(std::ostream& os,
                 const Inputs& in,
                 const SearchOptions& so,
                 const SearchResult& r,
                 const SimScores& sims,
                 double elapsed_s,
                 const std::string& why_empty) {
    print_header(os, in, so);
    os << "# searched " << r.candidates_evaluated << " candidates: " << r.feasible
       << " feasible, top " << r.plans.size() << " below\n";
    print_why_empty(os, why_empty);
    os << "# memory headroom " << f("%.1f", to_gib(in.job.memory_headroom))
       << " GiB per GPU (--memory-headroom): " << r.set_aside_for_headroom
       << " plans that fit without it set aside\n";
    if (so.objective == Objective::gpus || so.objective == Objective::cost) {
        os << "# job sizes searched (GPUs):";
        for (int64_t n : r.gpu_counts_searched) {
            os << " " << n;
        }
        os << (so.objective == Objective::cost ? "; cheapest: " : "; fewest reaching the target: ")
           << (r.plans.empty() ? std::string("none") : std::to_string(plan_gpus(r.plans[0].plan)))
           << "\n";
    }
    os << "# risks: oom nccl(timeout) slownet tpnode(TP across nodes) tppcie fewmb(m<p) "
          "bubble(>30%)"
       << (in.model.moe.enabled() ? " epnic(EP all-to-all through NICs) moeimb(imbalance>1.5) "
                                    "moefix(expert fixed cost>=25%)"
                                  : "")
       << "\n";
    print_rows(os, in.model, r);
    print_sim_rows(os, r, sims);
    print_top_risks(os, in, r);
    print_why_not(os, in, so, r);
    os << "# elapsed: " << f("%.3f", elapsed_s) << " s\n";
}

nlohmann::json
rejection_json(const Inputs& in, const SearchOptions& so, RejectReason why, const Rejection& rj) {
    nlohmann::json j = {{"count", rj.count},
                        {"message", describe_rejection(in.model, in.job, so, why, rj)}};
    JobSpec job = in.job;
    job.gpus = rj.gpus;
    j["plan"] = plan_to_json(rj.example, job);
    if (rj.priced) {
        const double need = to_gib(rj.estimate.memory.total);
        const double has = to_gib(rj.estimate.memory_usable);
        j["needs_gib"] = need;
        j["has_gib"] = has;
        j["tokens_per_s"] = rj.estimate.tokens_per_s;
        j["iteration_time_s"] = rj.estimate.iteration_time.value();
        if (why == RejectReason::memory) {
            j["miss_gib"] = need - has;
        }
        if (why == RejectReason::target) {
            j["miss_tokens_per_s"] = so.target_tokens_per_s - rj.estimate.tokens_per_s;
        }
    }
    return j;
}

nlohmann::json plan_result_json(const Inputs& in,
                                const SearchOptions& so,
                                const SearchResult& r,
                                const SimScores& sims,
                                double elapsed_s,
                                const std::string& why_empty) {
    nlohmann::json rejected = nlohmann::json::object();
    nlohmann::json best = nlohmann::json::object();
    for (std::size_t i = 0; i < reject_reason_count; ++i) {
        const auto why = static_cast<RejectReason>(i);
        rejected[to_string(why)] = r.rejected[i].count;
        if (r.rejected[i].count > 0 && r.rejected[i].has_example) {
            best[to_string(why)] = rejection_json(in, so, why, r.rejected[i]);
        }
    }
    auto plans = nlohmann::json::array();
    int64_t rank = 0;
    for (const RankedPlan& rp : r.plans) {
        nlohmann::json pj = estimate_to_json(inputs_for(in, rp.plan), rp.plan, rp.estimate);
        if (!sims.empty()) {
            const SimScore& sc = sims[static_cast<std::size_t>(rank)];
            pj["simulated_iteration_time_s"] = sc.iteration_time_s;
            pj["simulated_bubble_ratio"] = sc.bubble_ratio;
            pj["analytic_rank"] = sc.analytic_rank;
        }
        pj["rank"] = ++rank;
        plans.push_back(std::move(pj));
    }
    return {{"model", in.model.name},
            {"cluster", in.cluster.name},
            {"gpus", in.job.gpus},
            {"global_batch", in.job.global_batch},
            {"seq_len", in.job.seq_len},
            {"dtype", to_string(in.job.compute)},
            {"objective", to_string(so.objective)},
            {"target_tokens_per_s", so.target_tokens_per_s},
            {"gpu_counts_searched", r.gpu_counts_searched},
            {"candidates_evaluated", r.candidates_evaluated},
            {"feasible", r.feasible},
            {"memory_headroom_gib", to_gib(in.job.memory_headroom)},
            {"set_aside_for_headroom", r.set_aside_for_headroom},
            {"fixed", fixed_flags(so.fixed)},
            {"cautions", cautions(in, so.fixed.schedule)},
            {"rejected", rejected},
            {"rejected_best", best},
            {"rejected_total", r.rejected_total()},
            {"why_empty", why_empty},
            {"baseline_pure_dp",
             r.has_baseline ? estimate_to_json(in, r.baseline.plan, r.baseline.estimate)
                            : nlohmann::json(nullptr)},
            {"plans", plans},
            {"elapsed_s", elapsed_s}};
}

void print_csv(std::ostream& os, const SearchResult& r, const SimScores& sims) {
    os << "rank,dp,tp,pp,cp,ep,vpp,mbs,schedule,recompute,sp,zero,iteration_time_s,tokens_per_s,"
          "tflops_per_gpu,mfu,bubble_ratio,memory_gib,usable_memory_gib,risks,"
          "simulated_iteration_time_s,first_stage_layers,last_stage_layers,etp\n";
    std::size_t rank = 0;
    for (const RankedPlan& rp : r.plans) {
        const Plan& p = rp.plan;
        const Estimate& e = rp.estimate;
        const std::string sim = sims.empty() ? "" : f("%.9g", sims[rank].iteration_time_s);
        os << ++rank << "," << p.dp << "," << p.tp << "," << p.pp << "," << p.cp << "," << p.ep
           << "," << p.vpp << "," << p.mbs << "," << to_string(p.schedule) << ","
           << to_string(p.recompute) << "," << (p.sp ? 1 : 0) << "," << p.zero << ","
           << f("%.9g", e.iteration_time.value()) << "," << f("%.9g", e.tokens_per_s) << ","
           << f("%.9g", e.tflops_per_gpu) << "," << f("%.9g", e.mfu) << ","
           << f("%.9g", e.bubble_ratio) << "," << f("%.9g", to_gib(e.memory.total)) << ","
           << f("%.9g", to_gib(e.memory_usable)) << "," << risk_codes(e, ';') << "," << sim << ","
           << p.first_layers << "," << p.last_layers << "," << expert_tp(p) << "\n";
    }
}

/// Re-scores the top plans with simulate() and re-ranks them by simulated iteration time
/// (ties by plan key), keeping each plan's analytic rank.
SimScores rescore(const Inputs& in, SearchResult& r) {
    std::vector<std::pair<SimScore, RankedPlan>> rows;
    for (std::size_t i = 0; i < r.plans.size(); ++i) {
        const RankedPlan& rp = r.plans[i];
        const Inputs pi = inputs_for(in, rp.plan);
        const SimResult sim = simulate(pi.model, pi.cluster, pi.job, rp.plan, rp.estimate);
        rows.push_back(
            {{static_cast<int64_t>(i) + 1, sim.iteration_time.value(), sim.bubble_ratio}, rp});
    }
    std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
        return a.first.iteration_time_s < b.first.iteration_time_s;
    });
    SimScores out;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        r.plans[i] = rows[i].second;
        out.push_back(rows[i].first);
    }
    return out;
}

}  // namespace

SearchOptions::Fixed fixed_dimensions(const PlanOptions& g,
                                      const std::function<bool(std::string_view)>& given,
                                      const Inputs& in) {
    SearchOptions::Fixed f;
    f.tp = given("tp") ? g.tp : 0;
    f.pp = given("pp") ? g.pp : 0;
    f.dp = given("dp") ? g.dp : 0;
    f.cp = given("cp") ? g.cp : 0;
    f.ep = given("ep") ? g.ep : 0;
    f.etp = given("etp") ? g.etp : 0;
    f.mbs = given("mbs") ? g.mbs : 0;
    if (in.job.packed_mean_len > 0.0 && f.mbs > 0) {
        f.mbs = packed_micro_batch(f.mbs);  // the search tries mbs 1 alone (planner/search.cpp)
    }
    f.vpp = given("vpp") ? g.vpp : 0;
    f.zero = given("zero") ? g.zero : -1;
    if (given("schedule")) {
        f.schedule = parse_schedule(g.schedule).value_or(Schedule::one_f_one_b);
    }
    if (given("recompute")) {
        f.recompute = g.recompute == "full"        ? Recompute::full
                      : g.recompute == "selective" ? Recompute::selective
                                                   : Recompute::none;
    }
    if (given("sp")) {
        f.sp = g.sp;
    }
    if (!g.recompute_modules.empty()) {
        if (f.recompute && *f.recompute != Recompute::selective) {
            throw ConfigError("--recompute-modules is selective recomputation's list; it cannot be "
                              "combined with --recompute " + g.recompute);
        }
        f.recompute = Recompute::selective;
        f.recompute_modules = parse_recompute_modules(g.recompute_modules);
    }
    f.offload_layers = g.offload_layers;
    f.recompute_layers = g.recompute_num_layers;
    f.recompute_method =
        g.recompute_method == "block" ? RecomputeMethod::block : RecomputeMethod::uniform;
    if (!g.pipeline_layout.empty()) {
        if (f.pp == 0) {
            throw ConfigError("--pipeline-layout needs --pp (the layout's stages are pp * vpp)");
        }
        Plan p;
        p.pp = f.pp;
        apply_layout(g.pipeline_layout, in.model.layers, p);
        if (f.vpp > 0 && f.vpp != p.vpp) {
            throw ConfigError("--pipeline-layout has " + std::to_string(p.vpp) +
                              " virtual stages per rank, --vpp says " + std::to_string(f.vpp));
        }
        f.vpp = p.vpp;
        f.layers = true;
        f.first_layers = p.first_layers;
        f.last_layers = p.last_layers;
    } else if (given("first-stage-layers") || given("last-stage-layers")) {
        f.layers = true;
        f.first_layers = g.first_stage_layers;
        f.last_layers = g.last_stage_layers;
    }
    return f;
}

Objective parse_objective(const std::string& s) {
    if (s == "time" || s == "memory" || s == "gpus" || s == "cost") {
        return s == "memory" ? Objective::memory
               : s == "gpus" ? Objective::gpus
               : s == "cost" ? Objective::cost
                             : Objective::time;
    }
    throw ConfigError("objective: '" + s + "' is not one of time, memory, gpus, cost");
}

Inputs inputs_for(const Inputs& in, const Plan& p) {
    Inputs out = in;
    out.job.gpus = plan_gpus(p);
    return out;
}

Planned plan(const Inputs& in, const SearchOptions& so, bool simulate, const ProgressFn& progress) {
    Planned out{in, so, {}, {}, 0.0, {}};
    const auto t0 = std::chrono::steady_clock::now();
    out.result = progress ? search(in.model, in.cluster, in.job, so, progress)
                          : search(in.model, in.cluster, in.job, so);
    if (simulate) {
        out.simulated = rescore(in, out.result);
    }
    out.why_empty = why_empty(in.model, in.cluster, in.job, so, out.result);
    out.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

nlohmann::json to_json(const Planned& r) {
    return plan_result_json(r.inputs, r.options, r.result, r.simulated, r.elapsed_s, r.why_empty);
}

void print_table(std::ostream& os, const Planned& r) {
    print_table(os, r.inputs, r.options, r.result, r.simulated, r.elapsed_s, r.why_empty);
}

void print_csv(std::ostream& os, const Planned& r) {
    print_csv(os, r.result, r.simulated);
}

void print_why_not(std::ostream& os, const Planned& r) {
    print_why_not(os, r.inputs, r.options, r.result);
}

void require_export_framework(const Inputs& in, std::string_view format) {
    if (format != "megatron" && format != "deepspeed" && format != "bridge" &&
        format != "torchtitan") {
        throw ConfigError("export format '" + std::string(format) +
                          "' is not one of megatron, bridge, deepspeed, torchtitan");
    }
    if (format != "torchtitan") {
        const std::string f(format);
        require_framework(in.job,
                          format == "deepspeed" ? StackFramework::deepspeed
                                                : StackFramework::megatron,
                          f.c_str());
    }
}

void write_export(std::ostream& out,
                  std::ostream& err,
                  const Inputs& in,
                  const RankedPlan& best,
                  std::string_view format) {
    require_export_framework(in, format);
    if (best.plan.schedule == Schedule::dualpipev && format != "torchtitan") {
        throw ConfigError("--format " + std::string(format) +
                          ": DualPipeV is a torch.distributed.pipelining schedule "
                          "(ScheduleDualPipeV), which torchtitan runs; Megatron-LM, "
                          "Megatron-Bridge and DeepSpeed have none (--format torchtitan)");
    }
    if (best.plan.schedule == Schedule::dualpipe) {
        throw ConfigError(
            "--format " + std::string(format) +
            ": DualPipe is not a schedule of Megatron-LM, Megatron-Bridge, DeepSpeed or torchtitan "
            "(deepseek-ai/DualPipe is a module of its own; torch.distributed.pipelining has "
            "DualPipeV, its V-shaped variant): cleave prices the plan but cannot write its launch "
            "settings");
    }
    const Inputs x = inputs_for(in, best.plan);
    if (format == "megatron") {
        write_megatron(out, x.model, x.job, best);
    } else if (format == "torchtitan") {
        write_torchtitan(out, x.model, x.job, best);
    } else if (format == "bridge") {
        write_bridge(out, x.model, x.job, best);
    } else {
        write_deepspeed(out, err, x.job, best);
    }
}

void write_export(std::ostream& out, std::ostream& err, const Planned& r, std::string_view format) {
    if (r.result.plans.empty()) {
        throw ConfigError("no feasible plan to export");
    }
    write_export(out, err, r.inputs, r.result.plans.front(), format);
}

}  // namespace cleave::api
