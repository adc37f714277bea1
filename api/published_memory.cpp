#include "api/detail.hpp"
#include "api/cleave.hpp"

#include "core/load.hpp"
#include "core/stack.hpp"
#include "published/published.hpp"
#include "published/published_memory.hpp"
#include "published/fidelity.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <ostream>

#include <nlohmann/json.hpp>

namespace cleave::api {

namespace {

using Checked = CheckedMemory;

std::string plan_cell(const Plan& p) {
    char buf[96];
    std::snprintf(buf,
                  sizeof buf,
                  "t%lld p%lld d%lld c%lld e%lld v%lld b%lld %s%s%s z%d",
                  static_cast<long long>(p.tp),
                  static_cast<long long>(p.pp),
                  static_cast<long long>(p.dp),
                  static_cast<long long>(p.cp),
                  static_cast<long long>(p.ep),
                  static_cast<long long>(p.vpp),
                  static_cast<long long>(p.mbs),
                  to_string(p.recompute),
                  p.recompute_modules != 0
                      ? ("[" + recompute_modules_string(p.recompute_modules) + "]").c_str()
                      : "",
                  p.sp ? " sp" : "",
                  p.zero);
    return buf;
}

struct SourceStats {
    std::vector<std::pair<int64_t, double>> errors;
    double signed_sum = 0.0;
};

std::map<std::string, SourceStats> by_source(const std::vector<Checked>& rows) {
    std::map<std::string, SourceStats> out;
    for (const auto& ch : rows) {
        if (ch.c.expressible) {
            SourceStats& s = out[ch.c.source_key];
            s.errors.emplace_back(ch.c.row_id, ch.r.error_pct);
            s.signed_sum += ch.r.error_pct;
        }
    }
    return out;
}

std::vector<std::pair<int64_t, double>> all_errors(const std::vector<Checked>& rows) {
    std::vector<std::pair<int64_t, double>> out;
    for (const auto& ch : rows) {
        if (ch.c.expressible) {
            out.emplace_back(ch.c.row_id, ch.r.error_pct);
        }
    }
    return out;
}

void print_table(std::ostream& os, const std::vector<Checked>& rows, const std::string& path) {
    os << "# cleave published: predicted vs measured peak memory per GPU (GiB), " << path << "\n"
          "# each row in its own metric: allocated (torch max_memory_allocated) or reserved\n"
          "# (max_memory_reserved = allocated + the stack's allocator_overhead)\n";
    char line[320];
    std::snprintf(line,
                  sizeof line,
                  "# %4s %-19s %-18s %5s %-36s %-9s %8s %9s %9s %7s\n",
                  "row",
                  "source",
                  "model",
                  "gpus",
                  "plan",
                  "metric",
                  "measured",
                  "allocated",
                  "reserved",
                  "err(%)");
    os << line;
    for (const auto& ch : rows) {
        if (!ch.c.expressible) {
            continue;
        }
        std::snprintf(line,
                      sizeof line,
                      "  %4lld %-19s %-18s %5lld %-36s %-9s %8.2f %9.2f %9.2f %+7.1f\n",
                      static_cast<long long>(ch.c.row_id),
                      ch.c.source_key.c_str(),
                      ch.c.model_name.substr(0, 18).c_str(),
                      static_cast<long long>(ch.c.job.gpus),
                      plan_cell(ch.c.plan).c_str(),
                      to_string(ch.c.metric),
                      ch.c.measured_gib,
                      ch.r.allocated_gib,
                      ch.r.reserved_gib,
                      ch.r.error_pct);
        os << line;
    }
    const ErrorSummary all = summarize_errors(all_errors(rows));
    std::snprintf(line,
                  sizeof line,
                  "# all rows with a stated plan: %lld rows, MAPE %.2f %%, worst %.2f %% (row %lld)\n",
                  static_cast<long long>(all.count),
                  all.mape_pct,
                  all.worst_pct,
                  static_cast<long long>(all.worst_row));
    os << line;
    os << "# per source: rows, MAPE %, signed mean % (+ = cleave above the measurement), worst %\n";
    for (const auto& [src, s] : by_source(rows)) {
        const ErrorSummary e = summarize_errors(s.errors);
        std::snprintf(line,
                      sizeof line,
                      "  %-19s %3lld %8.2f %+8.2f %8.2f\n",
                      src.c_str(),
                      static_cast<long long>(e.count),
                      e.mape_pct,
                      s.signed_sum / static_cast<double>(e.count),
                      e.worst_pct);
        os << line;
    }
    os << "# leave-one-source-out: no constant of the memory model is fitted to this file (the\n"
          "# allocator overhead is the stacks' [M] figure from other runs), so each source's\n"
          "# held-out error is its row above\n";
    for (const auto& ch : rows) {
        if (!ch.c.expressible) {
            os << "# not expressed: row " << ch.c.row_id << " (" << ch.c.source_key << ", "
               << ch.c.model_name << "): " << ch.c.reason << "\n";
        }
    }
    for (const auto& ch : rows) {
        if (ch.c.expressible && !ch.c.reason.empty()) {
            os << "# assumed: row " << ch.c.row_id << ": " << ch.c.reason << "\n";
        }
    }
}

nlohmann::json to_json(const std::vector<Checked>& rows, const std::string& path) {
    auto out = nlohmann::json::array();
    auto skipped = nlohmann::json::array();
    for (const auto& ch : rows) {
        if (!ch.c.expressible) {
            skipped.push_back({{"row_id", ch.c.row_id},
                               {"source_key", ch.c.source_key},
                               {"model", ch.c.model_name},
                               {"reason", ch.c.reason}});
            continue;
        }
        out.push_back({{"row_id", ch.c.row_id},
                       {"source_key", ch.c.source_key},
                       {"model", ch.c.model_name},
                       {"profile", ch.c.profile},
                       {"stack", ch.c.stack},
                       {"plan", plan_cell(ch.c.plan)},
                       {"metric", to_string(ch.c.metric)},
                       {"measured_gib", ch.c.measured_gib},
                       {"predicted_gib", ch.r.predicted_gib},
                       {"peak_allocated_gib", ch.r.allocated_gib},
                       {"peak_reserved_gib", ch.r.reserved_gib},
                       {"total_gib", ch.r.total_gib},
                       {"usable_gib", ch.r.usable_gib},
                       {"peak_stage", ch.r.stage},
                       {"error_pct", ch.r.error_pct},
                       {"assumptions", ch.c.reason}});
    }
    auto sources = nlohmann::json::object();
    for (const auto& [src, s] : by_source(rows)) {
        const ErrorSummary e = summarize_errors(s.errors);
        sources[src] = {{"rows", e.count},
                        {"mape_pct", e.mape_pct},
                        {"signed_mean_pct", s.signed_sum / static_cast<double>(e.count)},
                        {"worst_pct", e.worst_pct}};
    }
    const ErrorSummary all = summarize_errors(all_errors(rows));
    return {{"csv", path},
            {"kind", "memory"},
            {"rows", out},
            {"not_expressed", skipped},
            {"signed", sources},
            {"memory",
             {{"rows", all.count},
              {"mape_pct", all.mape_pct},
              {"worst_pct", all.worst_pct},
              {"worst_row", all.worst_row}}}};
}

}  // namespace

namespace detail {

nlohmann::json memory_json(const std::vector<CheckedMemory>& rows, const std::string& path) {
    return to_json(rows, path);
}

void print_memory_table(std::ostream& os,
                        const std::vector<CheckedMemory>& rows,
                        const std::string& path) {
    print_table(os, rows, path);
}

}  // namespace detail

}  // namespace cleave::api
