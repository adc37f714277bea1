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

/// Median of `v` (mean of the two middle values for an even count; 0 when empty).
[[nodiscard]] double median(std::vector<double> v);

}  // namespace cleave::executor
