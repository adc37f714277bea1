#include "planner/search.hpp"

#include "core/errors.hpp"
#include "costmodel/splits.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <map>
#include <string_view>
#include <type_traits>

namespace cleave {

const char* to_string(RejectReason r) {
    switch (r) {
    case RejectReason::limit:
        return "limit";
    case RejectReason::tp_split:
        return "tp_split";
    case RejectReason::layers:
        return "layers";
    case RejectReason::batch:
        return "batch";
    case RejectReason::seq:
        return "seq";
    case RejectReason::experts:
        return "experts";
    case RejectReason::interleave:
        return "interleave";
    case RejectReason::schedule:
        return "schedule";
    case RejectReason::zero_pipeline:
        return "zero_pipeline";
    case RejectReason::stack:
        return "stack";
    case RejectReason::tp_cross_node:
        return "tp_cross_node";
    case RejectReason::heuristic:
        return "heuristic";
    case RejectReason::memory:
        return "memory";
    case RejectReason::target:
        return "target";
    case RejectReason::count:
        break;
    }
    return "?";
}

const char* to_string(Objective o) {
    switch (o) {
    case Objective::time:
        return "time";
    case Objective::memory:
        return "memory";
    case Objective::gpus:
        return "gpus";
    case Objective::cost:
        return "cost";
    }
    return "?";
}

int64_t SearchResult::rejected_total() const {
    int64_t n = 0;
    for (const Rejection& r : rejected) {
        n += r.count;
    }
    return n;
}

namespace {

void put(std::array<char, 128>& buf, std::size_t& n, std::string_view s) {
    for (char c : s) {
        buf[n++] = c;
    }
}

void put(std::array<char, 128>& buf, std::size_t& n, int64_t v) {
    auto [end, ec] = std::to_chars(buf.data() + n, buf.data() + buf.size(), v);
    CLEAVE_ASSERT(ec == std::errc(), "plan key buffer too small");
    n = static_cast<std::size_t>(end - buf.data());
}

}  // namespace

std::size_t plan_key(const Plan& p, std::array<char, 128>& buf) {
    std::size_t n = 0;
    put(buf, n, "dp");
    put(buf, n, p.dp);
    put(buf, n, " tp");
    put(buf, n, p.tp);
    put(buf, n, " pp");
    put(buf, n, p.pp);
    put(buf, n, " cp");
    put(buf, n, p.cp);
    put(buf, n, " ep");
    put(buf, n, p.ep);
    put(buf, n, " vpp");
    put(buf, n, p.vpp);
    put(buf, n, " mbs");
    put(buf, n, p.mbs);
    put(buf, n, " ");
    put(buf, n, to_string(p.schedule));
    put(buf, n, " ");
    put(buf, n, to_string(p.recompute));
    put(buf, n, p.sp ? " sp1" : " sp0");
    put(buf, n, " zero");
    put(buf, n, static_cast<int64_t>(p.zero));
    if (p.first_layers > 0) {
        put(buf, n, " first");
        put(buf, n, p.first_layers);
    }
    if (p.last_layers > 0) {
        put(buf, n, " last");
        put(buf, n, p.last_layers);
    }
    if (p.recompute_layers > 0) {
        put(buf, n, " rl");
        put(buf, n, p.recompute_layers);
    }
    if (p.recompute_method == RecomputeMethod::block) {
        put(buf, n, " block");
    }
    if (p.recompute_modules != 0) {
        put(buf, n, " rm");
        put(buf, n, static_cast<int64_t>(p.recompute_modules));
    }
    if (p.offload_layers > 0) {
        put(buf, n, " off");
        put(buf, n, p.offload_layers);
    }
    if (p.etp > 0) {
        put(buf, n, " etp");
        put(buf, n, p.etp);
    }
    return n;
}

namespace {

int compare_keys(const Plan& a, const Plan& b) {
    std::array<char, 128> ka{};
    std::array<char, 128> kb{};
    const std::string_view sa(ka.data(), plan_key(a, ka));
    const std::string_view sb(kb.data(), plan_key(b, kb));
    return sa.compare(sb) < 0 ? -1 : (sa == sb ? 0 : 1);
}

int cmp(double a, double b) {
    return a < b ? -1 : (b < a ? 1 : 0);
}

/// -1 when (pa, ea) ranks ahead of (pb, eb) under `o`, 1 when behind, 0 for the same plan.
int dimensions_used(const Plan& p) {
    return (p.tp > 1 ? 1 : 0) + (p.pp > 1 ? 1 : 0) + (p.cp > 1 ? 1 : 0) + (p.ep > 1 ? 1 : 0);
}

int compare(const Plan& pa, const Estimate& ea, const Plan& pb, const Estimate& eb, Objective o) {
    int c = 0;
    if (o == Objective::memory) {
        c = cmp(ea.memory.total.value(), eb.memory.total.value());
    } else if (o == Objective::gpus) {
        c = cmp(static_cast<double>(plan_gpus(pa)), static_cast<double>(plan_gpus(pb)));
    } else if (o == Objective::cost) {
        // GPU-seconds per iteration: the global batch is fixed, so this orders GPU-hours per token.
        c = cmp(static_cast<double>(plan_gpus(pa)) * ea.iteration_time.value(),
                static_cast<double>(plan_gpus(pb)) * eb.iteration_time.value());
    }
    if (c == 0) {
        c = cmp(ea.iteration_time.value(), eb.iteration_time.value());
    }
    if (c == 0) {
        // Equal time: the simpler plan first (fewer parallel dimensions in use), as a Megatron
        // user would launch dp32 rather than dp16 cp2 when both cost the same.
        c = cmp(static_cast<double>(dimensions_used(pa)), static_cast<double>(dimensions_used(pb)));
    }
    return c != 0 ? c : compare_keys(pa, pb);
}

bool divides(int64_t a, int64_t b) {
    return a > 0 && b % a == 0;
}

std::vector<int64_t> divisors(int64_t n) {
    std::vector<int64_t> out;
    for (int64_t d = 1; d * d <= n; ++d) {
        if (n % d == 0) {
            out.push_back(d);
        }
    }
    const std::size_t half = out.size();
    for (std::size_t i = half; i-- > 0;) {
        const int64_t q = n / out[i];
        if (q != out[i]) {
            out.push_back(q);
        }
    }
    return out;
}

bool over(int64_t v, int64_t limit) {
    return limit > 0 && v > limit;
}

/// A TP group of `tp` consecutive ranks stays inside a node when it tiles the node.
bool tp_crosses_node(int64_t tp, int64_t gpus_per_node) {
    return gpus_per_node > 0 && (tp > gpus_per_node || gpus_per_node % tp != 0);
}

constexpr int64_t heuristic_min_cp_seq = 8192;

/// Keeps the top k, counts feasible plans and priced rejections.
class TopSink {
public:
    TopSink(const SearchOptions& o, SearchResult& r)
        : o_(o)
        , r_(r) {
        r_.plans.reserve(static_cast<std::size_t>(o.top_k));
    }

    void feasible(const Plan& p, const Estimate& e) {
        ++r_.feasible;
        auto& h = r_.plans;
        const auto worse = [this](const RankedPlan& a, const RankedPlan& b) {
            return compare(a.plan, a.estimate, b.plan, b.estimate, o_.objective) < 0;
        };
        if (h.size() < static_cast<std::size_t>(o_.top_k)) {
            h.push_back({p, e});
            std::push_heap(h.begin(), h.end(), worse);
            return;
        }
        const RankedPlan& last = h.front();  // the worst kept
        if (compare(p, e, last.plan, last.estimate, o_.objective) >= 0) {
            return;
        }
        std::pop_heap(h.begin(), h.end(), worse);
        h.back() = {p, e};
        std::push_heap(h.begin(), h.end(), worse);
    }

    void finish() {
        std::sort_heap(r_.plans.begin(), r_.plans.end(), [this](const auto& a, const auto& b) {
            return compare(a.plan, a.estimate, b.plan, b.estimate, o_.objective) < 0;
        });
    }

    [[nodiscard]] bool full() const {
        return r_.plans.size() >= static_cast<std::size_t>(o_.top_k);
    }

private:
    const SearchOptions& o_;
    SearchResult& r_;
};

/// Counts feasible plans that rank ahead of a reference plan (rank_of).
class CountSink {
public:
    CountSink(const Plan& p, const Estimate& e, Objective o)
        : p_(p)
        , e_(e)
        , o_(o) {}

    void feasible(const Plan& p, const Estimate& e) {
        if (compare(p, e, p_, e_, o_) < 0) {
            ++ahead;
        }
    }

    int64_t ahead = 0;

private:
    const Plan& p_;
    const Estimate& e_;
    Objective o_;
};

template <class Sink, class Price>
class Enumerator {
public:
    Enumerator(const ModelSpec& m,
               const ClusterSpec& c,
               const JobSpec& job,
               const SearchOptions& o,
               Price& price,
               SearchResult& r,
               Sink& sink)
        : m_(m)
        , c_(c)
        , job_(job)
        , o_(o)
        , price_(price)
        , r_(r)
        , sink_(sink)
        , gpu_divs_(divisors(job.gpus))
        , gbs_divs_(divisors(job.global_batch))
        , weights_(split_weights(m, job))
        , extra_modules_(searched_modules(m, job)) {}

    /// The one module list `selective` is also searched with beside Megatron's default
    /// (core_attn): the output-discarding modules where the model has them (mla_up_proj for MLA,
    /// moe_act for MoE: cheap to redo, they free the largest activations per byte re-run), else
    /// the dense MLP (mlp); with materialised attention core_attn stays in the list (it drops
    /// the scores). Priced in memory and time like any list (costmodel/memory.hpp, compute.cpp).
    static uint16_t searched_modules(const ModelSpec& m, const JobSpec& job) {
        namespace rm = recompute_module;
        uint16_t mods = 0;
        if (m.mla.enabled()) {
            mods |= rm::mla_up_proj;
        }
        if (m.moe.enabled()) {
            mods |= rm::moe_act;
        }
        if (mods == 0) {
            mods = rm::mlp;
        }
        if (job.stack.attention == AttentionImpl::materialized) {
            mods |= rm::core_attn;
        }
        return mods;
    }

    void run() {
        const SearchOptions::Fixed& f = o_.fixed;
        for (int64_t tp : gpu_divs_) {
            for (int64_t pp : gpu_divs_) {
                if (!divides(tp * pp, job_.gpus) || unfixed(f.tp, tp) || unfixed(f.pp, pp)) {
                    continue;
                }
                for (int64_t cp : gpu_divs_) {
                    if (divides(tp * pp * cp, job_.gpus) && !unfixed(f.cp, cp) &&
                        !unfixed(f.dp, job_.gpus / (tp * pp * cp))) {
                        factorization(tp, pp, cp);
                    }
                }
            }
        }
    }

private:
    void reject(RejectReason why, const Plan& p, int64_t n = 1) {
        Rejection& rj = r_.rejected[static_cast<std::size_t>(why)];
        rj.count += n;
        if (!rj.has_example) {
            rj.has_example = true;
            rj.example = p;
            rj.gpus = job_.gpus;
        }
    }

    /// Keeps the plan closest to the target: the highest tokens/s, then the plan key.
    void reject_target(const Plan& p, const Estimate& e) {
        Rejection& rj = r_.rejected[static_cast<std::size_t>(RejectReason::target)];
        ++rj.count;
        bool better = !rj.has_example;
        if (!better) {
            const int c = cmp(rj.estimate.tokens_per_s, e.tokens_per_s);
            better = c < 0 || (c == 0 && compare_keys(p, rj.example) < 0);
        }
        if (better) {
            rj.has_example = true;
            rj.priced = true;
            rj.example = p;
            rj.estimate = e;
            rj.gpus = job_.gpus;
        }
    }

    /// A value the user fixed that `v` is not.
    static bool unfixed(int64_t fixed, int64_t v) { return fixed > 0 && fixed != v; }

    [[nodiscard]] bool keeps_all(std::initializer_list<Rule> rules, const Plan& p) const {
        for (Rule r : rules) {
            if (!keeps(r, m_, job_, p)) {
                return false;
            }
        }
        return true;
    }

    /// The layer maps to price for (pp, vpp): the user's, or a few balanced ones (cached per
    /// (pp, vpp): they depend on nothing else).
    const std::vector<Split>& splits(int64_t pp, int64_t vpp) {
        const auto key = std::make_pair(pp, vpp);
        auto it = splits_.find(key);
        if (it != splits_.end()) {
            return it->second;
        }
        std::vector<Split> s;
        if (o_.fixed.layers) {
            Plan p;
            p.pp = pp;
            p.vpp = vpp;
            p.schedule = vpp > 1 ? Schedule::interleaved : Schedule::one_f_one_b;
            p.first_layers = o_.fixed.first_layers;
            p.last_layers = o_.fixed.last_layers;
            if (keeps_all({Rule::stage_split, Rule::stage_layers, Rule::vpp_chunks}, p)) {
                s.push_back({p.first_layers, p.last_layers});
            }
        } else {
            s = balanced_splits(m_, job_, pp, vpp, weights_);
            if (s.empty() && (o_.fixed.pp == pp || (vpp > 1 && o_.fixed.vpp == vpp))) {
                // The user fixed this pipeline (a published layout, say) and no map is within a
                // layer of balance: price the even map when the rules allow it, rather than
                // searching nothing.
                Plan p;
                p.pp = pp;
                p.vpp = vpp;
                p.schedule = vpp > 1 ? Schedule::interleaved : Schedule::one_f_one_b;
                if (keeps_all({Rule::stage_split, Rule::stage_layers, Rule::vpp_chunks}, p)) {
                    s.push_back({0, 0});
                }
            }
        }
        return splits_.emplace(key, std::move(s)).first->second;
    }

    /// First failing hard constraint of a (tp, pp, cp) split, read from the rule table.
    [[nodiscard]] RejectReason split_problem(const Plan& p) {
        if (over(p.tp, o_.max_tp) || over(p.pp, o_.max_pp) || over(p.cp, o_.max_cp)) {
            return RejectReason::limit;
        }
        if (!keeps_all({Rule::tp_heads, Rule::tp_kv_heads, Rule::tp_ffn, Rule::tp_mamba, Rule::tp_gdn}, p)) {
            return RejectReason::tp_split;
        }
        if (!keeps(Rule::model_code, m_, job_, p)) {
            return RejectReason::stack;
        }
        if (splits(p.pp, 1).empty()) {
            return RejectReason::layers;
        }
        if (!keeps(Rule::batch, m_, job_, p)) {  // mbs 1: dp divides the global batch
            return RejectReason::batch;
        }
        if (!keeps(Rule::cp_seq, m_, job_, p)) {
            return RejectReason::seq;
        }
        const bool crosses = tp_crosses_node(p.tp, nvlink_domain(c_.node));
        if (crosses && !o_.allow_tp_cross_node) {
            return RejectReason::tp_cross_node;
        }
        if (o_.heuristics && (crosses || (p.cp > 1 && job_.seq_len < heuristic_min_cp_seq))) {
            return RejectReason::heuristic;
        }
        return RejectReason::count;
    }

    void factorization(int64_t tp, int64_t pp, int64_t cp) {
        Plan p;
        p.tp = tp;
        p.pp = pp;
        p.cp = cp;
        p.dp = job_.gpus / (tp * pp * cp);
        const RejectReason why = split_problem(p);
        if (why != RejectReason::count) {
            reject(why, p);
            return;
        }
        if (!m_.moe.enabled()) {
            if (o_.fixed.ep > 1 || o_.fixed.etp > 1) {
                return;  // a dense model has no experts to split (Rule::ep_moe): not ignored
            }
            micro_batches(p);
            return;
        }
        // Expert TP: the dense tp (etp unset, Megatron-Core's default) or 1 (Megatron-Bridge's
        // MoE recipes, parallel folding); a fixed --etp is the only candidate.
        const int64_t etps[2] = {o_.fixed.etp > 0 ? o_.fixed.etp : 0,
                                 o_.fixed.etp > 0 || tp == 1 ? -1 : 1};
        for (int64_t ep : gpu_divs_) {
            p.ep = ep;
            if (unfixed(o_.fixed.ep, ep)) {
                continue;
            }
            for (const int64_t etp : etps) {
                p.etp = etp;
                if (etp < 0 || !keeps(Rule::ep_dp, m_, job_, p)) {
                    continue;
                }
                if (over(ep, o_.max_ep)) {
                    reject(RejectReason::limit, p);
                } else if (!keeps(Rule::model_code, m_, job_, p)) {
                    reject(RejectReason::stack, p);
                } else if (!keeps(Rule::ep_experts, m_, job_, p)) {
                    reject(RejectReason::experts, p);
                } else {
                    micro_batches(p);
                }
            }
        }
    }

    void micro_batches(Plan p) {
        const int64_t per_dp = job_.global_batch / p.dp;
        for (int64_t mbs : gbs_divs_) {
            // A packed micro-batch is one pack (Megatron-Bridge offline packing, costmodel/
            // packing.hpp): mbs 1 only.
            if (mbs > per_dp || (job_.packed_mean_len > 0.0 && mbs > 1)) {
                break;
            }
            if (per_dp % mbs == 0 && !unfixed(o_.fixed.mbs, mbs)) {
                p.mbs = mbs;
                schedules(p, per_dp / mbs);
            }
        }
    }

    [[nodiscard]] bool schedule_free(Schedule s, int64_t vpp) const {
        const SearchOptions::Fixed& f = o_.fixed;
        return (!f.schedule || *f.schedule == s) && !unfixed(f.vpp, vpp);
    }

    /// Every split of (pp, vpp) through knobs().
    void layer_maps(Plan p, const std::vector<Split>& maps) {
        for (const Split& s : maps) {
            p.first_layers = s.first;
            p.last_layers = s.last;
            knobs(p);
        }
    }

    struct Pipeline {
        const std::vector<Split>* flat = nullptr;                                // vpp 1
        std::vector<std::pair<int64_t, const std::vector<Split>*>> interleaved;  // vpp >= 2
    };

    /// The layer maps of every vpp of `pp`, worked out once per pp (one lookup per call).
    const Pipeline& pipeline(int64_t pp) {
        auto it = pipelines_.find(pp);
        if (it != pipelines_.end()) {
            return it->second;
        }
        Pipeline pl;
        pl.flat = &splits(pp, 1);
        for (int64_t v = 2; pp > 1 && v * pp <= m_.layers + 2; ++v) {
            const std::vector<Split>& s = splits(pp, v);
            if (!s.empty()) {
                pl.interleaved.emplace_back(v, &s);
            }
        }
        return pipelines_.emplace(pp, std::move(pl)).first->second;
    }

    void schedules(Plan p, int64_t /*microbatches*/) {
        const Pipeline& pl = pipeline(p.pp);
        p.vpp = 1;
        p.schedule = Schedule::one_f_one_b;
        if (schedule_free(p.schedule, 1) || (p.pp == 1 && schedule_free(Schedule::gpipe, 1))) {
            layer_maps(p, *pl.flat);
        }
        if (p.pp == 1) {
            return;  // a single stage has no schedule: 1f1b stands for all of them
        }
        p.schedule = Schedule::gpipe;
        if (schedule_free(p.schedule, 1)) {
            if (o_.heuristics) {
                reject(RejectReason::heuristic, p);
            } else {
                layer_maps(p, *pl.flat);
            }
        }
        p.schedule = Schedule::interleaved;
        for (const auto& [v, maps] : pl.interleaved) {
            p.vpp = v;
            if (!schedule_free(p.schedule, v)) {
                continue;
            }
            p.first_layers = maps->front().first;
            p.last_layers = maps->front().last;
            if (!keeps(Rule::interleave_microbatches, m_, job_, p)) {
                reject(RejectReason::interleave, p);
            } else {
                layer_maps(p, *maps);
            }
        }
        // DualPipe and DualPipeV only when asked for: no framework cleave exports to runs
        // DualPipe, and DualPipeV's pricing (one closed form, no event playback) is newer than
        // the rest, so the search does not recommend either on its own.
        if (o_.fixed.schedule && bidirectional(*o_.fixed.schedule) &&
            schedule_free(*o_.fixed.schedule, 1)) {
            p.vpp = 1;
            p.schedule = *o_.fixed.schedule;
            p.first_layers = 0;
            p.last_layers = 0;
            if (!keeps(Rule::dualpipe_shape, m_, job_, p)) {
                reject(RejectReason::schedule, p);
            } else if (p.schedule == Schedule::dualpipev) {
                knobs(p);  // its 2 pp stages equal (Rule::dualpipe_shape)
            } else {
                layer_maps(p, *pl.flat);
            }
        }
    }

    void knobs(Plan p) {
        // ZeRO shards over the data-parallel ranks; with none, stages 1..3 equal stage 0.
        const bool shardable = p.dp * p.cp > 1;
        Plan q = p;
        q.zero = 2;
        q.sp = true;
        // Muon: ZeRO 0 or 1 only (Rule::muon_sharding), as the pipeline rule caps others.
        const int zero_max = !shardable ? 0
                             : (keeps(Rule::zero_pipeline, m_, job_, q) &&
                                keeps(Rule::muon_sharding, m_, job_, q))
                                 ? 3
                                 : 1;
        const bool sp_ok = keeps_all({Rule::sp_tp, Rule::sp_seq}, q);
        const SearchOptions::Fixed& f = o_.fixed;
        // (recompute, module list): none, selective with the default list (or the user's),
        // selective with the searched list, full.
        struct Variant {
            Recompute rc;
            uint16_t mods;
        };
        Variant variants[4] = {{Recompute::none, 0},
                               {Recompute::selective, f.recompute_modules},
                               {Recompute::selective, extra_modules_},
                               {Recompute::full, 0}};
        for (const Variant& var : variants) {
            const Recompute rc = var.rc;
            if (&var == &variants[2] && (f.recompute_modules != 0 || extra_modules_ == 0)) {
                continue;  // the user fixed a list: only that one
            }
            p.recompute = rc;
            if (f.recompute && *f.recompute != rc) {
                continue;
            }
            const bool full = rc == Recompute::full;
            p.recompute_layers = full ? f.recompute_layers : 0;
            p.recompute_method = full ? f.recompute_method : RecomputeMethod::uniform;
            p.recompute_modules = var.mods;
            p.offload_layers = f.offload_layers;
            if (full && !keeps(Rule::recompute_layers, m_, job_, p)) {
                continue;  // the user's block does not fit this stage
            }
            if (!keeps(Rule::model_code, m_, job_, p)) {
                p.zero = 0;
                reject(RejectReason::stack, p, zero_max + 1);  // HF: no selective recompute
                continue;
            }
            for (int sp = 0; sp <= (p.tp > 1 ? 1 : 0); ++sp) {
                p.sp = sp == 1;
                if (f.sp && *f.sp != p.sp) {
                    continue;
                }
                if (p.sp && !sp_ok) {
                    p.zero = 0;
                    reject(RejectReason::seq, p, zero_max + 1);
                    continue;
                }
                for (int z = 0; z <= zero_max; ++z) {
                    p.zero = z;
                    if (f.zero < 0 || f.zero == z) {
                        evaluate(p);
                    }
                }
                if (shardable && p.pp > 1 && (f.zero < 0 || f.zero >= 2)) {
                    p.zero = 2;
                    reject(RejectReason::zero_pipeline, p, 2);
                }
            }
        }
    }

    void evaluate(const Plan& p) {
        ++r_.candidates_evaluated;
        MemoryCheck mc;
        const Rejection& miss = r_.rejected[static_cast<std::size_t>(RejectReason::memory)];
        const Bytes nearest = miss.has_example ? miss.estimate.memory.total
                                               : bytes(std::numeric_limits<double>::infinity());
        if (!price_.if_fits(p, mc, nearest, priced_)) {
            reject_memory(p, mc);
        } else if (o_.objective == Objective::gpus &&
                   priced_.tokens_per_s < o_.target_tokens_per_s) {
            reject_target(p, priced_);
        } else {
            sink_.feasible(p, priced_);
        }
    }

    /// Keeps the nearest miss: the least peak memory, then the objective's order; priced in full
    /// only when it may become the example.
    void reject_memory(const Plan& p, const MemoryCheck& mc) {
        Rejection& rj = r_.rejected[static_cast<std::size_t>(RejectReason::memory)];
        ++rj.count;
        if (mc.fits_without_headroom) {
            ++r_.set_aside_for_headroom;
        }
        if (!mc.complete || (rj.has_example && mc.peak > rj.estimate.memory.total)) {
            return;
        }
        const Estimate e = price_(p);
        if (rj.has_example && mc.peak == rj.estimate.memory.total &&
            compare(p, e, rj.example, rj.estimate, o_.objective) >= 0) {
            return;
        }
        rj.has_example = true;
        rj.priced = true;
        rj.example = p;
        rj.estimate = e;
        rj.gpus = job_.gpus;
    }

    const ModelSpec& m_;
    const ClusterSpec& c_;
    const JobSpec& job_;
    const SearchOptions& o_;
    Price& price_;
    SearchResult& r_;
    Sink& sink_;
    std::vector<int64_t> gpu_divs_;  // ascending
    std::vector<int64_t> gbs_divs_;  // ascending
    SplitWeights weights_;
    uint16_t extra_modules_ = 0;  // searched_modules()
    std::map<std::pair<int64_t, int64_t>, std::vector<Split>> splits_;  // node-stable
    std::map<int64_t, Pipeline> pipelines_;
    Estimate priced_;  // the plan evaluate() prices, reused: an Estimate is ~1 KB to zero or copy
};

void check_options(const JobSpec& job, const SearchOptions& o) {
    if (o.top_k < 1) {
        throw ConfigError("--top: must be at least 1 (got " + std::to_string(o.top_k) + ")");
    }
    if (o.objective == Objective::gpus && !(o.target_tokens_per_s > 0.0)) {
        throw ConfigError("--objective gpus needs --target-tokens-per-s > 0");
    }
    if (job.gpus < 1 || job.global_batch < 1 || job.seq_len < 1) {
        throw ConfigError("the job needs gpus, global batch and sequence length of at least 1");
    }
}

/// Job sizes tried for Objective::gpus: 1..gpus_per_node, then whole nodes, up to job.gpus.
std::vector<int64_t> gpu_counts(const ClusterSpec& c, const JobSpec& job) {
    const int64_t gpn = std::max<int64_t>(c.node.gpus_per_node, 1);
    std::vector<int64_t> out;
    for (int64_t n = 1; n <= job.gpus && n <= gpn; ++n) {
        out.push_back(n);
    }
    for (int64_t n = 2 * gpn; n <= job.gpus; n += gpn) {
        out.push_back(n);
    }
    if (out.back() != job.gpus) {
        out.push_back(job.gpus);
    }
    return out;
}

}  // namespace

bool ranks_before(const RankedPlan& a, const RankedPlan& b, Objective objective) {
    return compare(a.plan, a.estimate, b.plan, b.estimate, objective) < 0;
}

namespace {

/// PriceFn adapter with the Estimator's call signature.
struct FnPrice {
    const ModelSpec& m;
    const ClusterSpec& c;
    const JobSpec& job;
    PriceFn fn;

    Estimate operator()(const Plan& p) const { return fn(m, c, job, p); }

    bool if_fits(const Plan& p, MemoryCheck& mc, Bytes /*stop_above*/, Estimate& out) const {
        const Estimate e = fn(m, c, job, p);
        mc = {e.memory.total,
              e.peak_memory_stage,
              e.memory_usable,
              e.fits,
              e.memory.total <= e.memory_usable,
              true};
        if (e.fits) {
            out = e;
        }
        return e.fits;
    }
};

struct UseEstimator {};

template <class How>
SearchResult run_search(const ModelSpec& model,
                        const ClusterSpec& cluster,
                        const JobSpec& job,
                        const SearchOptions& options,
                        PriceFn price,
                        const SearchProgress* progress = nullptr) {
    check_options(job, options);
    SearchResult r;
    TopSink sink(options, r);
    const bool sizes_vary =
        options.objective == Objective::gpus || options.objective == Objective::cost;
    const std::vector<int64_t> sizes =
        sizes_vary ? gpu_counts(cluster, job) : std::vector<int64_t>{job.gpus};
    for (int64_t n : sizes) {
        JobSpec j = job;
        j.gpus = n;
        if constexpr (std::is_same_v<How, UseEstimator>) {
            Estimator est(model, cluster, j);
            Enumerator<TopSink, Estimator>(model, cluster, j, options, est, r, sink).run();
        } else {
            FnPrice fp{model, cluster, j, price};
            Enumerator<TopSink, FnPrice>(model, cluster, j, options, fp, r, sink).run();
        }
        r.gpu_counts_searched.push_back(n);
        if (progress != nullptr && *progress) {
            (*progress)(static_cast<int64_t>(r.gpu_counts_searched.size()),
                        static_cast<int64_t>(sizes.size()));
        }
        if (options.objective == Objective::gpus && sink.full()) {
            break;  // later sizes use more GPUs, so none can enter a full list
        }
    }
    sink.finish();
    Plan base;
    base.dp = job.gpus;
    if (check_plan(model, job, base).empty()) {
        r.has_baseline = true;
        r.baseline = {base, price(model, cluster, job, base)};
    }
    return r;
}

}  // namespace

SearchResult search_with(const ModelSpec& model,
                         const ClusterSpec& cluster,
                         const JobSpec& job,
                         const SearchOptions& options,
                         PriceFn price) {
    return run_search<FnPrice>(model, cluster, job, options, price);
}

SearchResult search(const ModelSpec& model,
                    const ClusterSpec& cluster,
                    const JobSpec& job,
                    const SearchOptions& options) {
    return run_search<UseEstimator>(model, cluster, job, options, &estimate);
}

SearchResult search(const ModelSpec& model,
                    const ClusterSpec& cluster,
                    const JobSpec& job,
                    const SearchOptions& options,
                    const SearchProgress& progress) {
    return run_search<UseEstimator>(model, cluster, job, options, &estimate, &progress);
}

int64_t rank_of(const ModelSpec& model,
                const ClusterSpec& cluster,
                const JobSpec& job,
                const SearchOptions& options,
                const Plan& plan) {
    check_options(job, options);
    if (!check_plan(model, job, plan).empty()) {
        return 0;
    }
    const Estimate e = estimate(model, cluster, job, plan);
    if (!e.fits) {
        return 0;
    }
    SearchResult r;
    CountSink sink(plan, e, options.objective);
    Estimator est(model, cluster, job);
    Enumerator<CountSink, Estimator>(model, cluster, job, options, est, r, sink).run();
    return sink.ahead + 1;
}

std::string fixed_flags(const SearchOptions::Fixed& f) {
    std::string s;
    const auto add = [&s](const char* flag, const std::string& v) {
        s += (s.empty() ? "" : " ") + std::string(flag) + (v.empty() ? "" : " " + v);
    };
    const std::pair<const char*, int64_t> sizes[] = {{"--tp", f.tp},
                                                     {"--pp", f.pp},
                                                     {"--dp", f.dp},
                                                     {"--cp", f.cp},
                                                     {"--ep", f.ep},
                                                     {"--etp", f.etp},
                                                     {"--mbs", f.mbs},
                                                     {"--vpp", f.vpp}};
    for (const auto& [flag, v] : sizes) {
        if (v > 0) {
            add(flag, std::to_string(v));
        }
    }
    if (f.schedule) {
        add("--schedule", to_string(*f.schedule));
    }
    if (f.recompute) {
        add("--recompute", to_string(*f.recompute));
    }
    if (f.sp) {
        add(*f.sp ? "--sp" : "--no-sp", "");
    }
    if (f.zero >= 0) {
        add("--zero", std::to_string(f.zero));
    }
    if (f.recompute_layers > 0) {
        add("--recompute-num-layers", std::to_string(f.recompute_layers));
    }
    if (f.recompute_method == RecomputeMethod::block) {
        add("--recompute-method", "block");
    }
    if (f.recompute_modules != 0) {
        std::string mods = recompute_modules_string(f.recompute_modules);
        std::replace(mods.begin(), mods.end(), ' ', ',');
        add("--recompute-modules", mods);
    }
    if (f.offload_layers > 0) {
        add("--cpu-offloading-num-layers", std::to_string(f.offload_layers));
    }
    if (f.layers) {
        add("--first-stage-layers", std::to_string(f.first_layers));
        add("--last-stage-layers", std::to_string(f.last_layers));
    }
    return s;
}

std::string plan_label(const Plan& p) {
    const std::string key = to_string(p);
    if (p.tp == 1 && p.pp == 1 && p.cp == 1 && p.ep == 1) {
        return (p.zero == 0 ? std::string("pure DP") : "pure DP + ZeRO-" + std::to_string(p.zero)) +
               " (" + key + ")";
    }
    return key;
}

namespace {

std::string fmt(const char* f, double v) {
    std::array<char, 64> b{};
    std::snprintf(b.data(), b.size(), f, v);
    return b.data();
}

std::string heuristic_why(const ModelSpec& /*model*/, const JobSpec& job, const Plan& p) {
    if (p.schedule == Schedule::gpipe) {
        return "GPipe skipped (1F1B has the same bubble and holds fewer micro-batches)";
    }
    if (p.cp > 1 && job.seq_len < heuristic_min_cp_seq) {
        return "context parallelism skipped for seq=" + std::to_string(job.seq_len) + " < " +
               std::to_string(heuristic_min_cp_seq);
    }
    return "tp=" + std::to_string(p.tp) + " would leave the node";
}

std::string structural_why(const ModelSpec& model,
                           const JobSpec& job,
                           const SearchOptions& o,
                           RejectReason reason,
                           const Rejection& r) {
    const Plan& p = r.example;
    if (reason == RejectReason::limit) {
        std::string s;
        const auto lim = [&s](const char* n, int64_t v, int64_t l) {
            if (over(v, l)) {
                s += (s.empty() ? "" : "; ") + std::string(n) + "=" + std::to_string(v) +
                     " is above --max-" + n + " " + std::to_string(l);
            }
        };
        lim("tp", p.tp, o.max_tp);
        lim("pp", p.pp, o.max_pp);
        lim("cp", p.cp, o.max_cp);
        lim("ep", p.ep, o.max_ep);
        return s;
    }
    if (reason == RejectReason::tp_cross_node) {
        return "tp=" + std::to_string(p.tp) +
               " leaves the node (TP across nodes is off; --allow-tp-cross-node prices it)";
    }
    if (reason == RejectReason::heuristic) {
        return heuristic_why(model, job, p);
    }
    if (reason == RejectReason::layers) {
        return "no split of layers=" + std::to_string(model.layers) +
               " over pp=" + std::to_string(p.pp) +
               " stages (first, equal middle, last) keeps the slowest stage within one layer of "
               "the balanced share";
    }
    JobSpec j = job;
    j.gpus = r.gpus;
    std::string s;
    for (const std::string& m : check_plan(model, j, p)) {
        s += (s.empty() ? "" : "; ") + m;
    }
    return s;
}

}  // namespace

std::string describe_rejection(const ModelSpec& model,
                               const JobSpec& job,
                               const SearchOptions& options,
                               RejectReason reason,
                               const Rejection& r) {
    if (r.count == 0 || !r.has_example) {
        return "";
    }
    const std::string label = plan_label(r.example);
    if (reason == RejectReason::memory && r.priced) {
        const double headroom = to_gib(r.estimate.memory_headroom);
        return label + ": needs " + fmt("%.1f", to_gib(r.estimate.memory.total)) + " GiB per GPU" +
               (headroom > 0.0 ? " + " + fmt("%.1f", headroom) + " GiB headroom" : "") + ", has " +
               fmt("%.1f", to_gib(r.estimate.memory_usable));
    }
    if (reason == RejectReason::target && r.priced) {
        return label + " on " + std::to_string(r.gpus) + " GPUs: reaches " +
               fmt("%.0f", r.estimate.tokens_per_s) + " tokens/s, target " +
               fmt("%.0f", options.target_tokens_per_s);
    }
    return label + ": " + structural_why(model, job, options, reason, r);
}

}  // namespace cleave
