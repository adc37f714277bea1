#include "published/fidelity.hpp"

#include "core/calibration.hpp"
#include "core/load.hpp"
#include "core/stack.hpp"
#include "core/plan.hpp"

#include <algorithm>
#include <filesystem>
#include <optional>

namespace cleave {

namespace {

/// The row's stack loaded into its job (the stack's grad dtype unless the row fixed 16-bit
/// grads), and whether its profile ships; a row whose profile or stack is missing is listed as
/// not expressed with the reason.
/// Marks a row whose profile does not ship as not expressed, with the reason (public runs and
/// measured-memory rows alike); true when it ships.
template <class Case>
bool profile_ships(Case& c, const std::vector<std::string>& profiles) {
    if (std::find(profiles.begin(), profiles.end(), c.profile) != profiles.end()) {
        return true;
    }
    c.expressible = false;
    c.reason = "no shipped profile '" + c.profile + "' (cleave hw list)";
    return false;
}

/// The profile loaded once per command.
const ClusterSpec& cluster_of(std::map<std::string, ClusterSpec>& clusters, const std::string& name) {
    auto it = clusters.find(name);
    if (it == clusters.end()) {
        it = clusters.emplace(name, load_cluster(name)).first;
    }
    return it->second;
}

void prepare(PublishedCase& c, const std::vector<std::string>& profiles) {
    if (c.expressible && profile_ships(c, profiles)) {
        load_case_stack(c);
    }
}

/// True when `csv` is the file the overlay names (compared by file name).
bool fitted_on(const Calibration& cal, const std::string& csv) {
    for (const auto& f : cal.fitted_on_all) {
        if (std::filesystem::path(csv).filename() == std::filesystem::path(f).filename()) {
            return true;
        }
    }
    return false;
}

std::vector<std::pair<int64_t, double>> errors_with(const std::vector<const Evaluated*>& rows,
                                                    const std::map<std::string, ClusterSpec>& raw,
                                                    double factor,
                                                    double hbm) {
    std::map<std::string, ClusterSpec> fit;
    Calibration cal;
    cal.gemm_efficiency_factor = factor;
    cal.efficiencies = {{"hbm_efficiency", hbm}};
    for (const auto& [name, c] : raw) {
        fit[name] = c;
        apply_calibration(cal, fit[name]);
    }
    std::vector<std::pair<int64_t, double>> out;
    for (const Evaluated* ev : rows) {
        const auto it = fit.find(ev->c.profile);
        if (it == fit.end()) {
            continue;
        }
        Evaluated e = *ev;
        e.r = evaluate_published(e.c, it->second);
        add_errors(e, out);
    }
    return out;
}

/// The overlay of each profile, read once per command (find_calibration reads its file).
class Overlays {
public:
    const std::optional<Calibration>& of(const std::string& profile) {
        auto it = cals_.find(profile);
        if (it == cals_.end()) {
            it = cals_.emplace(profile, find_calibration(profile)).first;
        }
        return it->second;
    }

private:
    std::map<std::string, std::optional<Calibration>> cals_;
};

/// True for the overlays this refit can redo: a GEMM-curve factor with an hbm_efficiency (the A100
/// overlays); the Blackwell factors and the MoE expert overheads were fitted on one source alone.
bool refittable(const std::optional<Calibration>& cal) {
    if (!cal) {
        return false;
    }
    for (const auto& [key, value] : cal->efficiencies) {
        if (key == "hbm_efficiency") {
            return true;
        }
    }
    return false;
}

}  // namespace

std::vector<Evaluated> evaluate_all(std::vector<PublishedCase> cases, const std::string& csv) {
    std::map<std::string, ClusterSpec> clusters;
    const std::vector<std::string> profiles = shipped_profiles();
    std::vector<Evaluated> out;
    for (auto& c : cases) {
        prepare(c, profiles);
        Evaluated ev{c, {}, c.metric == PublishedMetric::layer_time, false};
        if (c.expressible) {
            const ClusterSpec& cluster = cluster_of(clusters, c.profile);
            const auto cal = find_calibration(c.profile);
            ev.fitted = cal && fitted_on(*cal, csv) && cal->fitted(c.row_id);
            ev.r = evaluate_published(ev.c, cluster);
        }
        out.push_back(std::move(ev));
    }
    return out;
}

std::vector<std::pair<int64_t, double>> errors_of(const std::vector<Evaluated>& evs,
                                                  bool calibration) {
    std::vector<std::pair<int64_t, double>> out;
    for (const auto& ev : evs) {
        if (!ev.c.expressible || !ev.c.in_mape || ev.calibration != calibration) {
            continue;
        }
        if (calibration) {
            out.emplace_back(ev.c.row_id, ev.r.error_fwd_pct);
            out.emplace_back(ev.c.row_id, ev.r.error_bwd_pct);
        } else {
            out.emplace_back(ev.c.row_id, ev.r.error_pct);
        }
    }
    return out;
}

// Every error a row contributes: its iteration error, or a layer row's forward and backward.
void add_errors(const Evaluated& ev, std::vector<std::pair<int64_t, double>>& out) {
    if (ev.calibration) {
        out.emplace_back(ev.c.row_id, ev.r.error_fwd_pct);
        out.emplace_back(ev.c.row_id, ev.r.error_bwd_pct);
    } else {
        out.emplace_back(ev.c.row_id, ev.r.error_pct);
    }
}

std::map<std::string, SourceSplit> by_source(const std::vector<Evaluated>& evs) {
    std::map<std::string, SourceSplit> out;
    for (const auto& ev : evs) {
        if (ev.c.expressible && ev.c.in_mape) {
            SourceSplit& s = out[ev.c.source_key];
            add_errors(ev, ev.fitted ? s.fitted : s.unfitted);
        }
    }
    return out;
}

/// Leave-one-source-out: refit the overlay's two numbers (GEMM-curve factor, hbm_efficiency) by
/// the same grid search over the fitted rows of every other source, and predict the held-out
/// source's rows with that fit. `raw` holds the overlaid profiles without their overlay.

std::map<std::string, Refit> leave_one_source_out(const std::vector<Evaluated>& evs) {
    std::map<std::string, ClusterSpec> raw;
    std::vector<const Evaluated*> fitted;
    Overlays overlays;
    for (const auto& ev : evs) {
        if (ev.fitted && ev.c.in_mape && refittable(overlays.of(ev.c.profile))) {
            fitted.push_back(&ev);
            if (raw.count(ev.c.profile) == 0) {
                raw[ev.c.profile] = load_cluster_uncalibrated(ev.c.profile);
            }
        }
    }
    std::map<std::string, Refit> out;
    for (const Evaluated* held : fitted) {
        const std::string& src = held->c.source_key;
        if (out.count(src) > 0) {
            continue;
        }
        std::vector<const Evaluated*> train;
        std::vector<const Evaluated*> test;
        for (const Evaluated* ev : fitted) {
            (ev->c.source_key == src ? test : train).push_back(ev);
        }
        if (train.empty()) {
            continue;  // no other source was fitted on: nothing to refit without this one
        }
        Refit best;
        double best_mape = 1e300;
        for (int fi = 0; fi <= 10; ++fi) {      // factor 0.80 .. 1.00 step 0.02
            for (int hi = 0; hi <= 10; ++hi) {  // hbm_efficiency 0.35 .. 0.85 step 0.05
                const double f = 0.80 + 0.02 * fi;
                const double h = 0.35 + 0.05 * hi;
                const double m = summarize_errors(errors_with(train, raw, f, h)).mape_pct;
                if (m < best_mape - 1e-12) {
                    best_mape = m;
                    best.factor = f;
                    best.hbm = h;
                }
            }
        }
        best.held_out = summarize_errors(errors_with(test, raw, best.factor, best.hbm));
        out[src] = best;
    }
    return out;
}

/// Each source held out of every constant fitted with its rows: a source none of whose rows a
/// calibration overlay was fitted on keeps its errors (every constant it meets was fitted on other
/// rows); a source that fitted an overlay together with other sources takes the refit without it
/// (leave_one_source_out); one that alone fitted an overlay is priced on the datasheet profile
/// (the overlay removed), since nothing else could have chosen its value.

std::map<std::string, HeldOut> held_out_by_source(const std::vector<Evaluated>& evs,
                                                  const std::map<std::string, Refit>& loso) {
    // profile -> sources whose rows fitted its overlay
    std::map<std::string, std::set<std::string>> fitters;
    for (const auto& ev : evs) {
        if (ev.fitted && ev.c.in_mape) {
            fitters[ev.c.profile].insert(ev.c.source_key);
        }
    }
    std::map<std::string, ClusterSpec> raw;
    std::map<std::string, HeldOut> out;
    // (profile, entry, held-out source) -> the refitted value in us, or none (too few rows)
    std::map<std::tuple<std::string, std::size_t, std::string>, std::optional<double>> entry_refits;
    Overlays overlays;
    std::map<std::string, ClusterSpec> shipped;  // calibrated profiles, loaded once
    const auto uncalibrated = [&raw](const std::string& profile) -> const ClusterSpec& {
        auto it = raw.find(profile);
        if (it == raw.end()) {
            it = raw.emplace(profile, load_cluster_uncalibrated(profile)).first;
        }
        return it->second;
    };
    for (const auto& ev : evs) {
        if (!ev.c.expressible || !ev.c.in_mape) {
            continue;
        }
        const std::string& src = ev.c.source_key;
        HeldOut& h = out[src];
        const auto f = fitters.find(ev.c.profile);
        const bool used = f != fitters.end() && f->second.count(src) > 0;
        if (!used) {
            h.how.insert("as shipped");
            add_errors(ev, h.errors);
            continue;
        }
        const auto refit = loso.find(src);
        if (f->second.size() > 1 && refittable(overlays.of(ev.c.profile)) && refit != loso.end()) {
            const std::vector<const Evaluated*> one{&ev};
            const std::map<std::string, ClusterSpec> only{{ev.c.profile, uncalibrated(ev.c.profile)}};
            for (const auto& e : errors_with(one, only, refit->second.factor, refit->second.hbm)) {
                h.errors.push_back(e);
            }
            h.how.insert(ev.c.profile + " refitted without it");
            continue;
        }
        // An overlay fitted on this source alone: the parts whose rows are this source's go
        // (a [[moe.from_release]] entry by its own fitted_rows; the rest with the datasheet
        // profile), the parts other sources chose stay.
        const auto& cal = overlays.of(ev.c.profile);
        const auto of_src = [&](const std::vector<std::pair<int64_t, int64_t>>& rows) {
            for (const auto& other : evs) {
                if (other.c.source_key != src) {
                    continue;
                }
                for (const auto& [lo, hi] : rows) {
                    if (other.c.row_id >= lo && other.c.row_id <= hi) {
                        return true;
                    }
                }
            }
            return false;
        };
        std::vector<std::pair<int64_t, int64_t>> base_rows;
        for (const auto& [lo, hi] : cal->fitted_rows) {
            bool in_entry = false;
            for (const auto& er : cal->from_release_rows) {
                for (const auto& [elo, ehi] : er) {
                    in_entry = in_entry || (lo >= elo && hi <= ehi);
                }
            }
            if (!in_entry) {
                base_rows.emplace_back(lo, hi);
            }
        }
        const bool base_used = of_src(base_rows);
        if (!base_used && shipped.count(ev.c.profile) == 0) {
            shipped.emplace(ev.c.profile, load_cluster(ev.c.profile));
        }
        ClusterSpec held = base_used ? uncalibrated(ev.c.profile) : shipped.at(ev.c.profile);
        held.node.quantised_expert_from_release.clear();
        std::vector<std::string> dropped;
        std::vector<std::string> refitted;
        for (std::size_t k = 0; k < cal->quantised_expert_from_release.size(); ++k) {
            const bool used_here =
                k < cal->from_release_rows.size() && of_src(cal->from_release_rows[k]);
            NodeSpec::ExpertOverheadFrom entry = cal->quantised_expert_from_release[k];
            if (!used_here) {
                held.node.quantised_expert_from_release.push_back(entry);
                continue;
            }
            // Refitted on the entry's rows of the other sources (the grid of
            // scripts/fit_moe_overhead.py: 0..2000 us step 5), if two or more remain.
            const auto key = std::make_tuple(ev.c.profile, k, src);
            auto fit = entry_refits.find(key);
            if (fit == entry_refits.end()) {
                std::vector<const Evaluated*> rest;
                for (const auto& other : evs) {
                    if (other.c.source_key == src || !other.c.in_mape || !other.c.expressible ||
                        other.c.profile != ev.c.profile) {
                        continue;
                    }
                    for (const auto& [lo, hi] : cal->from_release_rows[k]) {
                        if (other.c.row_id >= lo && other.c.row_id <= hi) {
                            rest.push_back(&other);
                        }
                    }
                }
                std::optional<double> best;
                if (rest.size() >= 2) {
                    double best_mape = 1e300;
                    for (int us = 0; us <= 2000; us += 5) {
                        ClusterSpec trial = held;
                        NodeSpec::ExpertOverheadFrom t = entry;
                        t.value = seconds(us * 1e-6);
                        trial.node.quantised_expert_from_release.push_back(t);
                        std::vector<std::pair<int64_t, double>> errs;
                        for (const Evaluated* r : rest) {
                            Evaluated x = *r;
                            x.r = evaluate_published(x.c, trial);
                            add_errors(x, errs);
                        }
                        const double m = summarize_errors(errs).mape_pct;
                        if (m < best_mape - 1e-12) {
                            best_mape = m;
                            best = us;
                        }
                    }
                }
                fit = entry_refits.emplace(key, best).first;
            }
            if (fit->second) {
                entry.value = seconds(*fit->second * 1e-6);
                held.node.quantised_expert_from_release.push_back(entry);
                refitted.push_back(entry.release + " expert cost refitted without it (" +
                                   std::to_string(static_cast<int64_t>(*fit->second)) + " us)");
            } else {
                dropped.push_back(entry.release);
            }
        }
        Evaluated e = ev;
        e.r = evaluate_published(e.c, held);
        add_errors(e, h.errors);
        if (base_used) {
            h.how.insert(ev.c.profile + " overlay removed");
        }
        for (const auto& d : dropped) {
            h.how.insert(ev.c.profile + " " + d + " expert cost removed");
        }
        for (const auto& r : refitted) {
            h.how.insert(ev.c.profile + " " + r);
        }
    }
    return out;
}

std::vector<CheckedMemory> check_memory_cases(std::vector<MemoryCase> cases) {
    std::map<std::string, ClusterSpec> clusters;
    const std::vector<std::string> profiles = shipped_profiles();
    std::vector<CheckedMemory> out;
    for (auto& c : cases) {
        if (c.expressible && profile_ships(c, profiles)) {
            load_memory_case_stack(c);
            const auto broken = check_plan(c.model, c.job, c.plan);
            if (!broken.empty()) {
                c.expressible = false;
                c.reason = "plan cannot be expressed: " + broken.front();
            }
        }
        CheckedMemory ch{c, {}};
        if (c.expressible) {
            ch.r = evaluate_memory(ch.c, cluster_of(clusters, c.profile));
        }
        out.push_back(std::move(ch));
    }
    return out;
}

}  // namespace cleave
