#pragma once
// Backend selection by name (STYLE S5.4). registry.cpp holds the only `#if CLEAVE_HAVE_CUDA`.
// The CUDA backend is a shared module (libcleave_cuda.so) loaded on first use (issue 18).

#include "executor/backend.hpp"

#include <memory>
#include <string>
#include <vector>

namespace cleave::executor {

/// Names of the backends compiled into this build, in preference order ("cpu", then "cuda" when
/// built with CLEAVE_ENABLE_CUDA).
[[nodiscard]] std::vector<std::string> available_backends();

/// Creates the backend called `name`. Precondition: MPI is initialised. Throws ConfigError when
/// `name` is not compiled in (the message lists the available ones) or when the CUDA module
/// cannot be found or loaded (the message names what to install), BackendError when the backend
/// cannot start (no device, NCCL failure). "cuda" looks for the module in $CLEAVE_CUDA_MODULE,
/// else beside the executable, in ../lib/cleave/, then in the build tree.
[[nodiscard]] std::unique_ptr<Backend> make_backend(const std::string& name,
                                                    const BackendOptions& options);

}  // namespace cleave::executor
