// Row-wise kernels: one thread block per row (rows strided by the grid), block reductions in
// shared memory. Straightforward rather than fast: each row is read two or three times.
#include "executor/cuda/cuda_kernels.hpp"

#include <algorithm>
#include <cfloat>

namespace cleave::executor::gpu {

namespace {

constexpr int block_threads = 256;
constexpr int64_t max_blocks = 65535;

unsigned row_blocks(int64_t rows) {
    return static_cast<unsigned>(std::clamp<int64_t>(rows, 1, max_blocks));
}

unsigned col_blocks(int64_t cols) {
    const int64_t b = (cols + block_threads - 1) / block_threads;
    return static_cast<unsigned>(std::clamp<int64_t>(b, 1, max_blocks));
}

// Block-wide sum / max; every thread gets the result. `sh` holds block_threads floats. The
// leading barrier makes back-to-back calls with the same buffer safe.
__device__ float block_sum(float v, float* sh) {
    __syncthreads();
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int stride = block_threads / 2; stride > 0; stride /= 2) {
        if (static_cast<int>(threadIdx.x) < stride) {
            sh[threadIdx.x] += sh[threadIdx.x + stride];
        }
        __syncthreads();
    }
    return sh[0];
}

__device__ float block_max(float v, float* sh) {
    __syncthreads();
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int stride = block_threads / 2; stride > 0; stride /= 2) {
        if (static_cast<int>(threadIdx.x) < stride) {
            sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + stride]);
        }
        __syncthreads();
    }
    return sh[0];
}

__global__ void norm_fwd_kernel(bool layernorm,
                                const float* x,
                                int64_t rows,
                                int64_t cols,
                                const float* gamma,
                                const float* beta,
                                float eps,
                                float* y,
                                float* mean,
                                float* rstd) {
    __shared__ float sh[block_threads];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float mu = 0.0f;
        if (layernorm) {
            float s = 0.0f;
            for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
                s += xr[c];
            }
            mu = block_sum(s, sh) / static_cast<float>(cols);
        }
        float sq = 0.0f;
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
            const float d = xr[c] - mu;
            sq += d * d;
        }
        const float var = block_sum(sq, sh) / static_cast<float>(cols);
        const float rs = rsqrtf(var + eps);
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
            const float xhat = (xr[c] - mu) * rs;
            yr[c] = xhat * gamma[c] + (layernorm ? beta[c] : 0.0f);
        }
        if (threadIdx.x == 0) {
            if (layernorm) {
                mean[r] = mu;
            }
            rstd[r] = rs;
        }
    }
}

__global__ void norm_bwd_dx_kernel(bool layernorm,
                                   const float* dy,
                                   const float* x,
                                   int64_t rows,
                                   int64_t cols,
                                   const float* gamma,
                                   const float* mean,
                                   const float* rstd,
                                   float* dx) {
    __shared__ float sh[block_threads];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + r * cols;
        const float* dyr = dy + r * cols;
        const float mu = layernorm ? mean[r] : 0.0f;
        const float rs = rstd[r];
        float s1 = 0.0f;
        float s2 = 0.0f;
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
            const float xhat = (xr[c] - mu) * rs;
            const float dxhat = dyr[c] * gamma[c];
            s1 += dxhat;
            s2 += dxhat * xhat;
        }
        const float inv_n = 1.0f / static_cast<float>(cols);
        const float m1 = layernorm ? block_sum(s1, sh) * inv_n : 0.0f;
        const float m2 = block_sum(s2, sh) * inv_n;
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
            const float xhat = (xr[c] - mu) * rs;
            dx[r * cols + c] = rs * (dyr[c] * gamma[c] - m1 - xhat * m2);
        }
    }
}

__global__ void norm_bwd_params_kernel(bool layernorm,
                                       const float* dy,
                                       const float* x,
                                       int64_t rows,
                                       int64_t cols,
                                       const float* mean,
                                       const float* rstd,
                                       float* dgamma,
                                       float* dbeta) {
    for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cols;
         c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        float g = 0.0f;
        float b = 0.0f;
        for (int64_t r = 0; r < rows; ++r) {
            const float mu = layernorm ? mean[r] : 0.0f;
            const float d = dy[r * cols + c];
            g += d * ((x[r * cols + c] - mu) * rstd[r]);
            b += d;
        }
        dgamma[c] += g;
        if (layernorm) {
            dbeta[c] += b;
        }
    }
}

__global__ void causal_softmax_fwd_kernel(float* p, int64_t matrices, int64_t seq) {
    __shared__ float sh[block_threads];
    for (int64_t row = blockIdx.x; row < matrices * seq; row += gridDim.x) {
        const int64_t i = row % seq;
        float* pr = p + row * seq;
        float mx = -FLT_MAX;
        for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
            mx = fmaxf(mx, pr[j]);
        }
        mx = block_max(mx, sh);
        float s = 0.0f;
        for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
            s += expf(pr[j] - mx);
        }
        const float inv = 1.0f / block_sum(s, sh);
        for (int64_t j = threadIdx.x; j < seq; j += blockDim.x) {
            pr[j] = j <= i ? expf(pr[j] - mx) * inv : 0.0f;
        }
    }
}

__global__ void
causal_softmax_bwd_kernel(const float* p, float* dp, int64_t matrices, int64_t seq, float scale) {
    __shared__ float sh[block_threads];
    for (int64_t row = blockIdx.x; row < matrices * seq; row += gridDim.x) {
        const float* pr = p + row * seq;
        float* dr = dp + row * seq;
        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < seq; j += blockDim.x) {
            s += pr[j] * dr[j];
        }
        const float dot = block_sum(s, sh);
        for (int64_t j = threadIdx.x; j < seq; j += blockDim.x) {
            dr[j] = pr[j] * (dr[j] - dot) * scale;
        }
    }
}

__global__ void row_max_kernel(const float* x, int64_t rows, int64_t cols, float* row_max) {
    __shared__ float sh[block_threads];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float mx = -FLT_MAX;
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
            mx = fmaxf(mx, x[r * cols + c]);
        }
        mx = block_max(mx, sh);
        if (threadIdx.x == 0) {
            row_max[r] = mx;
        }
    }
}

__global__ void xent_partial_kernel(const float* logits,
                                    int64_t rows,
                                    int64_t cols,
                                    int64_t col_begin,
                                    const int32_t* targets,
                                    const float* row_max,
                                    float* sum_exp,
                                    float* target_logit) {
    __shared__ float sh[block_threads];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* l = logits + r * cols;
        float s = 0.0f;
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
            s += expf(l[c] - row_max[r]);
        }
        s = block_sum(s, sh);
        if (threadIdx.x == 0) {
            sum_exp[r] = s;
            const int64_t t = targets[r] - col_begin;
            target_logit[r] = t >= 0 && t < cols ? l[t] : 0.0f;
        }
    }
}

__global__ void xent_bwd_kernel(const float* logits,
                                int64_t rows,
                                int64_t cols,
                                int64_t col_begin,
                                const int32_t* targets,
                                const float* row_max,
                                const float* sum_exp,
                                float scale,
                                float* dlogits) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float inv = 1.0f / sum_exp[r];
        const int64_t t = targets[r] - col_begin;
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
            const float d = scale * expf(logits[r * cols + c] - row_max[r]) * inv;
            dlogits[r * cols + c] = c == t ? d - scale : d;
        }
    }
}

}  // namespace

cudaError_t launch_norm_fwd(bool layernorm,
                            const float* x,
                            int64_t rows,
                            int64_t cols,
                            const float* gamma,
                            const float* beta,
                            float eps,
                            float* y,
                            float* mean,
                            float* rstd,
                            cudaStream_t stream) {
    norm_fwd_kernel<<<row_blocks(rows), block_threads, 0, stream>>>(
        layernorm, x, rows, cols, gamma, beta, eps, y, mean, rstd);
    return cudaGetLastError();
}

cudaError_t launch_norm_bwd_dx(bool layernorm,
                               const float* dy,
                               const float* x,
                               int64_t rows,
                               int64_t cols,
                               const float* gamma,
                               const float* mean,
                               const float* rstd,
                               float* dx,
                               cudaStream_t stream) {
    norm_bwd_dx_kernel<<<row_blocks(rows), block_threads, 0, stream>>>(
        layernorm, dy, x, rows, cols, gamma, mean, rstd, dx);
    return cudaGetLastError();
}

cudaError_t launch_norm_bwd_params(bool layernorm,
                                   const float* dy,
                                   const float* x,
                                   int64_t rows,
                                   int64_t cols,
                                   const float* mean,
                                   const float* rstd,
                                   float* dgamma,
                                   float* dbeta,
                                   cudaStream_t stream) {
    norm_bwd_params_kernel<<<col_blocks(cols), block_threads, 0, stream>>>(
        layernorm, dy, x, rows, cols, mean, rstd, dgamma, dbeta);
    return cudaGetLastError();
}

cudaError_t
launch_causal_softmax_fwd(float* p, int64_t matrices, int64_t seq, cudaStream_t stream) {
    causal_softmax_fwd_kernel<<<row_blocks(matrices * seq), block_threads, 0, stream>>>(
        p, matrices, seq);
    return cudaGetLastError();
}

cudaError_t launch_causal_softmax_bwd(
    const float* p, float* dp, int64_t matrices, int64_t seq, float scale, cudaStream_t stream) {
    causal_softmax_bwd_kernel<<<row_blocks(matrices * seq), block_threads, 0, stream>>>(
        p, dp, matrices, seq, scale);
    return cudaGetLastError();
}

cudaError_t
launch_row_max(const float* x, int64_t rows, int64_t cols, float* row_max, cudaStream_t stream) {
    row_max_kernel<<<row_blocks(rows), block_threads, 0, stream>>>(x, rows, cols, row_max);
    return cudaGetLastError();
}

cudaError_t launch_xent_partial(const float* logits,
                                int64_t rows,
                                int64_t cols,
                                int64_t col_begin,
                                const int32_t* targets,
                                const float* row_max,
                                float* sum_exp,
                                float* target_logit,
                                cudaStream_t stream) {
    xent_partial_kernel<<<row_blocks(rows), block_threads, 0, stream>>>(
        logits, rows, cols, col_begin, targets, row_max, sum_exp, target_logit);
    return cudaGetLastError();
}

cudaError_t launch_xent_bwd(const float* logits,
                            int64_t rows,
                            int64_t cols,
                            int64_t col_begin,
                            const int32_t* targets,
                            const float* row_max,
                            const float* sum_exp,
                            float scale,
                            float* dlogits,
                            cudaStream_t stream) {
    xent_bwd_kernel<<<row_blocks(rows), block_threads, 0, stream>>>(
        logits, rows, cols, col_begin, targets, row_max, sum_exp, scale, dlogits);
    return cudaGetLastError();
}

}  // namespace cleave::executor::gpu
