// The module's entry point (cuda_module.hpp).
#include "executor/cuda/cuda_module.hpp"

#include "executor/cuda/cuda_backend.hpp"

extern "C" const cleave::executor::CudaModuleApi* cleave_cuda_module_api() {
    static const cleave::executor::CudaModuleApi api{CLEAVE_BACKEND_ABI,
                                                     &cleave::executor::make_cuda_backend};
    return &api;
}
