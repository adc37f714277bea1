// The CUDA backend: construction, device binding, memory, copies and the dense/element-wise math
// (cuBLAS and the launchers of cuda_kernels.hpp). Communication is in cuda_comm.cpp, the
// transformer-specific ops in cuda_math.cpp.
#include "executor/cuda/cuda_backend.hpp"

#include "executor/cuda/cuda_backend_impl.hpp"
#include "executor/cuda/cuda_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <climits>

namespace cleave::executor {

CudaProbe probe_cuda_devices() {
    CudaProbe probe;
    int count = 0;
    const cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
        probe.message = std::string("no CUDA device: cudaGetDeviceCount returned ") +
                        cudaGetErrorName(rc) + " (" + cudaGetErrorString(rc) + ")";
        return probe;
    }
    if (count <= 0) {
        probe.message = "no CUDA device: cudaGetDeviceCount returned 0 devices";
        return probe;
    }
    probe.device_count = count;
    probe.message = std::to_string(count) + " CUDA device(s)";
    return probe;
}

std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options) {
    return std::make_unique<gpu::CudaBackend>(options);
}

}  // namespace cleave::executor

namespace cleave::executor::gpu {

namespace {

// cuBLAS workspace; NVIDIA recommends 32 MiB on Hopper (cuBLAS docs, cublasSetWorkspace).
constexpr size_t cublas_workspace_B = size_t{32} << 20;

size_t bytes_of(int64_t count) {
    return static_cast<size_t>(count) * sizeof(float);
}

void need(View v, int64_t n, const char* what) {
    CLEAVE_ASSERT(v.size >= n && (n == 0 || v.data != nullptr), what);
}

cublasOperation_t to_cublas(Trans t) {
    return t == Trans::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
}

}  // namespace

int blas_int(int64_t n) {
    if (n < 0 || n > INT_MAX) {
        throw BackendError("cuda backend: dimension " + std::to_string(n) +
                           " does not fit cuBLAS's int");
    }
    return static_cast<int>(n);
}

CudaBackend::CudaBackend(const BackendOptions& options)
    : groups_(options.timeout_s)
    , timeout_s_(options.timeout_s)
    , precision_(options.precision)
    , fused_attention_(options.fused_attention) {
    try {
        bind_device();
        CLEAVE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        CLEAVE_CUDA_CHECK(cudaEventCreateWithFlags(&sync_event_, cudaEventDisableTiming));
        CLEAVE_CUBLAS_CHECK(cublasCreate(&cublas_));
        CLEAVE_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
        // Plain fp32 (no TF32 tensor-op rounding), so fp32 results are comparable with the CPU
        // reference; bf16 / fp16 GEMMs ask for tensor cores through their compute type.
        CLEAVE_CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
        CLEAVE_CUDA_CHECK(cudaMalloc(&cublas_workspace_, cublas_workspace_B));
        CLEAVE_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_, cublas_workspace_B));
        CLEAVE_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool_, device_));
        // Keep freed blocks in the pool instead of returning them at every synchronisation.
        uint64_t keep_B = UINT64_MAX;
        CLEAVE_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep_B));
        CLEAVE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned_tag_),
                                         sizeof(float) * static_cast<size_t>(tag_slots)));
    } catch (...) {
        release();
        throw;
    }
}

CudaBackend::~CudaBackend() {
    release();
}

// Binds this rank to device (node-local rank % device count). The node-local rank comes from
// MPI_Comm_split_type(SHARED), which is right under mpirun and srun alike; environment variables
// such as SLURM_LOCALID are inherited unchanged by every rank of an mpirun started inside an
// allocation, and would put all ranks on device 0.
void CudaBackend::bind_device() {
    const CudaProbe probe = probe_cuda_devices();
    if (probe.device_count <= 0) {
        throw BackendError("cuda backend on rank " + std::to_string(groups_.world_rank()) + ": " +
                           probe.message);
    }
    device_count_ = probe.device_count;
    MPI_Comm node = MPI_COMM_NULL;
    CLEAVE_MPI_CHECK(MPI_Comm_split_type(
        MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, groups_.world_rank(), MPI_INFO_NULL, &node));
    int local_rank = 0;
    const int rc = MPI_Comm_rank(node, &local_rank);
    MPI_Comm_free(&node);
    CLEAVE_MPI_CHECK(rc);
    device_ = local_rank % device_count_;
    CLEAVE_CUDA_CHECK(cudaSetDevice(device_));
    cudaDeviceProp prop{};
    CLEAVE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    device_name_ = prop.name;
}

void CudaBackend::release() noexcept {
    // Communicators first: destroyed when all work is done, aborted when something is stuck (a
    // failed run), so that teardown never waits for a peer that is gone.
    bool idle = !aborted_ && (stream_ == nullptr || cudaStreamQuery(stream_) == cudaSuccess);
    for (const auto& s : sends_) {
        idle = idle && cudaEventQuery(s.done) == cudaSuccess;
    }
    idle = idle && (dp_stream_ == nullptr || cudaStreamQuery(dp_stream_) == cudaSuccess);
    for (const auto& r : posted_) {
        idle = idle && cudaEventQuery(r.done) == cudaSuccess;
    }
    const auto close = [idle](ncclComm_t& comm) {
        if (comm == nullptr) {
            return;
        }
        if (idle) {
            CLEAVE_NCCL_CHECK_NOEXCEPT(ncclCommDestroy(comm));
        } else {
            (void)ncclCommAbort(comm);  // best effort: the run has already failed
        }
        comm = nullptr;
    };
    for (auto& cg : comms_) {
        close(cg.async_comm);
        close(cg.comm);
        for (auto& ch : cg.channels) {
            close(ch.comm);
            if (ch.stream != nullptr) {
                CLEAVE_CUDA_CHECK_NOEXCEPT(cudaStreamDestroy(ch.stream));
            }
        }
        for (auto& m : cg.to_self) {
            CLEAVE_CUDA_CHECK_NOEXCEPT(cudaFreeAsync(m.staged, stream_));
        }
    }
    comms_.clear();
    for (auto& s : sends_) {
        CLEAVE_CUDA_CHECK_NOEXCEPT(cudaEventDestroy(s.done));
    }
    sends_.clear();
    release_posted();
    release_async();
    if (dp_stream_ != nullptr) {
        CLEAVE_CUDA_CHECK_NOEXCEPT(cudaStreamDestroy(dp_stream_));
        dp_stream_ = nullptr;
    }
    for (auto& [ptr, bytes] : allocations_) {
        CLEAVE_CUDA_CHECK_NOEXCEPT(cudaFreeAsync(const_cast<float*>(ptr), stream_));
    }
    allocations_.clear();
    packed_.clear();
    if (cublas_ != nullptr) {
        CLEAVE_CUBLAS_CHECK_NOEXCEPT(cublasDestroy(cublas_));
    }
    if (cublas_workspace_ != nullptr) {
        CLEAVE_CUDA_CHECK_NOEXCEPT(cudaFree(cublas_workspace_));
    }
    if (pinned_tag_ != nullptr) {
        CLEAVE_CUDA_CHECK_NOEXCEPT(cudaFreeHost(pinned_tag_));
    }
    if (sync_event_ != nullptr) {
        CLEAVE_CUDA_CHECK_NOEXCEPT(cudaEventDestroy(sync_event_));
    }
    if (stream_ != nullptr) {
        CLEAVE_CUDA_CHECK_NOEXCEPT(cudaStreamDestroy(stream_));
    }
    cublas_ = nullptr;
    cublas_workspace_ = nullptr;
    pinned_tag_ = nullptr;
    sync_event_ = nullptr;
    stream_ = nullptr;
}

// ---- memory --------------------------------------------------------------------------------

float* CudaBackend::tracked_alloc(int64_t bytes) {
    void* p = nullptr;
    const cudaError_t rc = cudaMallocAsync(&p, static_cast<size_t>(bytes), stream_);
    if (rc == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();  // allocation failures are not sticky; clear the record
        throw BackendError("cuda backend: out of device memory allocating " +
                           std::to_string(bytes) + " bytes on device " + std::to_string(device_) +
                           " (" + std::to_string(in_use_B_) + " bytes in use by cleave)");
    }
    if (rc != cudaSuccess) {
        throw BackendError(cuda_error_message(rc, "cudaMallocAsync", __FILE__, __LINE__));
    }
    auto* f = static_cast<float*>(p);
    allocations_.emplace(f, bytes);
    in_use_B_ += bytes;
    peak_B_ = std::max(peak_B_, in_use_B_);
    return f;
}

View CudaBackend::alloc(int64_t count) {
    CLEAVE_ASSERT(count >= 0, "alloc: negative count");
    if (count == 0) {
        return {};
    }
    float* f = tracked_alloc(static_cast<int64_t>(bytes_of(count)));
    CLEAVE_CUDA_CHECK(cudaMemsetAsync(f, 0, bytes_of(count), stream_));
    return {f, count};
}

void CudaBackend::free(View v) {
    if (v.data == nullptr) {
        return;
    }
    auto it = allocations_.find(v.data);
    CLEAVE_ASSERT(it != allocations_.end(), "free: not a view returned by alloc()");
    in_use_B_ -= it->second;
    allocations_.erase(it);
    packed_.erase(v.data);
    CLEAVE_CUDA_CHECK_NOEXCEPT(cudaFreeAsync(v.data, stream_));
}

// Issue 17: saved activations in the GEMMs' 16-bit type between forward and backward (what the
// cost model prices: activation_bytes() = 2 for bf16 / fp16 jobs). Stream-ordered on the
// compute stream, like every kernel that produced or will read the tensor.
View CudaBackend::pack_activation(View x) {
    if (precision_ == GemmPrecision::fp32 || x.data == nullptr || packed_.count(x.data) == 1) {
        return x;
    }
    const auto it = allocations_.find(x.data);
    CLEAVE_ASSERT(it != allocations_.end() && it->second == static_cast<int64_t>(bytes_of(x.size)),
                  "pack_activation: not a whole fp32 allocation");
    float* p = tracked_alloc(x.size * 2);
    const bool fp16 = precision_ == GemmPrecision::fp16;
    packed_.insert(p);
    CLEAVE_CUDA_CHECK(launch_pack16(x.data, p, x.size, fp16, stream_));
    free(x);
    return {p, x.size};
}

View CudaBackend::unpack_activation(View x) {
    if (x.data == nullptr || packed_.count(x.data) == 0) {
        return x;
    }
    float* f = tracked_alloc(static_cast<int64_t>(bytes_of(x.size)));
    const bool fp16 = precision_ == GemmPrecision::fp16;
    CLEAVE_CUDA_CHECK(launch_unpack16(x.data, f, x.size, fp16, stream_));
    free(x);
    return {f, x.size};
}

int64_t CudaBackend::peak_bytes() const {
    uint64_t pool_high_B = 0;
    CLEAVE_CUDA_CHECK(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &pool_high_B));
    return std::max(peak_B_, static_cast<int64_t>(pool_high_B));
}

void CudaBackend::reset_peak() {
    peak_B_ = in_use_B_;
    uint64_t zero = 0;  // the pool's high-water mark can only be reset to zero
    CLEAVE_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &zero));
}

void* CudaBackend::temp_alloc(int64_t bytes) {
    void* p = nullptr;
    CLEAVE_CUDA_CHECK(
        cudaMallocAsync(&p, static_cast<size_t>(std::max<int64_t>(bytes, 4)), stream_));
    return p;
}

void CudaBackend::temp_free(void* p) {
    CLEAVE_CUDA_CHECK(cudaFreeAsync(p, stream_));
}

int32_t* CudaBackend::upload_ints(std::span<const int32_t> src) {
    const auto bytes = static_cast<int64_t>(src.size_bytes());
    auto* d = static_cast<int32_t*>(temp_alloc(bytes));
    if (bytes > 0) {
        CLEAVE_CUDA_CHECK(cudaMemcpyAsync(
            d, src.data(), static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream_));
        // The caller's host memory may change once we return.
        wait_compute({Group{}, "upload of host indices", ""});
    }
    return d;
}

void CudaBackend::upload(View dst, std::span<const float> src) {
    CLEAVE_ASSERT(static_cast<int64_t>(src.size()) == dst.size, "upload: size mismatch");
    if (src.empty()) {
        return;
    }
    CLEAVE_CUDA_CHECK(
        cudaMemcpyAsync(dst.data, src.data(), src.size_bytes(), cudaMemcpyHostToDevice, stream_));
    wait_compute({Group{}, "upload", std::to_string(src.size()) + " floats"});
}

void CudaBackend::download(std::span<float> dst, View src) {
    CLEAVE_ASSERT(static_cast<int64_t>(dst.size()) == src.size, "download: size mismatch");
    if (dst.empty()) {
        return;
    }
    // Wait (bounded) for the work that produces src before the copy, which blocks the host.
    wait_compute({Group{}, "download", std::to_string(dst.size()) + " floats"});
    CLEAVE_CUDA_CHECK(
        cudaMemcpyAsync(dst.data(), src.data, dst.size_bytes(), cudaMemcpyDeviceToHost, stream_));
    wait_compute({Group{}, "download", std::to_string(dst.size()) + " floats"});
}

void CudaBackend::copy(View dst, View src) {
    CLEAVE_ASSERT(dst.size == src.size, "copy: size mismatch");
    if (src.size == 0) {
        return;
    }
    CLEAVE_CUDA_CHECK(
        cudaMemcpyAsync(dst.data, src.data, bytes_of(src.size), cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::fill(View x, float value) {
    if (x.size == 0) {
        return;
    }
    if (value == 0.0f && !std::signbit(value)) {
        CLEAVE_CUDA_CHECK(cudaMemsetAsync(x.data, 0, bytes_of(x.size), stream_));
        return;
    }
    CLEAVE_CUDA_CHECK(launch_fill(x.data, x.size, value, stream_));
}

// ---- dense math ----------------------------------------------------------------------------

void CudaBackend::gemm(Trans ta,
                       Trans tb,
                       int64_t m,
                       int64_t n,
                       int64_t k,
                       float alpha,
                       View a,
                       View b,
                       float beta,
                       View c) {
    need(a, m * k, "gemm: A too small");
    need(b, k * n, "gemm: B too small");
    need(c, m * n, "gemm: C too small");
    const MatrixArg ma{a.data, ta == Trans::yes ? m : k, 0};
    const MatrixArg mb{b.data, tb == Trans::yes ? k : n, 0};
    const MatrixArg mc{c.data, n, 0};
    gemm_batched(ta, tb, m, n, k, alpha, ma, mb, beta, mc, 1);
}

// cuBLAS is column-major, and a row-major matrix is the column-major view of its transpose. So
// row-major C = op(A) op(B) is computed as column-major C^T = op(B)^T op(A)^T: the operands
// swap places, m and n swap, and each keeps its own transpose flag and leading dimension.
void CudaBackend::gemm_batched(Trans ta,
                               Trans tb,
                               int64_t m,
                               int64_t n,
                               int64_t k,
                               float alpha,
                               MatrixArg a,
                               MatrixArg b,
                               float beta,
                               MatrixArg c,
                               int64_t count) {
    if (m == 0 || n == 0 || count == 0) {
        return;
    }
    const int lda = blas_int(std::max<int64_t>(a.ld, 1));
    const int ldb = blas_int(std::max<int64_t>(b.ld, 1));
    const int ldc = blas_int(std::max<int64_t>(c.ld, 1));
    if (precision_ != GemmPrecision::fp32) {
        gemm_tensor_cores(ta, tb, {m, n, k}, alpha, {a, b, c}, {lda, ldb, ldc}, beta, count);
        return;
    }
    if (count == 1) {
        CLEAVE_CUBLAS_CHECK(cublasSgemm(cublas_,
                                        to_cublas(tb),
                                        to_cublas(ta),
                                        blas_int(n),
                                        blas_int(m),
                                        blas_int(k),
                                        &alpha,
                                        b.ptr,
                                        ldb,
                                        a.ptr,
                                        lda,
                                        &beta,
                                        c.ptr,
                                        ldc));
        return;
    }
    CLEAVE_CUBLAS_CHECK(cublasSgemmStridedBatched(cublas_,
                                                  to_cublas(tb),
                                                  to_cublas(ta),
                                                  blas_int(n),
                                                  blas_int(m),
                                                  blas_int(k),
                                                  &alpha,
                                                  b.ptr,
                                                  ldb,
                                                  b.stride,
                                                  a.ptr,
                                                  lda,
                                                  a.stride,
                                                  &beta,
                                                  c.ptr,
                                                  ldc,
                                                  c.stride,
                                                  blas_int(count)));
}

// bf16 / fp16 on tensor cores: cublasGemmEx with fp32 operands in memory and the compute type
// CUBLAS_COMPUTE_32F_FAST_16BF (_16F): cuBLAS rounds the operands to bf16 (fp16) and multiplies
// them on tensor cores with fp32 accumulation and an fp32 result (cuBLAS docs, cublasGemmEx,
// "cublasComputeType_t"). Same operand swap as gemm_batched.
void CudaBackend::gemm_tensor_cores(Trans ta,
                                    Trans tb,
                                    std::array<int64_t, 3> mnk,
                                    float alpha,
                                    std::array<MatrixArg, 3> abc,
                                    std::array<int, 3> ld,
                                    float beta,
                                    int64_t count) {
    const cublasComputeType_t compute = precision_ == GemmPrecision::bf16
                                            ? CUBLAS_COMPUTE_32F_FAST_16BF
                                            : CUBLAS_COMPUTE_32F_FAST_16F;
    const auto [m, n, k] = mnk;
    const auto& [a, b, c] = abc;
    if (count == 1) {
        CLEAVE_CUBLAS_CHECK(cublasGemmEx(cublas_,
                                         to_cublas(tb),
                                         to_cublas(ta),
                                         blas_int(n),
                                         blas_int(m),
                                         blas_int(k),
                                         &alpha,
                                         b.ptr,
                                         CUDA_R_32F,
                                         ld[1],
                                         a.ptr,
                                         CUDA_R_32F,
                                         ld[0],
                                         &beta,
                                         c.ptr,
                                         CUDA_R_32F,
                                         ld[2],
                                         compute,
                                         CUBLAS_GEMM_DEFAULT));
        return;
    }
    CLEAVE_CUBLAS_CHECK(cublasGemmStridedBatchedEx(cublas_,
                                                   to_cublas(tb),
                                                   to_cublas(ta),
                                                   blas_int(n),
                                                   blas_int(m),
                                                   blas_int(k),
                                                   &alpha,
                                                   b.ptr,
                                                   CUDA_R_32F,
                                                   ld[1],
                                                   b.stride,
                                                   a.ptr,
                                                   CUDA_R_32F,
                                                   ld[0],
                                                   a.stride,
                                                   &beta,
                                                   c.ptr,
                                                   CUDA_R_32F,
                                                   ld[2],
                                                   c.stride,
                                                   blas_int(count),
                                                   compute,
                                                   CUBLAS_GEMM_DEFAULT));
}

void CudaBackend::axpy(float alpha, View x, View y) {
    CLEAVE_ASSERT(x.size == y.size, "axpy: size mismatch");
    CLEAVE_CUDA_CHECK(launch_axpy(alpha, x.data, y.data, x.size, stream_));
}

void CudaBackend::scale(View x, float alpha) {
    CLEAVE_CUDA_CHECK(launch_scale(x.data, x.size, alpha, stream_));
}

void CudaBackend::add_bias(View x, int64_t rows, int64_t cols, View bias) {
    need(x, rows * cols, "add_bias: x too small");
    need(bias, cols, "add_bias: bias too small");
    CLEAVE_CUDA_CHECK(launch_add_bias(x.data, rows, cols, bias.data, stream_));
}

void CudaBackend::bias_grad(View dy, int64_t rows, int64_t cols, View dbias) {
    need(dy, rows * cols, "bias_grad: dy too small");
    need(dbias, cols, "bias_grad: dbias too small");
    CLEAVE_CUDA_CHECK(launch_col_sum(dy.data, rows, cols, dbias.data, stream_));
}

}  // namespace cleave::executor::gpu
