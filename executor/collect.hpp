#pragma once
// Collecting a run's measurements across ranks. Uses MPI_COMM_WORLD after the timed work only
// (results, not training traffic); the per-iteration barrier goes over a "world" group with the
// backend's timeout.

#include "executor/recorder.hpp"
#include "executor/run.hpp"

#include <array>
#include <vector>

namespace cleave::executor {

class Collector {
public:
    Collector(Backend& be, Group world, int64_t iterations);

    /// All ranks meet (bounded by the backend's timeout); not timed.
    void barrier();

    /// The largest `v` over the world (every rank calls it; a barrier too).
    [[nodiscard]] double max(double v);

    /// Keeps iteration `it`'s wall time, phase times, this rank's loss contribution and peak.
    void record(int64_t it,
                bool measured,
                double time_s,
                const Recorder& rec,
                double loss_part,
                int64_t peak_B);

    /// Reduces everything over the world; per-rank reports and the trace land on rank 0.
    /// `probes`: this rank's Params::probes, summed per tensor over the ranks.
    [[nodiscard]] Measurement finish(double checksum_part,
                                     const std::vector<std::pair<std::string, double>>& probes,
                                     const RankCoords& at,
                                     Recorder& rec);

private:
    Backend& be_;
    Group world_;
    Buffer token_;
    std::vector<double> loss_parts_;
    std::vector<double> times_;  // measured iterations
    // Measured iterations: the phases, then the hidden DP time (slot phase_count).
    static constexpr int slots = phase_count + 1;
    std::vector<std::array<double, slots>> phases_;
    int64_t peak_B_ = 0;
};

/// Issue 18: whether warm-up may stop after these warm-up iteration times (slowest rank each):
/// the last two are within `tolerance` of each other, |a - b| <= tolerance * max(a, b). The first
/// iterations of a run fault in their pages and fill the allocator's pools (on the 2-core VM the
/// first of the small GPT's iterations ran 10-30% slower than the next ones). Pure.
[[nodiscard]] bool warmed_up(const std::vector<double>& times_s, double tolerance);

/// Median of `v` (mean of the two middle values for an even count; 0 when empty).
[[nodiscard]] double median(std::vector<double> v);

}  // namespace cleave::executor
