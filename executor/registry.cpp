#include "executor/registry.hpp"

#include "executor/cpu/cpu_backend.hpp"

#if CLEAVE_HAVE_CUDA
#include "executor/cuda/cuda_backend.hpp"
#endif

namespace cleave::executor {

std::vector<std::string> available_backends() {
#if CLEAVE_HAVE_CUDA
    return {"cpu", "cuda"};
#else
    return {"cpu"};
#endif
}

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options) {
    if (name == "cpu") {
        return make_cpu_backend(options);
    }
#if CLEAVE_HAVE_CUDA
    if (name == "cuda") {
        return make_cuda_backend(options);
    }
#endif
    std::string list;
    for (const auto& b : available_backends()) {
        list += (list.empty() ? "" : ", ") + b;
    }
    throw ConfigError("--backend: '" + name +
                      "' is not compiled into this build (available: " + list + ")");
}

}  // namespace cleave::executor
