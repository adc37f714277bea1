// Layouts a published row does not state, from its submitter's other rows (sibling_layout.hpp).

#include "published/sibling_layout.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>

namespace cleave::detail {

namespace {

/// The log's gradient-accumulation steps of a row whose layout was not determined: the
/// grad_accum_steps cell, or the notes' "grad_accum(log)=N" (public_runs_mlperf.csv reads it
/// from the MLLOG gradient_accumulation_steps key); 0 when neither says.
int64_t logged_grad_accum(const CsvCells& row) {
    const auto cell = row.find("grad_accum_steps");
    if (cell != row.end() && !cell->second.empty()) {
        return std::atoll(cell->second.c_str());
    }
    const auto notes = row.find("notes");
    const std::string key = "grad_accum(log)=";
    if (notes == row.end()) {
        return 0;
    }
    const auto at = notes->second.find(key);
    return at == std::string::npos ? 0 : std::atoll(notes->second.c_str() + at + key.size());
}

}  // namespace

/// A row whose parallel layout the source left blank (MLPerf submissions with no config file
/// for their GPU count: rows 5109 and 5110) takes its layout from the same submitter's rows of
/// the same round and benchmark (same source_key, model and task), when those rows agree on
/// everything but the layout's size and exactly one of their (tp, pp, cp) divides the row's GPUs
/// into dp = GBS / (MBS x GA), GA the log's. A submission's config files share one
/// config_common.sh (Dell's llama2_70b_lora sets FP8, PP 1, SP 1 and MBS 1 for all of them,
/// training_results_v4.1 @b87b9e3 Dell/benchmarks/llama2_70b_lora/implementations/nemo/configs/):
/// the cells they agree on are that file's. `said` gets what was taken; nullopt when the row has
/// a layout or no sibling gives exactly one.
std::optional<CsvCells>
sibling_layout(const std::vector<CsvCells>& rows, std::size_t i, std::string& said) {
    const auto& row = rows[i];
    const auto cell = [](const CsvCells& r, const char* k) {
        const auto it = r.find(k);
        return it == r.end() ? std::string() : it->second;
    };
    for (const char* k : {"tp", "pp", "dp", "cp"}) {
        if (!cell(row, k).empty()) {
            return std::nullopt;
        }
    }
    const int64_t ga = logged_grad_accum(row);
    const int64_t gpus = std::atoll(cell(row, "num_gpus").c_str());
    const int64_t gbs = std::atoll(cell(row, "global_batch_size").c_str());
    if (ga <= 0 || gpus <= 0 || gbs <= 0 || cell(row, "source_key").empty()) {
        return std::nullopt;
    }
    // The cells a submission's common config fixes; they must agree over the siblings.
    static constexpr const char* shared[] = {
        "micro_batch_size", "precision", "sequence_parallel", "activation_recompute", "ep", "vpp"};
    const CsvCells* first = nullptr;
    std::vector<std::array<int64_t, 3>> fits;  // (tp, pp, cp) of the siblings that divide
    for (std::size_t j = 0; j < rows.size(); ++j) {
        const auto& s = rows[j];
        if (j == i || cell(s, "source_key") != cell(row, "source_key") ||
            cell(s, "model") != cell(row, "model") || cell(s, "task") != cell(row, "task") ||
            cell(s, "tp").empty() || cell(s, "pp").empty()) {
            continue;
        }
        if (first == nullptr) {
            first = &s;
        }
        // A cell's remark in parentheses ("none (not set in config; ...)") is not its value.
        const auto value = [&](const CsvCells& r, const char* k) {
            const std::string v = cell(r, k);
            return v.substr(0, v.find(" ("));
        };
        for (const char* k : shared) {
            if (value(s, k) != value(*first, k)) {
                return std::nullopt;  // the siblings disagree: no common config to take
            }
        }
        const int64_t mbs = std::max<int64_t>(1, std::atoll(cell(s, "micro_batch_size").c_str()));
        const std::array<int64_t, 3> l{std::atoll(cell(s, "tp").c_str()),
                                       std::atoll(cell(s, "pp").c_str()),
                                       std::max<int64_t>(1, std::atoll(cell(s, "cp").c_str()))};
        const int64_t mp = l[0] * l[1] * l[2];
        if (mp > 0 && gbs % (mbs * ga) == 0 && mp * (gbs / (mbs * ga)) == gpus &&
            std::find(fits.begin(), fits.end(), l) == fits.end()) {
            fits.push_back(l);
        }
    }
    if (first == nullptr || fits.size() != 1) {
        return std::nullopt;
    }
    auto out = row;
    for (const char* k : shared) {
        out[k] = cell(*first, k);
    }
    const int64_t mbs = std::max<int64_t>(1, std::atoll(cell(*first, "micro_batch_size").c_str()));
    const int64_t dp = gbs / (mbs * ga);
    out["tp"] = std::to_string(fits[0][0]);
    out["pp"] = std::to_string(fits[0][1]);
    out["cp"] = std::to_string(fits[0][2]);
    out["dp"] = std::to_string(dp);
    said = "layout not published: the submitter's own layout for this benchmark that divides " +
           cell(row, "num_gpus") + " GPUs at GA " + std::to_string(ga) + " (the log) into dp " +
           std::to_string(dp) + ", tp " + out["tp"] + " pp " + out["pp"] + " cp " + out["cp"] +
           ", with its rows' common cells (precision, MBS, SP, recompute); ";
    return out;
}

}  // namespace cleave::detail
