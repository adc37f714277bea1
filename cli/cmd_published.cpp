// cleave published [CSV]: predicted vs published iteration times of public training runs.
#include "cli/commands.hpp"
#include "cli/published_memory.hpp"
#include "core/calibration.hpp"
#include "core/errors.hpp"
#include "core/load.hpp"
#include "core/stack.hpp"
#include "published/published.hpp"
#include "published/published_memory.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace cleave::cli {

namespace {

struct PublishedOptions {
    std::vector<std::string> csvs;  // empty = the repository copy tests/data/public_runs.csv
    std::string format = "table";
};

std::filesystem::path default_csv() {
    for (const auto& dir : hwprofile_dirs()) {
        for (const auto& cand : {dir.parent_path() / "tests" / "data" / "public_runs.csv",
                                 dir.parent_path() / "public_runs.csv"}) {
            if (std::filesystem::exists(cand)) {
                return cand;
            }
        }
    }
    throw ConfigError("published: no CSV given and tests/data/public_runs.csv not found next to "
                      "the hardware profiles");
}

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) {
        throw ConfigError(p.string() + ": cannot open");
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

struct Evaluated {
    PublishedCase c;
    PublishedResult r;
    bool calibration = false;  // layer-time rows (KOR_T4) fixed the profile's curves
    bool fitted = false;       // a calibration overlay of its profile was fitted on this row
};

/// The row's stack loaded into its job (the stack's grad dtype unless the row fixed 16-bit
/// grads), and whether its profile ships; a row whose profile or stack is missing is listed as
/// not expressed with the reason.
void prepare(PublishedCase& c, const std::vector<std::string>& profiles) {
    if (!c.expressible) {
        return;
    }
    if (std::find(profiles.begin(), profiles.end(), c.profile) == profiles.end()) {
        c.expressible = false;
        c.reason = "no shipped profile '" + c.profile + "' (cleave hw list)";
        return;
    }
    load_case_stack(c);
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

std::vector<Evaluated> evaluate_all(std::vector<PublishedCase> cases, const std::string& csv) {
    std::map<std::string, ClusterSpec> clusters;
    const std::vector<std::string> profiles = shipped_profiles();
    std::vector<Evaluated> out;
    for (auto& c : cases) {
        prepare(c, profiles);
        Evaluated ev{c, {}, c.metric == PublishedMetric::layer_time, false};
        if (c.expressible) {
            auto it = clusters.find(c.profile);
            if (it == clusters.end()) {
                it = clusters.emplace(c.profile, load_cluster(c.profile)).first;
            }
            const auto cal = find_calibration(c.profile);
            ev.fitted = cal && fitted_on(*cal, csv) && cal->fitted(c.row_id);
            ev.r = evaluate_published(ev.c, it->second);
        }
        out.push_back(std::move(ev));
    }
    return out;
}

std::string plan_str(const Plan& p) {
    char buf[96];
    std::snprintf(buf,
                  sizeof buf,
                  "t%lld p%lld d%lld v%lld b%lld %s%s%s",
                  static_cast<long long>(p.tp),
                  static_cast<long long>(p.pp),
                  static_cast<long long>(p.dp),
                  static_cast<long long>(p.vpp),
                  static_cast<long long>(p.mbs),
                  to_string(p.recompute),
                  p.sp ? " sp" : "",
                  p.zero > 0 ? (" z" + std::to_string(p.zero)).c_str() : "");
    return buf;
}

void print_table(std::ostream& os, const std::vector<Evaluated>& evs, const std::string& csv) {
    os << "# cleave published: predicted vs published, " << csv << "\n";
    os << "# iteration rows: seconds per step (d = the CSV's iteration_time_s_derived; x = "
          "outside\n"
          "# the MAPE, see below); layer rows (KOR_T4): one layer's forward / backward in ms\n";
    char line[256];
    std::snprintf(line,
                  sizeof line,
                  "# %4s %-10s %-22s %5s %-26s %9s %9s %7s\n",
                  "row",
                  "source",
                  "model",
                  "gpus",
                  "plan",
                  "published",
                  "predicted",
                  "err(%)");
    os << line;
    for (const auto& ev : evs) {
        if (!ev.c.expressible) {
            continue;
        }
        const std::string name = ev.c.model_name.substr(0, 22);
        if (ev.c.metric == PublishedMetric::layer_time) {
            for (int k = 0; k < 2; ++k) {
                const double pub = (k == 0 ? ev.c.published_s : ev.c.published_bwd_s) * 1e3;
                const double pre = (k == 0 ? ev.r.predicted_s : ev.r.predicted_bwd_s) * 1e3;
                const double err = k == 0 ? ev.r.error_fwd_pct : ev.r.error_bwd_pct;
                std::snprintf(line,
                              sizeof line,
                              "  %4lld %-10s %-22s %5lld %-26s %7.2f%s %7.2f%s %+7.1f\n",
                              static_cast<long long>(ev.c.row_id),
                              ev.c.source_key.c_str(),
                              name.c_str(),
                              static_cast<long long>(ev.c.job.gpus),
                              plan_str(ev.c.plan).c_str(),
                              pub,
                              k == 0 ? "fw" : "bw",
                              pre,
                              k == 0 ? "fw" : "bw",
                              err);
                os << line;
            }
            continue;
        }
        std::snprintf(line,
                      sizeof line,
                      "  %4lld %-10s %-22s %5lld %-26s %8.3f%s %9.3f %+7.1f\n",
                      static_cast<long long>(ev.c.row_id),
                      ev.c.source_key.c_str(),
                      name.c_str(),
                      static_cast<long long>(ev.c.job.gpus),
                      plan_str(ev.c.plan).c_str(),
                      ev.c.published_s,
                      ev.c.derived ? "d" : " ",
                      ev.r.predicted_s,
                      ev.r.error_pct);
        if (!ev.c.in_mape) {
            line[0] = 'x';  // shown, but outside the MAPE (reason below the table)
        }
        os << line;
    }
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

void print_summary(std::ostream& os, const std::vector<Evaluated>& evs) {
    const ErrorSummary it = summarize_errors(errors_of(evs, false));
    const ErrorSummary cal = summarize_errors(errors_of(evs, true));
    char line[200];
    std::snprintf(line,
                  sizeof line,
                  "# iteration time: %lld rows, MAPE %.2f %%, signed mean %+.2f %%, worst %.2f %% (row "
                  "%lld)\n",
                  static_cast<long long>(it.count),
                  it.mape_pct,
                  it.mean_signed_pct,
                  it.worst_pct,
                  static_cast<long long>(it.worst_row));
    os << line;
    std::snprintf(line,
                  sizeof line,
                  "# layer time (KOR_T4 fwd/bwd): %lld values, MAPE %.2f %%, worst %.2f %% "
                  "(row %lld)\n",
                  static_cast<long long>(cal.count),
                  cal.mape_pct,
                  cal.worst_pct,
                  static_cast<long long>(cal.worst_row));
    os << line;
    int64_t misses = 0;
    for (const auto& ev : evs) {
        if (ev.c.expressible && ev.c.metric == PublishedMetric::iteration_time && !ev.r.fits) {
            ++misses;
            os << "# does not fit at no headroom: row " << ev.c.row_id << " (" << ev.c.model_name
               << ", " << plan_str(ev.c.plan) << "): stage " << ev.r.peak_stage << " misses by "
               << ev.r.missing_gib << " GiB\n";
        }
    }
    os << "# published layouts that do not fit at no headroom: " << misses << "\n";
    for (const auto& ev : evs) {
        if (!ev.c.expressible) {
            os << "# not expressed: row " << ev.c.row_id << " (" << ev.c.source_key << ", "
               << ev.c.model_name << "): " << ev.c.reason << "\n";
        }
    }
    std::map<std::string, std::string> overlays;
    for (const auto& ev : evs) {
        if (ev.c.expressible && overlays.count(ev.c.profile) == 0) {
            const auto overlay = find_calibration(ev.c.profile);
            overlays[ev.c.profile] = overlay ? overlay->source : "";
        }
    }
    for (const auto& [profile, file] : overlays) {
        os << "# calibration: " << profile << ": "
           << (file.empty() ? "none (datasheet and measured values only)"
                            : "fitted overlay " + file)
           << "\n";
    }
    for (const auto& ev : evs) {
        if (ev.c.expressible && !ev.c.in_mape) {
            os << "# outside the MAPE: row " << ev.c.row_id << ": " << ev.c.excluded_why << "\n";
        }
    }
    for (const auto& ev : evs) {
        if (ev.c.expressible && !ev.c.reason.empty()) {
            os << "# assumed: row " << ev.c.row_id << ": " << ev.c.reason << "\n";
        }
    }
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

struct SourceSplit {
    std::vector<std::pair<int64_t, double>> fitted, unfitted;
};

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

std::string mape_cell(const std::vector<std::pair<int64_t, double>>& e) {
    if (e.empty()) {
        return "-";
    }
    const ErrorSummary s = summarize_errors(e);
    char buf[64];
    std::snprintf(buf,
                  sizeof buf,
                  "%lld: %.2f / %.2f / %+.2f",
                  static_cast<long long>(s.count),
                  s.mape_pct,
                  s.worst_pct,
                  s.mean_signed_pct);
    return buf;
}

void print_sources(std::ostream& os, const std::vector<Evaluated>& evs) {
    os << "# per source: values: MAPE % / worst % / signed mean % of the rows a calibration overlay\n"
          "# was fitted on (hwprofiles/calibration/) and of the rows no constant was fitted to\n";
    char line[200];
    std::snprintf(line, sizeof line, "# %-18s %-30s %s\n", "source", "fitted on", "not fitted");
    os << line;
    for (const auto& [src, s] : by_source(evs)) {
        std::snprintf(line,
                      sizeof line,
                      "  %-18s %-30s %s\n",
                      src.c_str(),
                      mape_cell(s.fitted).c_str(),
                      mape_cell(s.unfitted).c_str());
        os << line;
    }
}

/// Leave-one-source-out: refit the overlay's two numbers (GEMM-curve factor, hbm_efficiency) by
/// the same grid search over the fitted rows of every other source, and predict the held-out
/// source's rows with that fit. `raw` holds the overlaid profiles without their overlay.
struct Refit {
    double factor = 0.0, hbm = 0.0;
    ErrorSummary held_out;
};

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

void print_loso(std::ostream& os, const std::map<std::string, Refit>& loso) {
    if (loso.empty()) {
        return;
    }
    os << "# leave-one-source-out: the overlay's GEMM factor and hbm_efficiency refitted (grid\n"
          "# 0.80..1.00 x 0.35..0.85) without the source, then the source predicted with that "
          "fit\n";
    char line[200];
    std::snprintf(line,
                  sizeof line,
                  "# %-14s %7s %5s %9s %9s\n",
                  "held out",
                  "factor",
                  "hbm",
                  "MAPE(%)",
                  "worst(%)");
    os << line;
    for (const auto& [src, r] : loso) {
        std::snprintf(line,
                      sizeof line,
                      "  %-14s %7.2f %5.2f %9.2f %9.2f\n",
                      src.c_str(),
                      r.factor,
                      r.hbm,
                      r.held_out.mape_pct,
                      r.held_out.worst_pct);
        os << line;
    }
}

/// Each source held out of every constant fitted with its rows: a source none of whose rows a
/// calibration overlay was fitted on keeps its errors (every constant it meets was fitted on other
/// rows); a source that fitted an overlay together with other sources takes the refit without it
/// (leave_one_source_out); one that alone fitted an overlay is priced on the datasheet profile
/// (the overlay removed), since nothing else could have chosen its value.
struct HeldOut {
    std::set<std::string> how;
    std::vector<std::pair<int64_t, double>> errors;
};

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

void print_held_out(std::ostream& os, const std::map<std::string, HeldOut>& held) {
    os << "# each source held out of the constants fitted on its rows (values: MAPE % / worst % /\n"
          "# signed mean %): rows no constant was fitted on as shipped; an overlay fitted with other\n"
          "# sources refitted without it (a release's expert cost on the other sources' rows of that\n"
          "# release, if two or more); what it alone chose removed (datasheet profile)\n";
    char line[260];
    std::vector<std::pair<int64_t, double>> all;
    for (const auto& [src, h] : held) {
        const ErrorSummary s = summarize_errors(h.errors);
        std::string how;
        for (const auto& x : h.how) {
            how += (how.empty() ? "" : "; ") + x;
        }
        std::snprintf(line,
                      sizeof line,
                      "  %-18s %4lld: %6.2f / %6.2f / %+7.2f  %s\n",
                      src.c_str(),
                      static_cast<long long>(s.count),
                      s.mape_pct,
                      s.worst_pct,
                      s.mean_signed_pct,
                      how.c_str());
        os << line;
        all.insert(all.end(), h.errors.begin(), h.errors.end());
    }
    const ErrorSummary a = summarize_errors(all);
    std::snprintf(line,
                  sizeof line,
                  "# every source held out: %lld values, MAPE %.2f %%, signed mean %+.2f %%, worst "
                  "%.2f %% (row %lld)\n",
                  static_cast<long long>(a.count),
                  a.mape_pct,
                  a.mean_signed_pct,
                  a.worst_pct,
                  static_cast<long long>(a.worst_row));
    os << line;
}

nlohmann::json to_json(const std::vector<Evaluated>& evs) {
    auto rows = nlohmann::json::array();
    auto skipped = nlohmann::json::array();
    for (const auto& ev : evs) {
        if (!ev.c.expressible) {
            skipped.push_back({{"row_id", ev.c.row_id},
                               {"source_key", ev.c.source_key},
                               {"model", ev.c.model_name},
                               {"reason", ev.c.reason}});
            continue;
        }
        nlohmann::json j = {{"row_id", ev.c.row_id},
                            {"source_key", ev.c.source_key},
                            {"model", ev.c.model_name},
                            {"profile", ev.c.profile},
                            {"plan", plan_str(ev.c.plan)},
                            {"assumptions", ev.c.reason},
                            {"in_mape", ev.c.in_mape},
                            {"excluded_why", ev.c.excluded_why},
                            {"stack", ev.c.stack},
                            {"fitted", ev.fitted},
                            {"calibration", ev.calibration}};
        if (ev.c.metric == PublishedMetric::layer_time) {
            j["metric"] = "layer_time";
            j["published_fwd_s"] = ev.c.published_s;
            j["published_bwd_s"] = ev.c.published_bwd_s;
            j["predicted_fwd_s"] = ev.r.predicted_s;
            j["predicted_bwd_s"] = ev.r.predicted_bwd_s;
            j["error_fwd_pct"] = ev.r.error_fwd_pct;
            j["error_bwd_pct"] = ev.r.error_bwd_pct;
        } else {
            j["metric"] = "iteration_time";
            j["published_s"] = ev.c.published_s;
            j["published_is_derived"] = ev.c.derived;
            j["predicted_s"] = ev.r.predicted_s;
            j["error_pct"] = ev.r.error_pct;
            j["predicted_tflops_per_gpu"] = ev.r.tflops_per_gpu;
            j["predicted_mfu"] = ev.r.mfu;
            j["fits_at_no_headroom"] = ev.r.fits;
            j["missing_gib"] = ev.r.missing_gib;
            j["predicted_by_kind_s"] = {{"gemm", ev.r.gemm_s},
                                        {"attention", ev.r.attention_s},
                                        {"memory_bound", ev.r.memory_s},
                                        {"recompute", ev.r.recompute_s},
                                        {"straggler", ev.r.straggler_s},
                                        {"exposed_comm", ev.r.comm_s},
                                        {"bubble", ev.r.bubble_s},
                                        {"optimizer", ev.r.optimizer_s}};
        }
        rows.push_back(std::move(j));
    }
    const ErrorSummary it = summarize_errors(errors_of(evs, false));
    const ErrorSummary cal = summarize_errors(errors_of(evs, true));
    return {{"rows", rows},
            {"not_expressed", skipped},
            {"iteration_time",
             {{"rows", it.count},
              {"mape_pct", it.mape_pct},
              {"mean_signed_pct", it.mean_signed_pct},
              {"worst_pct", it.worst_pct},
              {"worst_row", it.worst_row}}},
            {"layer_time",
             {{"rows", "KOR_T4 layer forward/backward"},
              {"values", cal.count},
              {"mape_pct", cal.mape_pct},
              {"worst_pct", cal.worst_pct},
              {"worst_row", cal.worst_row}}}};
}

}  // namespace

void setup_published(CLI::App& app, CliContext& ctx) {
    auto opt = std::make_shared<PublishedOptions>();
    auto* sub = app.add_subcommand(
        "published", "Predict the published training runs of a CSV and print the errors");
    sub->add_option("CSV", opt->csvs,
                    "public runs CSVs (default: tests/data/public_runs.csv); several are read as one "
                    "set (per-source and held-out tables over all of them)")
        ->check(CLI::ExistingFile);
    sub->add_option("--format", opt->format, "Output format")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    sub->callback([opt, &ctx] {
        std::vector<std::filesystem::path> csvs(opt->csvs.begin(), opt->csvs.end());
        if (csvs.empty()) {
            csvs.push_back(default_csv());
        }
        std::vector<Evaluated> evs;
        std::string names;
        for (const auto& csv : csvs) {
            const std::string text = read_file(csv);
            if (is_memory_csv(text)) {
                if (csvs.size() > 1) {
                    throw ConfigError(csv.string() +
                                      ": a measured-memory CSV is checked on its own (cleave "
                                      "published " + csv.string() + ")");
                }
                print_published_memory(csv.string(), text, opt->format, ctx);
                return;
            }
            auto one = evaluate_all(parse_public_runs(text, csv.string()), csv.string());
            evs.insert(evs.end(), std::make_move_iterator(one.begin()),
                       std::make_move_iterator(one.end()));
            names += (names.empty() ? "" : ", ") + csv.string();
        }
        const auto loso = leave_one_source_out(evs);
        const auto held = held_out_by_source(evs, loso);
        if (opt->format == "json") {
            auto j = to_json(evs);
            j["csv"] = names;
            auto src = nlohmann::json::object();
            for (const auto& [name, s] : by_source(evs)) {
                const ErrorSummary f = summarize_errors(s.fitted);
                const ErrorSummary u = summarize_errors(s.unfitted);
                src[name] = {{"fitted",
                              {{"values", f.count},
                               {"mape_pct", f.mape_pct},
                               {"mean_signed_pct", f.mean_signed_pct}}},
                             {"not_fitted",
                              {{"values", u.count},
                               {"mape_pct", u.mape_pct},
                               {"mean_signed_pct", u.mean_signed_pct}}}};
            }
            j["sources"] = src;
            auto lj = nlohmann::json::object();
            for (const auto& [name, r] : loso) {
                lj[name] = {{"factor", r.factor},
                            {"hbm_efficiency", r.hbm},
                            {"mape_pct", r.held_out.mape_pct},
                            {"worst_pct", r.held_out.worst_pct}};
            }
            j["leave_one_source_out"] = lj;
            auto hj = nlohmann::json::object();
            for (const auto& [name, h] : held) {
                const ErrorSummary s = summarize_errors(h.errors);
                hj[name] = {{"how", std::vector<std::string>(h.how.begin(), h.how.end())},
                            {"values", s.count},
                            {"mape_pct", s.mape_pct},
                            {"worst_pct", s.worst_pct},
                            {"mean_signed_pct", s.mean_signed_pct}};
            }
            j["held_out"] = hj;
            ctx.out << j.dump(2) << "\n";
        } else {
            print_table(ctx.out, evs, names);
            print_summary(ctx.out, evs);
            print_sources(ctx.out, evs);
            print_loso(ctx.out, loso);
            print_held_out(ctx.out, held);
        }
        ctx.exit_code = 0;
    });
}

}  // namespace cleave::cli
