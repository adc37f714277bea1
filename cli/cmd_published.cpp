// cleave published [CSV]: predicted vs published iteration times of public training runs.
#include "cli/commands.hpp"
#include "core/errors.hpp"
#include "core/load.hpp"
#include "costmodel/published.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace cleave::cli {

namespace {

struct PublishedOptions {
    std::string csv;  // "" = the repository copy tests/data/public_runs.csv
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
};

std::vector<Evaluated> evaluate_all(const std::vector<PublishedCase>& cases) {
    std::map<std::string, ClusterSpec> clusters;
    std::vector<Evaluated> out;
    for (const auto& c : cases) {
        Evaluated ev{c, {}, c.metric == PublishedMetric::layer_time};
        if (c.expressible) {
            auto it = clusters.find(c.profile);
            if (it == clusters.end()) {
                it = clusters.emplace(c.profile, load_cluster(c.profile)).first;
            }
            ev.r = evaluate_published(c, it->second);
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
                  "# iteration time: %lld rows, MAPE %.2f %%, worst %.2f %% (row %lld)\n",
                  static_cast<long long>(it.count),
                  it.mape_pct,
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
    for (const auto& ev : evs) {
        if (!ev.c.expressible) {
            os << "# not expressed: row " << ev.c.row_id << " (" << ev.c.source_key << ", "
               << ev.c.model_name << "): " << ev.c.reason << "\n";
        }
    }
    os << "# calibrated: the A100 profiles' GEMM-curve factor and hbm_efficiency, fitted once over "
          "the\n# A100 Megatron rows (1-10, 17-30, 33-37, 73-80); the DeepSpeed ZeRO-3 rows "
          "(11-16) and the\n# DGX-2 rows (69-72, dgx2-v100 = dgx1-v100's GPU numbers) are in no "
          "fit (docs/costmodel.md)\n";
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
    sub->add_option("CSV", opt->csv, "public_runs.csv (default: tests/data/public_runs.csv)")
        ->check(CLI::ExistingFile);
    sub->add_option("--format", opt->format, "Output format")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    sub->callback([opt, &ctx] {
        const std::filesystem::path csv =
            opt->csv.empty() ? default_csv() : std::filesystem::path(opt->csv);
        const auto cases = parse_public_runs(read_file(csv), csv.string());
        const auto evs = evaluate_all(cases);
        if (opt->format == "json") {
            auto j = to_json(evs);
            j["csv"] = csv.string();
            ctx.out << j.dump(2) << "\n";
        } else {
            print_table(ctx.out, evs, csv.string());
            print_summary(ctx.out, evs);
        }
        ctx.exit_code = 0;
    });
}

}  // namespace cleave::cli
