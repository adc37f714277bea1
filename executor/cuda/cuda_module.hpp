#pragma once
// The CUDA backend as a module (issue 18): libcleave_cuda.so holds the backend and links cudart,
// cuBLAS and NCCL; the cleave executable does not, so commands that do not run on a GPU start
// without loading them and run where they are absent. executor/registry.cpp dlopen()s the module
// when `--backend cuda` asks for it and reaches it through the one C symbol below. This header
// includes no CUDA header.

#include "executor/backend.hpp"

#include <memory>

namespace cleave::executor {

/// What the module exports. `abi` must equal the loader's CLEAVE_BACKEND_ABI (a hash of
/// executor/backend.hpp taken at configure time, the same for the module and the executable of
/// one build), so a module from another build is refused instead of misread.
struct CudaModuleApi {
    const char* abi = nullptr;
    /// make_cuda_backend() (cuda_backend.hpp); throws as it does.
    std::unique_ptr<Backend> (*make)(const BackendOptions& options) = nullptr;
};

}  // namespace cleave::executor

/// The module's one entry point, looked up with dlsym.
extern "C" const cleave::executor::CudaModuleApi* cleave_cuda_module_api();

/// dlsym name of the entry point.
inline constexpr const char* cleave_cuda_module_symbol = "cleave_cuda_module_api";
