// Element-wise kernels: grid-stride loops over 64-bit indices, one element per iteration, the
// same float formulas as the CPU backend (executor/cpu/cpu_kernels.cpp).
#include "executor/cuda/cuda_kernels.hpp"

#include <algorithm>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace cleave::executor::gpu {

namespace {

constexpr int block_threads = 256;
constexpr int64_t max_blocks = 4096;

// sqrt(2/pi) and the cubic coefficient of the tanh GeLU (Hendrycks & Gimpel 2016, eq. 2).
constexpr float gelu_c = 0.7978845608028654f;
constexpr float gelu_a = 0.044715f;

unsigned blocks_for(int64_t n) {
    const int64_t b = (n + block_threads - 1) / block_threads;
    return static_cast<unsigned>(std::clamp<int64_t>(b, 1, max_blocks));
}

__device__ int64_t first_index() {
    return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ int64_t grid_stride() {
    return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

__device__ float sigmoid(float x) {
    return 1.0f / (1.0f + expf(-x));
}

__global__ void fill_kernel(float* x, int64_t n, float value) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        x[i] = value;
    }
}

__global__ void axpy_kernel(float alpha, const float* x, float* y, int64_t n) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        y[i] += alpha * x[i];
    }
}

__global__ void scale_kernel(float* x, int64_t n, float alpha) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        x[i] *= alpha;
    }
}

__global__ void add_bias_kernel(float* x, int64_t rows, int64_t cols, const float* bias) {
    for (int64_t i = first_index(); i < rows * cols; i += grid_stride()) {
        x[i] += bias[i % cols];
    }
}

__global__ void col_sum_kernel(const float* x, int64_t rows, int64_t cols, float* out) {
    for (int64_t c = first_index(); c < cols; c += grid_stride()) {
        float s = 0.0f;
        for (int64_t r = 0; r < rows; ++r) {
            s += x[r * cols + c];
        }
        out[c] += s;
    }
}

template <class H>
__device__ H to_16(float v);

template <>
__device__ __nv_bfloat16 to_16<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}

template <>
__device__ __half to_16<__half>(float v) {
    return __float2half_rn(v);
}

__device__ float from_16(__nv_bfloat16 v) {
    return __bfloat162float(v);
}

__device__ float from_16(__half v) {
    return __half2float(v);
}

template <class H>
__global__ void pack16_kernel(const float* x, H* y, int64_t n) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        y[i] = to_16<H>(x[i]);
    }
}

template <class H>
__global__ void unpack16_kernel(const H* x, float* y, int64_t n) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        y[i] = from_16(x[i]);
    }
}

__global__ void gelu_fwd_kernel(const float* x, float* y, int64_t n) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(gelu_c * (v + gelu_a * v * v * v)));
    }
}

__global__ void gelu_bwd_kernel(const float* x, const float* dy, float* dx, int64_t n) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        const float v = x[i];
        const float t = tanhf(gelu_c * (v + gelu_a * v * v * v));
        const float d =
            0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * gelu_c * (1.0f + 3.0f * gelu_a * v * v);
        dx[i] = dy[i] * d;
    }
}

__global__ void swiglu_fwd_kernel(const float* gate, const float* up, float* y, int64_t n) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        const float g = gate[i];
        y[i] = g * sigmoid(g) * up[i];
    }
}

__global__ void swiglu_bwd_kernel(
    const float* gate, const float* up, const float* dy, float* dgate, float* dup, int64_t n) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        const float g = gate[i];
        const float s = sigmoid(g);
        const float d = dy[i];
        const float u = up[i];
        dup[i] = d * g * s;
        dgate[i] = d * u * s * (1.0f + g * (1.0f - s));
    }
}

__global__ void adam_kernel(float* w, const float* g, float* m, float* v, int64_t n, AdamArgs a) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        const float gi = g[i];
        const float mi = a.beta1 * m[i] + (1.0f - a.beta1) * gi;
        const float vi = a.beta2 * v[i] + (1.0f - a.beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        const float mhat = mi / a.c1;
        const float vhat = vi / a.c2;
        w[i] -= a.lr * (mhat / (sqrtf(vhat) + a.eps) + a.weight_decay * w[i]);
    }
}

__global__ void embedding_fwd_kernel(
    const int32_t* ids, int64_t n, const float* table, TableSlice s, float* out, bool accumulate) {
    for (int64_t i = first_index(); i < n * s.cols; i += grid_stride()) {
        const int64_t token = i / s.cols;
        const int64_t c = i % s.cols;
        const int64_t row = ids[token] - s.row_begin;
        if (row < 0 || row >= s.rows) {
            if (!accumulate) {
                out[i] = 0.0f;
            }
            continue;
        }
        const float t = table[row * s.cols + c];
        out[i] = accumulate ? out[i] + t : t;
    }
}

__global__ void
embedding_bwd_kernel(const int32_t* ids, int64_t n, const float* dy, TableSlice s, float* dtable) {
    for (int64_t i = first_index(); i < n * s.cols; i += grid_stride()) {
        const int64_t row = ids[i / s.cols] - s.row_begin;
        if (row >= 0 && row < s.rows) {
            atomicAdd(dtable + row * s.cols + i % s.cols, dy[i]);
        }
    }
}

// One thread per rotated pair (row, head, i); the angle in double as on the CPU.
__global__ void rope_kernel(float* x, RopeShape sh, double sign) {
    const int64_t half = sh.head_dim / 2;
    const int64_t pairs = sh.seq * sh.batch * sh.heads * half;
    for (int64_t p = first_index(); p < pairs; p += grid_stride()) {
        const int64_t i = p % half;
        const int64_t rh = p / half;  // row * heads + head
        const int64_t row = rh / sh.heads;
        const auto pos = static_cast<double>(sh.first_pos + row / sh.batch);
        // RoFormer (Su et al. 2021, eq. 34): theta_i = 10000^(-2i/d).
        const double theta =
            pos * pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(sh.head_dim));
        const auto c = static_cast<float>(cos(theta));
        const auto s = static_cast<float>(sign * sin(theta));
        float* q = x + rh * sh.head_dim + 2 * i;
        const float x0 = q[0];
        const float x1 = q[1];
        q[0] = x0 * c - x1 * s;
        q[1] = x0 * s + x1 * c;
    }
}

}  // namespace

cudaError_t launch_pack16(const float* x, void* y, int64_t n, bool fp16, cudaStream_t stream) {
    if (n <= 0) {
        return cudaGetLastError();
    }
    if (fp16) {
        pack16_kernel<<<blocks_for(n), block_threads, 0, stream>>>(x, static_cast<__half*>(y), n);
    } else {
        pack16_kernel<<<blocks_for(n), block_threads, 0, stream>>>(
            x, static_cast<__nv_bfloat16*>(y), n);
    }
    return cudaGetLastError();
}

cudaError_t launch_unpack16(const void* x, float* y, int64_t n, bool fp16, cudaStream_t stream) {
    if (n <= 0) {
        return cudaGetLastError();
    }
    if (fp16) {
        unpack16_kernel<<<blocks_for(n), block_threads, 0, stream>>>(
            static_cast<const __half*>(x), y, n);
    } else {
        unpack16_kernel<<<blocks_for(n), block_threads, 0, stream>>>(
            static_cast<const __nv_bfloat16*>(x), y, n);
    }
    return cudaGetLastError();
}

cudaError_t launch_fill(float* x, int64_t n, float value, cudaStream_t stream) {
    fill_kernel<<<blocks_for(n), block_threads, 0, stream>>>(x, n, value);
    return cudaGetLastError();
}

cudaError_t launch_axpy(float alpha, const float* x, float* y, int64_t n, cudaStream_t stream) {
    axpy_kernel<<<blocks_for(n), block_threads, 0, stream>>>(alpha, x, y, n);
    return cudaGetLastError();
}

cudaError_t launch_scale(float* x, int64_t n, float alpha, cudaStream_t stream) {
    scale_kernel<<<blocks_for(n), block_threads, 0, stream>>>(x, n, alpha);
    return cudaGetLastError();
}

cudaError_t
launch_add_bias(float* x, int64_t rows, int64_t cols, const float* bias, cudaStream_t stream) {
    add_bias_kernel<<<blocks_for(rows * cols), block_threads, 0, stream>>>(x, rows, cols, bias);
    return cudaGetLastError();
}

cudaError_t
launch_col_sum(const float* x, int64_t rows, int64_t cols, float* out, cudaStream_t stream) {
    col_sum_kernel<<<blocks_for(cols), block_threads, 0, stream>>>(x, rows, cols, out);
    return cudaGetLastError();
}

cudaError_t launch_gelu_fwd(const float* x, float* y, int64_t n, cudaStream_t stream) {
    gelu_fwd_kernel<<<blocks_for(n), block_threads, 0, stream>>>(x, y, n);
    return cudaGetLastError();
}

cudaError_t
launch_gelu_bwd(const float* x, const float* dy, float* dx, int64_t n, cudaStream_t stream) {
    gelu_bwd_kernel<<<blocks_for(n), block_threads, 0, stream>>>(x, dy, dx, n);
    return cudaGetLastError();
}

cudaError_t
launch_swiglu_fwd(const float* gate, const float* up, float* y, int64_t n, cudaStream_t stream) {
    swiglu_fwd_kernel<<<blocks_for(n), block_threads, 0, stream>>>(gate, up, y, n);
    return cudaGetLastError();
}

cudaError_t launch_swiglu_bwd(const float* gate,
                              const float* up,
                              const float* dy,
                              float* dgate,
                              float* dup,
                              int64_t n,
                              cudaStream_t stream) {
    swiglu_bwd_kernel<<<blocks_for(n), block_threads, 0, stream>>>(gate, up, dy, dgate, dup, n);
    return cudaGetLastError();
}

cudaError_t launch_adam(
    float* w, const float* g, float* m, float* v, int64_t n, AdamArgs a, cudaStream_t stream) {
    adam_kernel<<<blocks_for(n), block_threads, 0, stream>>>(w, g, m, v, n, a);
    return cudaGetLastError();
}

cudaError_t launch_embedding_fwd(const int32_t* ids,
                                 int64_t n,
                                 const float* table,
                                 TableSlice slice,
                                 float* out,
                                 bool accumulate,
                                 cudaStream_t stream) {
    embedding_fwd_kernel<<<blocks_for(n * slice.cols), block_threads, 0, stream>>>(
        ids, n, table, slice, out, accumulate);
    return cudaGetLastError();
}

cudaError_t launch_embedding_bwd(const int32_t* ids,
                                 int64_t n,
                                 const float* dy,
                                 TableSlice slice,
                                 float* dtable,
                                 cudaStream_t stream) {
    embedding_bwd_kernel<<<blocks_for(n * slice.cols), block_threads, 0, stream>>>(
        ids, n, dy, slice, dtable);
    return cudaGetLastError();
}

cudaError_t launch_rope(float* x, RopeShape shape, bool inverse, cudaStream_t stream) {
    const int64_t pairs = shape.seq * shape.batch * shape.heads * (shape.head_dim / 2);
    rope_kernel<<<blocks_for(pairs), block_threads, 0, stream>>>(x, shape, inverse ? -1.0 : 1.0);
    return cudaGetLastError();
}

}  // namespace cleave::executor::gpu
