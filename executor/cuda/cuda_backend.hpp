#pragma once
// Entry points of the CUDA backend (STYLE S5.3). This header includes no CUDA header, so that
// executor/registry.cpp and the tests can name the backend without the toolkit's headers.

#include "executor/backend.hpp"

#include <memory>
#include <string>

namespace cleave::executor {

/// Creates the CUDA backend: binds this rank to device (node-local rank % device count), creates
/// its stream, cuBLAS handle and memory pool. Precondition: MPI is initialised. Throws
/// BackendError when no device is usable ("no CUDA device: cudaGetDeviceCount returned ...") or
/// when CUDA / cuBLAS setup fails.
[[nodiscard]] std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options);

/// What cudaGetDeviceCount reports, without creating a backend or needing MPI.
struct CudaProbe {
    int device_count = 0;  // 0 when the call failed
    std::string message;   // "2 CUDA device(s)" or why none is usable
};

/// Probes the CUDA runtime; a CUDA failure is reported in the result, not thrown. Tests use it
/// to skip when no device is usable.
[[nodiscard]] CudaProbe probe_cuda_devices();

}  // namespace cleave::executor
