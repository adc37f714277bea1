#include "executor/cuda/cuda_check.hpp"

#include <cstdio>
#include <exception>
#include <sstream>

namespace cleave::executor::gpu {

namespace {

// The device the failing call ran on; queried without the macros (a failure here must not
// recurse) and reported as "unknown" when even that fails.
std::string current_device() {
    int device = -1;
    if (cudaGetDevice(&device) != cudaSuccess) {
        return "unknown";
    }
    return std::to_string(device);
}

std::string describe(
    const char* library, const char* call, const char* file, int line, const std::string& error) {
    std::ostringstream os;
    os << library << " call `" << call << "` failed at " << file << ":" << line << ": " << error
       << " (device " << current_device() << ")";
    return os.str();
}

}  // namespace

std::string cuda_error_message(cudaError_t rc, const char* call, const char* file, int line) {
    return describe("CUDA",
                    call,
                    file,
                    line,
                    std::string(cudaGetErrorName(rc)) + ": " + cudaGetErrorString(rc));
}

std::string cublas_error_message(cublasStatus_t rc, const char* call, const char* file, int line) {
    return describe("cuBLAS",
                    call,
                    file,
                    line,
                    std::string(cublasGetStatusName(rc)) + ": " + cublasGetStatusString(rc));
}

std::string nccl_error_message(ncclResult_t rc, const char* call, const char* file, int line) {
    // ncclGetLastError's comm argument is unused by NCCL (documented); the text may describe an
    // earlier asynchronous failure, which is still the best clue available.
    const char* last = ncclGetLastError(nullptr);
    return describe("NCCL",
                    call,
                    file,
                    line,
                    std::string(ncclGetErrorString(rc)) +
                        (last != nullptr && *last != '\0'
                             ? std::string("; last NCCL error: ") + last
                             : std::string()));
}

void terminate_with(const std::string& message) noexcept {
    std::fprintf(stderr, "cleave: fatal error in a destructor: %s\n", message.c_str());
    std::fflush(stderr);
    std::terminate();
}

}  // namespace cleave::executor::gpu
