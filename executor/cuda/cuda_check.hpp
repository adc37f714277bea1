#pragma once
// The one checking macro family for CUDA, cuBLAS and NCCL calls (STYLE S4.3). A failed call
// throws BackendError whose message holds the stringified call, file:line, the library's error
// string and the current device (and, for NCCL, ncclGetLastError). The _NOEXCEPT variants are for
// destructors and Backend::free(): they print the same message to stderr and std::terminate().

#include "core/errors.hpp"

#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

namespace cleave::executor::gpu {

[[nodiscard]] std::string
cuda_error_message(cudaError_t rc, const char* call, const char* file, int line);
[[nodiscard]] std::string
cublas_error_message(cublasStatus_t rc, const char* call, const char* file, int line);
[[nodiscard]] std::string
nccl_error_message(ncclResult_t rc, const char* call, const char* file, int line);

/// Prints `message` to stderr and calls std::terminate (for the _NOEXCEPT variants).
[[noreturn]] void terminate_with(const std::string& message) noexcept;

}  // namespace cleave::executor::gpu

#define CLEAVE_GPU_CHECK_IMPL_(type, ok, call, describe, fail)                                     \
    do {                                                                                           \
        const type cleave_rc_ = (call);                                                            \
        if (cleave_rc_ != (ok)) {                                                                  \
            fail(::cleave::executor::gpu::describe(cleave_rc_, #call, __FILE__, __LINE__));        \
        }                                                                                          \
    } while (0)

#define CLEAVE_GPU_THROW_(msg) throw ::cleave::BackendError(msg)
#define CLEAVE_GPU_TERMINATE_(msg) ::cleave::executor::gpu::terminate_with(msg)

#define CLEAVE_CUDA_CHECK(call)                                                                    \
    CLEAVE_GPU_CHECK_IMPL_(cudaError_t, cudaSuccess, call, cuda_error_message, CLEAVE_GPU_THROW_)
#define CLEAVE_CUDA_CHECK_NOEXCEPT(call)                                                           \
    CLEAVE_GPU_CHECK_IMPL_(                                                                        \
        cudaError_t, cudaSuccess, call, cuda_error_message, CLEAVE_GPU_TERMINATE_)
#define CLEAVE_CUBLAS_CHECK(call)                                                                  \
    CLEAVE_GPU_CHECK_IMPL_(                                                                        \
        cublasStatus_t, CUBLAS_STATUS_SUCCESS, call, cublas_error_message, CLEAVE_GPU_THROW_)
#define CLEAVE_CUBLAS_CHECK_NOEXCEPT(call)                                                         \
    CLEAVE_GPU_CHECK_IMPL_(                                                                        \
        cublasStatus_t, CUBLAS_STATUS_SUCCESS, call, cublas_error_message, CLEAVE_GPU_TERMINATE_)
#define CLEAVE_NCCL_CHECK(call)                                                                    \
    CLEAVE_GPU_CHECK_IMPL_(ncclResult_t, ncclSuccess, call, nccl_error_message, CLEAVE_GPU_THROW_)
#define CLEAVE_NCCL_CHECK_NOEXCEPT(call)                                                           \
    CLEAVE_GPU_CHECK_IMPL_(                                                                        \
        ncclResult_t, ncclSuccess, call, nccl_error_message, CLEAVE_GPU_TERMINATE_)
