#include "executor/registry.hpp"

#include "executor/cpu/cpu_backend.hpp"

#if CLEAVE_HAVE_CUDA
#include "executor/cuda/cuda_module.hpp"

#include <cstdlib>
#include <dlfcn.h>
#include <filesystem>
#include <system_error>
#endif

namespace cleave::executor {

#if CLEAVE_HAVE_CUDA
namespace {

constexpr const char* module_file = "libcleave_cuda.so";

// Where the module may be, in order: $CLEAVE_CUDA_MODULE; beside the executable (the build
// tree); <prefix>/lib/cleave/ for an installed <prefix>/bin/cleave; the build tree's path (test
// programs in subfolders of the build).
std::vector<std::filesystem::path> module_candidates() {
    std::vector<std::filesystem::path> out;
    if (const char* env = std::getenv("CLEAVE_CUDA_MODULE"); env != nullptr && *env != '\0') {
        out.emplace_back(env);
        return out;
    }
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        out.push_back(exe.parent_path() / module_file);
        out.push_back(exe.parent_path().parent_path() / "lib" / "cleave" / module_file);
    }
    out.emplace_back(CLEAVE_CUDA_MODULE_BUILD_PATH);
    return out;
}

// Loads the module once per process (never unloaded: backends it created may outlive any
// caller) and returns its entry table. Throws ConfigError naming what is missing.
const CudaModuleApi& cuda_module() {
    static const CudaModuleApi* api = nullptr;
    if (api != nullptr) {
        return *api;
    }
    std::string tried;
    for (const auto& path : module_candidates()) {
        std::error_code ec;
        if (!std::filesystem::is_regular_file(path, ec)) {
            tried += (tried.empty() ? "" : ", ") + path.string();
            continue;
        }
        void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (handle == nullptr) {
            const char* why = dlerror();
            throw ConfigError(
                "--backend cuda: cannot load the CUDA backend module " + path.string() + ": " +
                (why != nullptr ? why : "unknown dlopen error") +
                ". It needs the NVIDIA driver (libcuda.so.1) and, from CUDA " CLEAVE_CUDA_VERSION
                ", the runtime (libcudart), cuBLAS (libcublas, libcublasLt) and NCCL (libnccl): "
                "install them, or add the folders holding them to LD_LIBRARY_PATH");
        }
        using Entry = const CudaModuleApi* (*)();
        auto* entry = reinterpret_cast<Entry>(dlsym(handle, cleave_cuda_module_symbol));
        const CudaModuleApi* found = entry != nullptr ? entry() : nullptr;
        if (found == nullptr || found->abi == nullptr ||
            std::string(found->abi) != CLEAVE_BACKEND_ABI || found->make == nullptr) {
            throw ConfigError("--backend cuda: " + path.string() +
                              " is a CUDA backend module from another build of cleave (its "
                              "Backend interface differs); use the libcleave_cuda.so built with "
                              "this cleave");
        }
        api = found;
        return *api;
    }
    throw ConfigError(std::string("--backend cuda: the CUDA backend module ") + module_file +
                      " was not found (looked for " + tried +
                      "); install it beside the cleave executable (it is built with "
                      "-DCLEAVE_ENABLE_CUDA=ON) or set CLEAVE_CUDA_MODULE to its path");
}

}  // namespace
#endif

std::vector<std::string> available_backends() {
#if CLEAVE_HAVE_CUDA
    return {"cpu", "cuda"};
#else
    return {"cpu"};
#endif
}

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options) {
    if (name == "cpu") {
        if (options.precision != GemmPrecision::fp32 || options.fused_attention) {
            throw ConfigError("--backend cpu computes in fp32 with unfused attention only (the "
                              "reference the CUDA backend is checked against): use --dtype fp32, "
                              "or --backend cuda for bf16 / fp16 and fused attention");
        }
        return make_cpu_backend(options);
    }
#if CLEAVE_HAVE_CUDA
    if (name == "cuda") {
        return cuda_module().make(options);
    }
#endif
    std::string list;
    for (const auto& b : available_backends()) {
        list += (list.empty() ? "" : ", ") + b;
    }
    throw ConfigError("--backend: '" + name +
                      "' is not compiled into this build (available: " + list +
                      (name == "cuda" ? "; rebuild with -DCLEAVE_ENABLE_CUDA=ON" : "") + ")");
}

}  // namespace cleave::executor
