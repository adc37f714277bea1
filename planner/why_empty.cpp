// Why a search left no plan (planner/why_empty.hpp). The search counts only the plans it
// builds; a fixed value outside its loops (tp = 3 on 64 GPUs) is never built, so nothing is
// counted. Here the fixed flags are searched alone and in pairs with a price that prices
// nothing, and the rule table (core/plan_rules.cpp) is read on a probe plan holding the fixed
// values and the most permissive value of every free one (1 for sizes, 2 for a pipeline a
// schedule needs): a rule the probe breaks through a fixed value breaks for every plan with it.
#include "planner/why_empty.hpp"

#include "costmodel/splits.hpp"

#include <initializer_list>
#include <vector>

namespace cleave {

namespace {

using Fixed = SearchOptions::Fixed;

enum class Part : unsigned {
    tp,
    pp,
    dp,
    cp,
    ep,
    etp,
    mbs,
    vpp,
    schedule,
    recompute,
    sp,
    zero,
    recompute_layers,
    recompute_method,
    recompute_modules,
    offload,
    layers,
    count
};

constexpr unsigned part_count = static_cast<unsigned>(Part::count);

using Parts = unsigned;  // one bit per Part

constexpr Parts bit(unsigned i) {
    return 1u << i;
}

bool has(Parts s, Part p) {
    return (s & bit(static_cast<unsigned>(p))) != 0;
}

/// The parts of `f` the user fixed.
Parts given(const Fixed& f) {
    const bool on[part_count] = {f.tp > 0,
                                 f.pp > 0,
                                 f.dp > 0,
                                 f.cp > 0,
                                 f.ep > 0,
                                 f.etp > 0,
                                 f.mbs > 0,
                                 f.vpp > 0,
                                 f.schedule.has_value(),
                                 f.recompute.has_value(),
                                 f.sp.has_value(),
                                 f.zero >= 0,
                                 f.recompute_layers > 0,
                                 f.recompute_method == RecomputeMethod::block,
                                 f.recompute_modules != 0,
                                 f.offload_layers > 0,
                                 f.layers};
    Parts s = 0;
    for (unsigned i = 0; i < part_count; ++i) {
        s |= on[i] ? bit(i) : 0u;
    }
    return s;
}

/// `f` with only the parts in `s` fixed.
Fixed only(const Fixed& f, Parts s) {
    Fixed g;
    const auto take = [s](Part p, auto& to, const auto& from) {
        if (has(s, p)) {
            to = from;
        }
    };
    take(Part::tp, g.tp, f.tp);
    take(Part::pp, g.pp, f.pp);
    take(Part::dp, g.dp, f.dp);
    take(Part::cp, g.cp, f.cp);
    take(Part::ep, g.ep, f.ep);
    take(Part::etp, g.etp, f.etp);
    take(Part::mbs, g.mbs, f.mbs);
    take(Part::vpp, g.vpp, f.vpp);
    take(Part::schedule, g.schedule, f.schedule);
    take(Part::recompute, g.recompute, f.recompute);
    take(Part::sp, g.sp, f.sp);
    take(Part::zero, g.zero, f.zero);
    take(Part::recompute_layers, g.recompute_layers, f.recompute_layers);
    take(Part::recompute_method, g.recompute_method, f.recompute_method);
    take(Part::recompute_modules, g.recompute_modules, f.recompute_modules);
    take(Part::offload, g.offload_layers, f.offload_layers);
    take(Part::layers, g.layers, f.layers);
    take(Part::layers, g.first_layers, f.first_layers);
    take(Part::layers, g.last_layers, f.last_layers);
    return g;
}

struct Ctx {
    const ModelSpec& model;
    const ClusterSpec& cluster;
    const JobSpec& job;
    const SearchOptions& options;
    SplitWeights weights;
    bool fixed_size;  // one job size is searched (not objective gpus or cost)
};

std::string n(const char* name, int64_t v) {
    return std::string(name) + "=" + std::to_string(v);
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
    std::string s;
    for (const std::string& p : parts) {
        s += (s.empty() ? "" : sep) + p;
    }
    return s;
}

Estimate price_nothing(const ModelSpec&, const ClusterSpec&, const JobSpec&, const Plan&) {
    return {};
}

/// The search with only the parts `s` of the fixed flags, pricing nothing: every plan it builds
/// is counted in candidates_evaluated.
SearchResult enumerate(const Ctx& x, Parts s) {
    SearchOptions o = x.options;
    o.fixed = only(x.options.fixed, s);
    return search_with(x.model, x.cluster, x.job, o, &price_nothing);
}

struct Probe {
    Plan plan;
    bool dp_known = false;  // dp fixed, or tp, pp and cp fixed on a job of one size
};

/// The fixed values of `s`; every other field at its most permissive value.
Probe probe(const Ctx& x, Parts s) {
    const Fixed& f = x.options.fixed;
    Probe out;
    Plan& p = out.plan;
    p.tp = has(s, Part::tp) ? f.tp : 1;
    p.cp = has(s, Part::cp) ? f.cp : 1;
    p.ep = has(s, Part::ep) ? f.ep : 1;
    p.etp = has(s, Part::etp) ? f.etp : 0;
    p.mbs = has(s, Part::mbs) ? f.mbs : 1;
    p.zero = has(s, Part::zero) ? f.zero : 0;
    p.sp = has(s, Part::sp) && *f.sp;
    const bool chunks = has(s, Part::vpp) && f.vpp > 1;
    p.schedule = has(s, Part::schedule) ? *f.schedule
                 : chunks               ? Schedule::interleaved
                                        : Schedule::one_f_one_b;
    p.vpp = has(s, Part::vpp) ? f.vpp : (p.schedule == Schedule::interleaved ? 2 : 1);
    const bool piped = p.schedule == Schedule::interleaved || bidirectional(p.schedule);
    p.pp = has(s, Part::pp) ? f.pp : (piped ? 2 : 1);
    const bool full_knobs = has(s, Part::recompute_layers) || has(s, Part::recompute_method);
    p.recompute = has(s, Part::recompute) ? *f.recompute
                  : full_knobs            ? Recompute::full
                                          : Recompute::none;
    p.recompute_layers = has(s, Part::recompute_layers) ? f.recompute_layers : 0;
    p.recompute_method =
        has(s, Part::recompute_method) ? f.recompute_method : RecomputeMethod::uniform;
    p.recompute_modules = has(s, Part::recompute_modules) ? f.recompute_modules : 0;
    p.offload_layers = has(s, Part::offload) ? f.offload_layers : 0;
    if (has(s, Part::layers)) {
        p.first_layers = f.first_layers;
        p.last_layers = f.last_layers;
    }
    const int64_t mp = p.tp * p.pp * p.cp;
    if (has(s, Part::dp)) {
        p.dp = f.dp;
        out.dp_known = true;
    } else if (has(s, Part::tp) && has(s, Part::pp) && has(s, Part::cp) && x.fixed_size &&
               x.job.gpus % mp == 0) {
        p.dp = x.job.gpus / mp;
        out.dp_known = true;
    }
    return out;
}

/// Whether a broken rule is the fixed parts' doing (see the file comment). Rules whose free
/// fields have no single most permissive value are read by the *_reasons functions below.
bool owned(Rule r, Parts s, const Probe& pr) {
    const auto fixed = [s](Part p) { return has(s, p); };
    switch (r) {
    case Rule::sizes:
    case Rule::zero_stage:
        return s != 0;
    case Rule::tp_heads:
    case Rule::tp_kv_heads:
    case Rule::tp_ffn:
    case Rule::tp_mamba:
        return fixed(Part::tp);
    case Rule::tp_gdn:
        return fixed(Part::tp) || fixed(Part::cp);
    case Rule::cp_seq:
        return fixed(Part::cp);
    case Rule::ep_moe:
    case Rule::ep_experts:
        return fixed(Part::ep);
    case Rule::interleave_pp:
    case Rule::interleave_microbatches:
        return fixed(Part::pp) && (fixed(Part::schedule) || fixed(Part::vpp));
    case Rule::interleave_vpp:
    case Rule::vpp_schedule:
        return fixed(Part::schedule) && fixed(Part::vpp);
    case Rule::dualpipe_shape:
        return fixed(Part::schedule) && fixed(Part::pp);
    case Rule::zero_pipeline:
        return fixed(Part::zero) && fixed(Part::pp);
    case Rule::batch:
        return fixed(Part::mbs) || pr.dp_known;
    case Rule::sp_tp:
        return fixed(Part::sp) && fixed(Part::tp);
    case Rule::sp_seq:
        return fixed(Part::sp) && (fixed(Part::tp) || fixed(Part::cp));
    case Rule::recompute_layers:
        return fixed(Part::recompute_layers) || fixed(Part::recompute_method);
    case Rule::muon_sharding:
        return fixed(Part::zero) && pr.plan.zero > 1;
    case Rule::model_code:
        return (fixed(Part::tp) && pr.plan.tp > 1) || (fixed(Part::pp) && pr.plan.pp > 1) ||
               (fixed(Part::cp) && pr.plan.cp > 1) || (fixed(Part::ep) && pr.plan.ep > 1) ||
               (fixed(Part::recompute) && pr.plan.recompute == Recompute::selective) ||
               fixed(Part::recompute_method) || fixed(Part::recompute_layers);
    case Rule::stage_layers:
    case Rule::stage_split:
    case Rule::vpp_chunks:
    case Rule::ep_dp:
    case Rule::gpus:
    case Rule::count:
        break;
    }
    return false;
}

std::string with_rule(const Violation& v) {
    return v.message + " (rule " + rule_info(v.rule).name + ")";
}

/// The violations of `p` among `rules`, each naming its rule.
void broken(const Ctx& x,
            const Plan& p,
            std::initializer_list<Rule> rules,
            std::vector<std::string>& out) {
    for (const Violation& v : plan_violations(x.model, x.job, p)) {
        for (Rule r : rules) {
            if (v.rule == r) {
                out.push_back(with_rule(v));
            }
        }
    }
}

/// Whether the search has a layer map for (pp, vpp) under fixed flags `f`
/// (Enumerator::splits() and pipeline(), planner/search.cpp).
bool has_split(const Ctx& x, const Fixed& f, int64_t pp, int64_t vpp) {
    if (vpp > 1 && (pp < 2 || vpp * pp > x.model.layers + 2)) {
        return false;
    }
    Plan p;
    p.pp = pp;
    p.vpp = vpp;
    p.schedule = vpp > 1 ? Schedule::interleaved : Schedule::one_f_one_b;
    const auto rules_keep = [&x, &p] {
        for (Rule r : {Rule::stage_split, Rule::stage_layers, Rule::vpp_chunks}) {
            if (!keeps(r, x.model, x.job, p)) {
                return false;
            }
        }
        return true;
    };
    if (f.layers) {
        p.first_layers = f.first_layers;
        p.last_layers = f.last_layers;
        return rules_keep();
    }
    if (!balanced_splits(x.model, x.job, pp, vpp, x.weights).empty()) {
        return true;
    }
    return (f.pp == pp || (vpp > 1 && f.vpp == vpp)) && rules_keep();
}

/// tp, pp, cp and dp as fixed must divide (all four: equal) the job's GPUs.
void gpu_reasons(const Ctx& x, Parts s, std::vector<std::string>& out) {
    if (!x.fixed_size) {
        return;
    }
    const Fixed& f = x.options.fixed;
    const std::pair<Part, std::pair<const char*, int64_t>> dims[] = {{Part::dp, {"dp", f.dp}},
                                                                     {Part::tp, {"tp", f.tp}},
                                                                     {Part::pp, {"pp", f.pp}},
                                                                     {Part::cp, {"cp", f.cp}}};
    std::string names;
    int64_t product = 1;
    int count = 0;
    for (const auto& [part, dim] : dims) {
        if (has(s, part)) {
            names += (names.empty() ? "" : "*") + std::string(dim.first);
            product *= dim.second;
            ++count;
        }
    }
    const int64_t gpus = x.job.gpus;
    if (count == 0 || (count == 4 ? product == gpus : gpus % product == 0)) {
        return;
    }
    out.push_back(names + "=" + std::to_string(product) +
                  (count == 4 ? " is not " : " does not divide ") + n("gpus", gpus) + " (rule " +
                  rule_info(Rule::gpus).name + ")");
}

/// Pipeline stages and virtual chunks: the layer maps the search would try for the fixed pp and
/// vpp (their rules depend on the map, which the search chooses, so they are read here).
void layer_reasons(const Ctx& x, Parts s, const Plan& probe, std::vector<std::string>& out) {
    const Fixed sub = only(x.options.fixed, s);
    const int64_t layers = x.model.layers;
    Plan even = probe;
    if (!has(s, Part::layers)) {
        even.first_layers = 0;
        even.last_layers = 0;
    }
    const bool pp = has(s, Part::pp);
    if (pp && !has_split(x, sub, probe.pp, 1) && probe.vpp == 1) {
        broken(x, even, {Rule::stage_split, Rule::stage_layers}, out);
    }
    const int64_t v = probe.vpp;
    if (has(s, Part::vpp) && v > 1) {
        if (pp && probe.pp > 1 && !has_split(x, sub, probe.pp, v)) {
            if (v * probe.pp > layers + 2) {
                out.push_back(n("vpp", v) + " chunks on each of " + n("pp", probe.pp) +
                              " stages make " + std::to_string(v * probe.pp) +
                              " chunks, more than " + n("layers", layers) +
                              " + 2 (only the embedding's and the loss's chunk may be empty) (rule "
                              "vpp_chunks)");
            } else {
                const std::size_t before = out.size();
                broken(x, even, {Rule::stage_split, Rule::stage_layers, Rule::vpp_chunks}, out);
                if (out.size() == before) {
                    out.push_back("no map of " + n("layers", layers) + " over " +
                                  n("pp", probe.pp) + " stages of " + n("vpp", v) +
                                  " chunks gives every chunk whole layers (rule vpp_chunks)");
                }
            }
        } else if (!pp && x.fixed_size) {
            bool any = false;
            for (int64_t q = 2; q <= x.job.gpus && !any; ++q) {
                const bool allowed = x.options.max_pp <= 0 || q <= x.options.max_pp;
                any = x.job.gpus % q == 0 && allowed && has_split(x, sub, q, v);
            }
            if (!any) {
                out.push_back(n("vpp", v) + " needs pp > 1 stages of " + std::to_string(v) +
                              " chunks that each build a layer, and no pp that divides " +
                              n("gpus", x.job.gpus) + " has them for " + n("layers", layers) +
                              " (rules interleave_pp, vpp_chunks)");
            }
        }
    }
    if (has(s, Part::schedule) && probe.schedule == Schedule::interleaved && !has(s, Part::vpp) &&
        pp && probe.pp > 1) {
        bool any = false;
        for (int64_t w = 2; w * probe.pp <= layers + 2 && !any; ++w) {
            any = has_split(x, sub, probe.pp, w);
        }
        if (!any) {
            out.push_back("the interleaved schedule needs vpp >= 2 chunks of whole layers per "
                          "stage, and " +
                          n("pp", probe.pp) + " over " + n("layers", layers) +
                          " has none (rule vpp_chunks)");
        }
    }
}

/// The expert grid: etp needs experts; ep x etp folds into the tp x cp x dp ranks of a stage.
void expert_reasons(const Ctx& x, Parts s, const Plan& probe, std::vector<std::string>& out) {
    const bool ep = has(s, Part::ep) && probe.ep > 1;
    const bool etp = has(s, Part::etp);
    if (!x.model.moe.enabled()) {
        if (etp && probe.etp > 1) {
            out.push_back(n("etp", probe.etp) + " needs an MoE model (experts > 0) (rule ep_moe)");
        }
        return;
    }
    const int64_t stage = has(s, Part::pp) ? probe.pp : 1;
    if (!(ep || etp) || !x.fixed_size || x.job.gpus % stage != 0) {
        return;
    }
    // A free etp may be 1 (the search tries 1 and tp): the grid is at least ep x etp.
    const int64_t grid = probe.ep * (etp ? probe.etp : 1);
    const int64_t room = x.job.gpus / stage;
    if (room % grid != 0) {
        const std::string named = ep && etp ? n("ep", probe.ep) + " x " + n("etp", probe.etp)
                                  : ep      ? n("ep", probe.ep)
                                            : n("etp", probe.etp);
        out.push_back(named + " does not divide the " + std::to_string(room) +
                      " GPUs of a pipeline stage (tp*cp*dp) (rule ep_dp)");
    }
}

/// ZeRO 1..3 with one data-parallel rank, the search's limits, TP leaving the node and the
/// --heuristics skips: pruned by the search (planner/search.cpp) outside the rule table.
void search_reasons(const Ctx& x, Parts s, const Plan& probe, std::vector<std::string>& out) {
    const Fixed& f = x.options.fixed;
    const SearchOptions& o = x.options;
    if (has(s, Part::zero) && f.zero >= 1) {
        int64_t shard = 0;
        if (has(s, Part::dp) && has(s, Part::cp)) {
            shard = f.dp * f.cp;
        } else if (has(s, Part::tp) && has(s, Part::pp) && x.fixed_size &&
                   x.job.gpus % (f.tp * f.pp) == 0) {
            shard = x.job.gpus / (f.tp * f.pp);
        }
        if (shard == 1) {
            out.push_back(n("zero", f.zero) +
                          " shards over the data-parallel ranks and dp*cp=1 leaves none (with one "
                          "rank it is --zero 0)");
        }
    }
    const std::pair<Part, std::pair<const char*, int64_t>> limits[] = {
        {Part::tp, {"tp", o.max_tp}},
        {Part::pp, {"pp", o.max_pp}},
        {Part::cp, {"cp", o.max_cp}},
        {Part::ep, {"ep", o.max_ep}}};
    const int64_t values[] = {probe.tp, probe.pp, probe.cp, probe.ep};
    for (std::size_t i = 0; i < 4; ++i) {
        const auto& [part, lim] = limits[i];
        if (has(s, part) && lim.second > 0 && values[i] > lim.second) {
            out.push_back(n(lim.first, values[i]) + " is above --max-" + lim.first + " " +
                          std::to_string(lim.second));
        }
    }
    const int64_t domain = nvlink_domain(x.cluster.node);
    const bool crosses = domain > 0 && (probe.tp > domain || domain % probe.tp != 0);
    if (has(s, Part::tp) && crosses && (!o.allow_tp_cross_node || o.heuristics)) {
        out.push_back(n("tp", probe.tp) + " leaves the NVLink domain of " + std::to_string(domain) +
                      " GPUs" +
                      (o.allow_tp_cross_node ? " (skipped by --heuristics)"
                                             : " (TP across nodes is off; --allow-tp-cross-node "
                                               "prices it)"));
    }
    if (o.heuristics && has(s, Part::cp) && probe.cp > 1 && x.job.seq_len < 8192) {
        out.push_back(n("cp", probe.cp) + " is skipped by --heuristics for " +
                      n("seq", x.job.seq_len) + " < 8192");
    }
    if (o.heuristics && has(s, Part::schedule) && probe.schedule == Schedule::gpipe &&
        has(s, Part::pp) && probe.pp > 1) {
        out.push_back("GPipe is skipped by --heuristics (1F1B has the same bubble)");
    }
}

/// A fixed mbs with tp and pp fixed but cp (so dp) free: no split of the dp * cp ranks left into
/// a dp and a cp that splits the sequence gives an mbs * dp dividing the global batch.
void batch_reasons(const Ctx& x, Parts s, const Probe& pr, std::vector<std::string>& out) {
    const Plan& p = pr.plan;
    const bool tp_pp = has(s, Part::tp) && has(s, Part::pp);
    if (!has(s, Part::mbs) || pr.dp_known || !tp_pp || !x.fixed_size ||
        x.job.gpus % (p.tp * p.pp) != 0 || x.job.global_batch % p.mbs != 0) {
        return;  // the rule itself (mbs alone, dp known) or gpu_reasons() says it
    }
    const int64_t room = x.job.gpus / (p.tp * p.pp);
    for (int64_t dp = 1; dp <= room; ++dp) {
        Plan q = p;
        q.dp = dp;
        q.cp = room / dp;
        const bool cp_ok = x.options.max_cp <= 0 || q.cp <= x.options.max_cp;
        if (room % dp == 0 && cp_ok && keeps(Rule::cp_seq, x.model, x.job, q) &&
            keeps(Rule::batch, x.model, x.job, q)) {
            return;
        }
    }
    out.push_back(n("mbs", p.mbs) + " x dp does not divide the global batch " +
                  std::to_string(x.job.global_batch) + " for any dp of the dp*cp=" +
                  std::to_string(room) + " ranks the fixed tp and pp leave (rule batch)");
}

std::vector<std::string> reasons(const Ctx& x, Parts s) {
    const Probe pr = probe(x, s);
    std::vector<std::string> out;
    gpu_reasons(x, s, out);
    for (const Violation& v : plan_violations(x.model, x.job, pr.plan)) {
        if (!owned(v.rule, s, pr)) {
            continue;
        }
        if (v.rule == Rule::batch && !pr.dp_known) {  // dp is free: 1 is the probe's
            out.push_back(n("mbs", pr.plan.mbs) + " does not divide the global batch " +
                          std::to_string(x.job.global_batch) + ", so mbs*dp cannot for any dp " +
                          "(rule batch)");
        } else {
            out.push_back(with_rule(v));
        }
    }
    batch_reasons(x, s, pr, out);
    layer_reasons(x, s, pr.plan, out);
    expert_reasons(x, s, pr.plan, out);
    search_reasons(x, s, pr.plan, out);
    return out;
}

/// The structural rejections a search counted, as describe_rejection() words them.
std::vector<std::string> counted(const Ctx& x, const Fixed& f, const SearchResult& r) {
    SearchOptions o = x.options;
    o.fixed = f;
    std::vector<std::string> out;
    for (std::size_t i = 0; i < reject_reason_count; ++i) {
        const auto why = static_cast<RejectReason>(i);
        if (why == RejectReason::memory || why == RejectReason::target ||
            r.rejected[i].count == 0) {
            continue;
        }
        out.push_back(describe_rejection(x.model, x.job, o, why, r.rejected[i]));
    }
    return out;
}

struct Explained {
    std::string text;
    bool by_rule = false;  // named from the rules, not from the search's counts
};

/// "--tp 3: <reason>; <reason>" for fixed parts `s` that leave no candidate (`r`: their search).
Explained explain(const Ctx& x, Parts s, const SearchResult& r) {
    const Fixed sub = only(x.options.fixed, s);
    const std::vector<std::string> why = reasons(x, s);
    if (!why.empty()) {
        return {fixed_flags(sub) + ": " + join(why, "; "), true};
    }
    const std::vector<std::string> seen = counted(x, sub, r);
    if (!seen.empty()) {
        return {fixed_flags(sub) +
                ": every plan with these values is rejected: " + join(seen, "; ")};
    }
    return {fixed_flags(sub) + ": the search builds no plan with these values (docs/planner.md)"};
}

/// Candidates were priced and none was kept: the nearest miss of memory and of the target.
std::vector<std::string> priced(const Ctx& x, const SearchResult& r) {
    const std::string fixed = fixed_flags(x.options.fixed);
    const std::string with = fixed.empty() ? "" : "with " + fixed + ", ";
    const std::string of = "none of the " + std::to_string(r.candidates_evaluated) + " candidates ";
    std::vector<std::string> out;
    const Rejection& mem = r.rejection(RejectReason::memory);
    if (mem.count > 0) {
        out.push_back(with + of + "fits in memory; the nearest, " +
                      describe_rejection(x.model, x.job, x.options, RejectReason::memory, mem));
    }
    const Rejection& tgt = r.rejection(RejectReason::target);
    if (tgt.count > 0) {
        out.push_back(with + of + "reaches the target; the closest, " +
                      describe_rejection(x.model, x.job, x.options, RejectReason::target, tgt));
    }
    return out;
}

/// Nothing was priced: the smallest sets of fixed flags that leave no candidate, each explained.
std::vector<std::string> structural(const Ctx& x, const SearchResult& r) {
    const Parts all = given(x.options.fixed);
    std::vector<std::string> out;
    std::vector<unsigned> parts;
    for (unsigned i = 0; i < part_count; ++i) {
        if ((all & bit(i)) != 0) {
            parts.push_back(i);
        }
    }
    // A flag named by a rule is at fault; one only the search's counts name may fail with every
    // flag, so the job without any is searched too before it is blamed.
    bool blame_job = true;
    for (unsigned i : parts) {
        const SearchResult one = enumerate(x, bit(i));
        if (one.candidates_evaluated == 0) {
            const Explained e = explain(x, bit(i), one);
            out.push_back(e.text);
            blame_job = blame_job && !e.by_rule;
        } else {
            blame_job = false;
        }
    }
    if (blame_job) {
        const SearchResult none = parts.empty() ? r : enumerate(x, 0);
        if (none.candidates_evaluated == 0) {
            const std::vector<std::string> why = counted(x, Fixed{}, none);
            return {"no plan for this job passes the plan rules, whatever is fixed" +
                    (why.empty() ? std::string() : ": " + join(why, "; "))};
        }
    }
    if (!out.empty()) {
        return out;
    }
    for (std::size_t a = 0; a < parts.size(); ++a) {
        for (std::size_t b = a + 1; b < parts.size(); ++b) {
            const Parts two = bit(parts[a]) | bit(parts[b]);
            const SearchResult pair = enumerate(x, two);
            if (pair.candidates_evaluated == 0) {
                out.push_back(explain(x, two, pair).text);
            }
        }
    }
    if (out.empty()) {
        out.push_back(explain(x, all, r).text);
    }
    return out;
}

}  // namespace

std::string why_empty(const ModelSpec& model,
                      const ClusterSpec& cluster,
                      const JobSpec& job,
                      const SearchOptions& options,
                      const SearchResult& result) {
    if (result.feasible > 0 || !result.plans.empty()) {
        return "";
    }
    const bool fixed_size =
        options.objective == Objective::time || options.objective == Objective::memory;
    const Ctx x{model, cluster, job, options, split_weights(model, job), fixed_size};
    const std::vector<std::string> lines =
        result.candidates_evaluated > 0 ? priced(x, result) : structural(x, result);
    return join(lines, "\n");
}

}  // namespace cleave
