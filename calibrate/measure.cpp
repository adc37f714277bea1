#include "calibrate/measure.hpp"

#include "core/errors.hpp"

#include <string>
#include <unistd.h>

#include <mpi.h>

namespace cleave::calibrate {

namespace {

void check(int rc, const char* what) {
    if (rc != MPI_SUCCESS) {
        throw BackendError(std::string("cleave calibrate: ") + what + " failed");
    }
}

int64_t ranks_on_this_host() {
    MPI_Comm local = MPI_COMM_NULL;
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local),
          "MPI_Comm_split_type");
    int n = 0;
    check(MPI_Comm_size(local, &n), "MPI_Comm_size");
    MPI_Comm_free(&local);
    // The profile describes one node design: take the most ranks any host runs.
    int most = 0;
    check(MPI_Allreduce(&n, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    return most;
}

std::string host_name() {
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    check(MPI_Get_processor_name(name, &len), "MPI_Get_processor_name");
    check(MPI_Bcast(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast");
    return std::string(name);
}

double physical_memory_B() {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGE_SIZE);
    double b = pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0;
    check(MPI_Bcast(&b, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Bcast");
    return b;
}

}  // namespace

Calibration measure(executor::Backend& be, const BenchOptions& options) {
    Calibration c;
    c.backend = be.name();
    c.device = be.device_name();
    c.host = host_name();
    c.ranks = be.world_size();
    c.ranks_per_host = ranks_on_this_host();
    c.host_memory_B = physical_memory_B();
    c.quick = options.quick;
    c.gemm = bench_gemm(be, options);
    c.memory = bench_memory(be, options);
    c.kernels = bench_kernels(be, options);
    c.collectives = bench_collectives(be, options);
    c.sync = bench_sync(be, options);
    return c;
}

Calibration
measure_compute(executor::Backend& be, const BenchOptions& options, const Calibration& base) {
    Calibration c = base;
    c.quick = options.quick;
    c.gemm = bench_gemm(be, options);
    c.memory = bench_memory(be, options);
    c.kernels = bench_kernels(be, options);
    return c;
}

}  // namespace cleave::calibrate
