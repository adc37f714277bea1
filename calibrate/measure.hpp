#pragma once
// The whole calibration of one machine: host facts (over MPI) and every microbenchmark.

#include "calibrate/microbench.hpp"
#include "calibrate/profile.hpp"
#include "executor/backend.hpp"

namespace cleave::calibrate {

/// Runs bench_gemm, bench_memory and bench_collectives and records the host: rank 0's host name,
/// ranks per host (MPI_Comm_split_type shared) and physical memory. Collective over
/// MPI_COMM_WORLD (all ranks call it); every rank returns the same values. Precondition: MPI is
/// initialised and `be` spans the world. Throws BackendError on a failed MPI call.
[[nodiscard]] Calibration measure(executor::Backend& be, const BenchOptions& options);

/// `base` with its compute side measured again: bench_gemm, bench_memory and bench_kernels (the
/// numbers that drift with the cores' speed on a shared machine); host facts and collectives
/// stay `base`'s. Collective over the world, like measure().
[[nodiscard]] Calibration
measure_compute(executor::Backend& be, const BenchOptions& options, const Calibration& base);

}  // namespace cleave::calibrate
