#pragma once
// Backend selection by name (STYLE S5.4). registry.cpp holds the only `#if CLEAVE_HAVE_CUDA`.

#include "executor/backend.hpp"

#include <memory>
#include <string>
#include <vector>

namespace cleave::executor {

/// Names of the backends compiled into this build, in preference order ("cpu", then "cuda" when
/// built with CLEAVE_ENABLE_CUDA).
[[nodiscard]] std::vector<std::string> available_backends();

/// Creates the backend called `name`. Precondition: MPI is initialised. Throws ConfigError when
/// `name` is not compiled in (the message lists the available ones), BackendError when the
/// backend cannot start (no device, NCCL failure).
[[nodiscard]] std::unique_ptr<Backend> make_backend(const std::string& name,
                                                    const BackendOptions& options);

}  // namespace cleave::executor
