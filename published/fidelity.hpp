#pragma once
// `cleave published` over public runs CSVs: each row priced, the errors per source (fitted and not
// fitted rows apart), leave-one-source-out refits of the overlays and each source held out of
// every constant fitted with its rows. The CLI prints these; nothing here prints.

#include "core/calibration.hpp"
#include "published/published.hpp"
#include "published/published_memory.hpp"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace cleave {

/// One row priced: the case, its result, and how the calibration relates to it.
struct Evaluated {
    PublishedCase c;
    PublishedResult r;
    bool calibration = false;  // layer-time rows (KOR_T4) fixed the profile's curves
    bool fitted = false;       // a calibration overlay of its profile was fitted on this row
};

/// Every row of `cases` (parsed from the CSV at `csv`) priced on its shipped profile; a row whose
/// profile or stack does not ship is marked not expressed with the reason.
std::vector<Evaluated> evaluate_all(std::vector<PublishedCase> cases, const std::string& csv);

/// (row, error %) of the rows in the MAPE: iteration rows, or (calibration) the layer rows'
/// forward and backward errors.
std::vector<std::pair<int64_t, double>> errors_of(const std::vector<Evaluated>& evs,
                                                  bool calibration);

/// Every error a row contributes: its iteration error, or a layer row's forward and backward.
void add_errors(const Evaluated& ev, std::vector<std::pair<int64_t, double>>& out);

/// A source's errors, the rows an overlay was fitted on apart from the others.
struct SourceSplit {
    std::vector<std::pair<int64_t, double>> fitted, unfitted;
};

std::map<std::string, SourceSplit> by_source(const std::vector<Evaluated>& evs);

/// Leave-one-source-out: the overlay's two numbers (GEMM-curve factor, hbm_efficiency) refitted by
/// grid search over the fitted rows of every other source, the held-out source predicted with it.
struct Refit {
    double factor = 0.0, hbm = 0.0;
    ErrorSummary held_out;
};

std::map<std::string, Refit> leave_one_source_out(const std::vector<Evaluated>& evs);

/// Each source held out of every constant fitted with its rows (how: what was refitted or
/// removed for it).
struct HeldOut {
    std::set<std::string> how;
    std::vector<std::pair<int64_t, double>> errors;
};

std::map<std::string, HeldOut> held_out_by_source(const std::vector<Evaluated>& evs,
                                                  const std::map<std::string, Refit>& loso);

/// One row of public_memory.csv priced.
struct CheckedMemory {
    MemoryCase c;
    MemoryResult r;
};

/// Every row priced on its shipped profile and stack; a row whose profile does not ship or whose
/// plan breaks a rule is marked not expressed with the reason.
std::vector<CheckedMemory> check_memory_cases(std::vector<MemoryCase> cases);

}  // namespace cleave
