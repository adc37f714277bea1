// cleave published [CSV]: predicted vs published iteration times of public training runs, and
// predicted vs measured peak memory (api/cleave.hpp published()).
#include "api/cleave.hpp"
#include "api/detail.hpp"
#include "api/inputs.hpp"
#include "core/calibration.hpp"
#include "core/errors.hpp"
#include "core/load.hpp"
#include "core/stack.hpp"
#include "published/published.hpp"
#include "published/published_memory.hpp"
#include "published/fidelity.hpp"

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

namespace cleave::api {

namespace {

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

std::string plan_str(const Plan& p) {
    char buf[128];
    std::snprintf(buf,
                  sizeof buf,
                  "t%lld p%lld d%lld%s%s v%lld b%lld %s%s%s",
                  static_cast<long long>(p.tp),
                  static_cast<long long>(p.pp),
                  static_cast<long long>(p.dp),
                  p.cp > 1 ? (" c" + std::to_string(p.cp)).c_str() : "",
                  p.ep > 1 ? (" e" + std::to_string(p.ep)).c_str() : "",
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
    // The layouts that ran with less to spare than the CLI's default headroom (JobOptions,
    // api/inputs.hpp): what the default sets aside though it ran.
    const std::string headroom = JobOptions{}.memory_headroom;
    int64_t aside = 0;
    for (const auto& ev : evs) {
        GpuSpec gpu;
        gpu.memory = gib(ev.r.usable_gib);
        if (ev.c.expressible && ev.c.metric == PublishedMetric::iteration_time && ev.r.fits &&
            ev.r.spare_gib < to_gib(parse_headroom(headroom, gpu))) {
            ++aside;
            os << "# inside the default " << headroom << " headroom: row " << ev.c.row_id << " ("
               << ev.c.model_name << ", " << plan_str(ev.c.plan) << "): "
               << detail::format_number("%.2f", ev.r.spare_gib) << " GiB to spare = "
               << detail::format_number("%.1f", 100.0 * ev.r.spare_gib / ev.r.usable_gib)
               << " % of the GPU's memory\n";
        }
    }
    os << "# published layouts the default headroom sets aside: " << aside << "\n";
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

/// The column a table of sources gives their keys: the longest key, at least 18 characters
/// (DGXC_NEMOTRON4_340B_FP8 is 23).
template <class Map>
int key_width(const Map& by_key) {
    int width = 18;
    for (const auto& kv : by_key) {
        width = std::max(width, static_cast<int>(kv.first.size()));
    }
    return width;
}

void print_sources(std::ostream& os, const std::vector<Evaluated>& evs) {
    os << "# per source: values: MAPE % / worst % / signed mean % of the rows a calibration overlay\n"
          "# was fitted on (hwprofiles/calibration/) and of the rows no constant was fitted to\n";
    const auto sources = by_source(evs);
    const int width = key_width(sources);
    char line[260];
    std::snprintf(
        line, sizeof line, "# %-*s %-30s %s\n", width, "source", "fitted on", "not fitted");
    os << line;
    for (const auto& [src, s] : sources) {
        std::snprintf(line,
                      sizeof line,
                      "  %-*s %-30s %s\n",
                      width,
                      src.c_str(),
                      mape_cell(s.fitted).c_str(),
                      mape_cell(s.unfitted).c_str());
        os << line;
    }
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

void print_held_out(std::ostream& os, const std::map<std::string, HeldOut>& held) {
    os << "# each source held out of the constants fitted on its rows (values: MAPE % / worst % /\n"
          "# signed mean %): rows no constant was fitted on as shipped; an overlay fitted with other\n"
          "# sources refitted without it (a release's expert cost on the other sources' rows of that\n"
          "# release, if two or more); what it alone chose removed (datasheet profile)\n";
    const int width = key_width(held);
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
                      "  %-*s %4lld: %6.2f / %6.2f / %+7.2f  ",
                      width,
                      src.c_str(),
                      static_cast<long long>(s.count),
                      s.mape_pct,
                      s.worst_pct,
                      s.mean_signed_pct);
        os << line << how << '\n';  // how can outgrow any fixed buffer
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
            j["spare_gib"] = ev.r.spare_gib;
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

Published published(const std::vector<std::string>& csv_paths) {
    std::vector<std::filesystem::path> csvs(csv_paths.begin(), csv_paths.end());
    if (csvs.empty()) {
        csvs.push_back(default_csv());
    }
    Published out;
    for (const auto& csv : csvs) {
        const std::string text = read_file(csv);
        if (is_memory_csv(text)) {
            if (csvs.size() > 1) {
                throw ConfigError(csv.string() +
                                  ": a measured-memory CSV is checked on its own (cleave "
                                  "published " + csv.string() + ")");
            }
            out.memory = true;
            out.csv = csv.string();
            out.memory_rows = check_memory_cases(parse_public_memory(text, csv.string()));
            return out;
        }
        auto one = evaluate_all(parse_public_runs(text, csv.string()), csv.string());
        out.rows.insert(out.rows.end(), std::make_move_iterator(one.begin()),
                        std::make_move_iterator(one.end()));
        out.csv += (out.csv.empty() ? "" : ", ") + csv.string();
    }
    out.loso = leave_one_source_out(out.rows);
    out.held = held_out_by_source(out.rows, out.loso);
    return out;
}

nlohmann::json to_json(const Published& p) {
    if (p.memory) {
        return detail::memory_json(p.memory_rows, p.csv);
    }
    const auto& evs = p.rows;
    const auto& loso = p.loso;
    const auto& held = p.held;
    auto j = to_json(evs);
    j["csv"] = p.csv;
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
    return j;
}

void print_table(std::ostream& os, const Published& p) {
    if (p.memory) {
        detail::print_memory_table(os, p.memory_rows, p.csv);
        return;
    }
    print_table(os, p.rows, p.csv);
    print_summary(os, p.rows);
    print_sources(os, p.rows);
    print_loso(os, p.loso);
    print_held_out(os, p.held);
}

}  // namespace cleave::api
