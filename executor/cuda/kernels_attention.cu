// Fused causal attention (issue 17): flash-style forward and backward with an online softmax and
// no seq x seq buffer. The algorithm is FlashAttention's (Dao et al. 2022, Alg. 1 forward with
// the running max / sum rescaling; Dao 2023, Alg. 2 backward with D_i = rowsum(dO_i * O_i)); the
// kernels are written for cleave on CUDA cores (fp32 FMAs and warp shuffles), not tensor cores:
// correctness first, and no s^2 memory.
//
// Layout (backend.hpp): q, out, dq [seq, batch, heads, hd]; k, v, dk, dv [seq, batch, kv_heads,
// hd]; lse and delta [batch, heads, seq]. Scores are s_ij = (q_i . k_j) / sqrt(hd), j <= i.
//
// Work split. Forward and dq: a block takes rows_per_block query rows of one (batch, head), each
// warp rows_per_warp of them; key tiles of 32 keys (one per lane) are staged in shared memory
// and every warp reuses them for its rows. A lane computes the score of "its" key, the warp
// reduces max / sum with shuffles, and then each lane updates the output dims it owns (d = lane
// + 32 t, t < DPL) with the 32 probabilities broadcast by shuffles. dk / dv: the same with the
// roles swapped (a block takes key rows of one (batch, kv head); query tiles of 32 are staged;
// the query heads sharing the kv head are summed inside the kernel, so dk and dv are written
// once, without atomics).
#include "executor/cuda/cuda_kernels.hpp"

#include <cmath>
#include <type_traits>

namespace cleave::executor::gpu {

namespace {

constexpr int warp = 32;
constexpr int warps_per_block = 4;
constexpr int rows_per_warp = 4;
constexpr int rows_per_block = warps_per_block * rows_per_warp;
constexpr int tile = warp;  // keys (forward, dq) or queries (dk, dv) staged per step
constexpr unsigned full_mask = 0xffffffffu;

__device__ float warp_sum(float v) {
    for (int off = warp / 2; off > 0; off /= 2) {
        v += __shfl_xor_sync(full_mask, v, off);
    }
    return v;
}

__device__ float warp_max(float v) {
    for (int off = warp / 2; off > 0; off /= 2) {
        v = fmaxf(v, __shfl_xor_sync(full_mask, v, off));
    }
    return v;
}

// Row pitch of a staged tile read row-per-lane: odd, so the 32 lanes reading element d of 32
// different rows hit 32 different banks.
__host__ __device__ int64_t tile_pitch(int64_t hd) {
    return (hd % 2 == 0) ? hd + 1 : hd;
}

// Element offset of (position s, batch b, head h, dim 0) in a [seq, batch, heads, hd] tensor.
__device__ int64_t at(const FlashShape& f, int64_t s, int64_t b, int64_t nh, int64_t h) {
    return ((s * f.batch + b) * nh + h) * f.head_dim;
}

// dst[r * pitch + d] = src row (first + r), dims d < hd, times `mul`; rows past seq are zero.
__device__ void stage_rows(float* dst,
                           int64_t pitch,
                           int rows,
                           const float* src,
                           const FlashShape& f,
                           int64_t first,
                           int64_t b,
                           int64_t nh,
                           int64_t h,
                           float mul) {
    const int64_t n = static_cast<int64_t>(rows) * f.head_dim;
    for (int64_t idx = threadIdx.x; idx < n; idx += blockDim.x) {
        const int64_t r = idx / f.head_dim;
        const int64_t d = idx % f.head_dim;
        const int64_t s = first + r;
        dst[r * pitch + d] = s < f.seq ? src[at(f, s, b, nh, h) + d] * mul : 0.0f;
    }
}

// Dot product of two staged rows of hd elements.
__device__ float dot(const float* a, const float* b, int64_t hd) {
    float acc = 0.0f;
    for (int64_t d = 0; d < hd; ++d) {
        acc = fmaf(a[d], b[d], acc);
    }
    return acc;
}

// acc[t] += sum over the 32 lanes j of coef_j * rows[j * pitch + lane + 32 t].
template <int DPL>
__device__ void
accumulate_rows(float (&acc)[DPL], float coef, const float* rows, int64_t pitch, int64_t hd) {
    const int lane = static_cast<int>(threadIdx.x) % warp;
    for (int j = 0; j < warp; ++j) {
        const float c = __shfl_sync(full_mask, coef, j);
        for (int t = 0; t < DPL; ++t) {
            const int64_t d = lane + warp * t;
            if (d < hd) {
                acc[t] = fmaf(c, rows[j * pitch + d], acc[t]);
            }
        }
    }
}

// ---- forward ----------------------------------------------------------------------------------

template <int DPL>
__global__ void flash_fwd(const float* q,
                          const float* k,
                          const float* v,
                          float* out,
                          float* lse,
                          FlashShape f,
                          float scale) {
    extern __shared__ float smem[];
    const int64_t hd = f.head_dim;
    const int64_t pitch = tile_pitch(hd);
    float* qs = smem;                      // rows_per_block x hd (scaled q)
    float* ks = qs + rows_per_block * hd;  // tile x pitch
    float* vs = ks + tile * pitch;         // tile x pitch
    const int64_t bh = blockIdx.y;
    const int64_t b = bh / f.heads;
    const int64_t h = bh % f.heads;
    const int64_t kvh = h / (f.heads / f.kv_heads);
    const int64_t q0 = static_cast<int64_t>(blockIdx.x) * rows_per_block;
    const int lane = static_cast<int>(threadIdx.x) % warp;
    const int w = static_cast<int>(threadIdx.x) / warp;
    stage_rows(qs, hd, rows_per_block, q, f, q0, b, f.heads, h, scale);

    float m[rows_per_warp];
    float l[rows_per_warp];
    float acc[rows_per_warp][DPL];
    for (int rr = 0; rr < rows_per_warp; ++rr) {
        m[rr] = -INFINITY;
        l[rr] = 0.0f;
        for (int t = 0; t < DPL; ++t) {
            acc[rr][t] = 0.0f;
        }
    }
    // Causal: the block needs keys 0..last.
    const int64_t last = (q0 + rows_per_block < f.seq ? q0 + rows_per_block : f.seq) - 1;
    for (int64_t k0 = 0; k0 <= last; k0 += tile) {
        __syncthreads();  // the previous tile is no longer read (and qs is staged)
        stage_rows(ks, pitch, tile, k, f, k0, b, f.kv_heads, kvh, 1.0f);
        stage_rows(vs, pitch, tile, v, f, k0, b, f.kv_heads, kvh, 1.0f);
        __syncthreads();
        for (int rr = 0; rr < rows_per_warp; ++rr) {
            const int r = w * rows_per_warp + rr;
            const int64_t i = q0 + r;
            if (i >= f.seq || k0 > i) {
                continue;  // warp-uniform: i and k0 are the same for every lane
            }
            const int64_t j = k0 + lane;
            const float s = j <= i ? dot(qs + r * hd, ks + lane * pitch, hd) : -INFINITY;
            const float m_new = fmaxf(m[rr], warp_max(s));  // finite: key k0 <= i is in
            const float p = j <= i ? expf(s - m_new) : 0.0f;
            const float corr = expf(m[rr] - m_new);  // 0 on the first tile (m = -inf)
            l[rr] = l[rr] * corr + warp_sum(p);
            for (int t = 0; t < DPL; ++t) {
                acc[rr][t] *= corr;
            }
            accumulate_rows<DPL>(acc[rr], p, vs, pitch, hd);
            m[rr] = m_new;
        }
    }
    for (int rr = 0; rr < rows_per_warp; ++rr) {
        const int64_t i = q0 + w * rows_per_warp + rr;
        if (i >= f.seq) {
            continue;
        }
        const float inv = 1.0f / l[rr];
        const int64_t o = at(f, i, b, f.heads, h);
        for (int t = 0; t < DPL; ++t) {
            const int64_t d = lane + warp * t;
            if (d < hd) {
                out[o + d] = acc[rr][t] * inv;
            }
        }
        if (lane == 0) {
            lse[bh * f.seq + i] = m[rr] + logf(l[rr]);
        }
    }
}

// ---- backward, dq (and delta_i = sum_j P_ij dP_ij = dO_i . O_i) --------------------------------

template <int DPL>
__global__ void flash_bwd_dq(const float* q,
                             const float* k,
                             const float* v,
                             const float* lse,
                             const float* dout,
                             float* dq,
                             float* delta,
                             FlashShape f,
                             float scale) {
    extern __shared__ float smem[];
    const int64_t hd = f.head_dim;
    const int64_t pitch = tile_pitch(hd);
    float* qs = smem;                       // rows_per_block x hd (scaled q)
    float* dos = qs + rows_per_block * hd;  // rows_per_block x hd
    float* ks = dos + rows_per_block * hd;  // tile x pitch
    float* vs = ks + tile * pitch;          // tile x pitch
    const int64_t bh = blockIdx.y;
    const int64_t b = bh / f.heads;
    const int64_t h = bh % f.heads;
    const int64_t kvh = h / (f.heads / f.kv_heads);
    const int64_t q0 = static_cast<int64_t>(blockIdx.x) * rows_per_block;
    const int lane = static_cast<int>(threadIdx.x) % warp;
    const int w = static_cast<int>(threadIdx.x) / warp;
    stage_rows(qs, hd, rows_per_block, q, f, q0, b, f.heads, h, scale);
    stage_rows(dos, hd, rows_per_block, dout, f, q0, b, f.heads, h, 1.0f);

    float row_lse[rows_per_warp];
    float dsum[rows_per_warp];  // pass 0: this lane's part of delta_i; then delta_i
    float acc[rows_per_warp][DPL];
    for (int rr = 0; rr < rows_per_warp; ++rr) {
        const int64_t i = q0 + w * rows_per_warp + rr;
        row_lse[rr] = i < f.seq ? lse[bh * f.seq + i] : 0.0f;
        dsum[rr] = 0.0f;
        for (int t = 0; t < DPL; ++t) {
            acc[rr][t] = 0.0f;
        }
    }
    const int64_t last = (q0 + rows_per_block < f.seq ? q0 + rows_per_block : f.seq) - 1;
    // Pass 0 sums P_ij dP_ij into delta_i; pass 1 accumulates dq_i = sum_j dS_ij k_j (scale
    // applied at the end) with dS_ij = P_ij (dP_ij - delta_i).
    for (int pass = 0; pass < 2; ++pass) {
        for (int64_t k0 = 0; k0 <= last; k0 += tile) {
            __syncthreads();
            stage_rows(ks, pitch, tile, k, f, k0, b, f.kv_heads, kvh, 1.0f);
            stage_rows(vs, pitch, tile, v, f, k0, b, f.kv_heads, kvh, 1.0f);
            __syncthreads();
            for (int rr = 0; rr < rows_per_warp; ++rr) {
                const int r = w * rows_per_warp + rr;
                const int64_t i = q0 + r;
                if (i >= f.seq || k0 > i) {
                    continue;  // warp-uniform
                }
                const int64_t j = k0 + lane;
                float p = 0.0f;
                float dp = 0.0f;
                if (j <= i) {
                    p = expf(dot(qs + r * hd, ks + lane * pitch, hd) - row_lse[rr]);
                    dp = dot(dos + r * hd, vs + lane * pitch, hd);
                }
                if (pass == 0) {
                    dsum[rr] += p * dp;
                } else {
                    accumulate_rows<DPL>(acc[rr], p * (dp - dsum[rr]), ks, pitch, hd);
                }
            }
        }
        if (pass == 0) {
            for (int rr = 0; rr < rows_per_warp; ++rr) {
                dsum[rr] = warp_sum(dsum[rr]);  // every lane holds delta_i
            }
        }
    }
    for (int rr = 0; rr < rows_per_warp; ++rr) {
        const int64_t i = q0 + w * rows_per_warp + rr;
        if (i >= f.seq) {
            continue;
        }
        const int64_t o = at(f, i, b, f.heads, h);
        for (int t = 0; t < DPL; ++t) {
            const int64_t d = lane + warp * t;
            if (d < hd) {
                dq[o + d] = acc[rr][t] * scale;
            }
        }
        if (lane == 0) {
            delta[bh * f.seq + i] = dsum[rr];
        }
    }
}

// ---- backward, dk and dv -----------------------------------------------------------------------

template <int DPL>
__global__ void flash_bwd_dkv(const float* q,
                              const float* k,
                              const float* v,
                              const float* lse,
                              const float* delta,
                              const float* dout,
                              float* dk,
                              float* dv,
                              FlashShape f,
                              float scale) {
    extern __shared__ float smem[];
    const int64_t hd = f.head_dim;
    const int64_t pitch = tile_pitch(hd);
    float* ks = smem;                      // rows_per_block x hd
    float* vs = ks + rows_per_block * hd;  // rows_per_block x hd
    float* qs = vs + rows_per_block * hd;  // tile x pitch (scaled q)
    float* dos = qs + tile * pitch;        // tile x pitch
    const int64_t bkv = blockIdx.y;
    const int64_t b = bkv / f.kv_heads;
    const int64_t kvh = bkv % f.kv_heads;
    const int64_t group = f.heads / f.kv_heads;
    const int64_t k0 = static_cast<int64_t>(blockIdx.x) * rows_per_block;
    const int lane = static_cast<int>(threadIdx.x) % warp;
    const int w = static_cast<int>(threadIdx.x) / warp;
    stage_rows(ks, hd, rows_per_block, k, f, k0, b, f.kv_heads, kvh, 1.0f);
    stage_rows(vs, hd, rows_per_block, v, f, k0, b, f.kv_heads, kvh, 1.0f);

    float acc_k[rows_per_warp][DPL];
    float acc_v[rows_per_warp][DPL];
    for (int rr = 0; rr < rows_per_warp; ++rr) {
        for (int t = 0; t < DPL; ++t) {
            acc_k[rr][t] = 0.0f;
            acc_v[rr][t] = 0.0f;
        }
    }
    for (int64_t g = 0; g < group; ++g) {
        const int64_t h = kvh * group + g;
        const int64_t bh = b * f.heads + h;
        for (int64_t i0 = k0; i0 < f.seq; i0 += tile) {  // causal: queries i >= j >= k0
            __syncthreads();
            stage_rows(qs, pitch, tile, q, f, i0, b, f.heads, h, scale);
            stage_rows(dos, pitch, tile, dout, f, i0, b, f.heads, h, 1.0f);
            __syncthreads();
            const int64_t i = i0 + lane;
            const float row_lse = i < f.seq ? lse[bh * f.seq + i] : 0.0f;
            const float row_delta = i < f.seq ? delta[bh * f.seq + i] : 0.0f;
            for (int rr = 0; rr < rows_per_warp; ++rr) {
                const int r = w * rows_per_warp + rr;
                const int64_t j = k0 + r;
                if (j >= f.seq) {
                    continue;  // warp-uniform
                }
                float p = 0.0f;
                float ds = 0.0f;
                if (i < f.seq && i >= j) {
                    p = expf(dot(qs + lane * pitch, ks + r * hd, hd) - row_lse);
                    ds = p * (dot(dos + lane * pitch, vs + r * hd, hd) - row_delta);
                }
                accumulate_rows<DPL>(acc_v[rr], p, dos, pitch, hd);
                accumulate_rows<DPL>(acc_k[rr], ds, qs, pitch, hd);  // qs holds scale * q
            }
        }
    }
    for (int rr = 0; rr < rows_per_warp; ++rr) {
        const int64_t j = k0 + w * rows_per_warp + rr;
        if (j >= f.seq) {
            continue;
        }
        const int64_t o = at(f, j, b, f.kv_heads, kvh);
        for (int t = 0; t < DPL; ++t) {
            const int64_t d = lane + warp * t;
            if (d < hd) {
                dk[o + d] = acc_k[rr][t];
                dv[o + d] = acc_v[rr][t];
            }
        }
    }
}

// ---- launchers -------------------------------------------------------------------------------

template <class Kernel>
cudaError_t prepare(Kernel kernel, size_t smem_B) {
    return cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_B));
}

size_t floats_B(int64_t n) {
    return static_cast<size_t>(n) * sizeof(float);
}

dim3 grid_of(int64_t rows, int64_t groups) {
    return dim3(static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block),
                static_cast<unsigned>(groups));
}

constexpr unsigned threads = warps_per_block * warp;

template <int DPL>
cudaError_t fwd(const FlashArgs& a, cudaStream_t stream) {
    const FlashShape& f = a.shape;
    const size_t smem = floats_B(rows_per_block * f.head_dim + 2 * tile * tile_pitch(f.head_dim));
    if (const cudaError_t rc = prepare(flash_fwd<DPL>, smem); rc != cudaSuccess) {
        return rc;
    }
    flash_fwd<DPL><<<grid_of(f.seq, f.batch * f.heads), threads, smem, stream>>>(
        a.q, a.k, a.v, a.out, a.lse, f, a.scale);
    return cudaGetLastError();
}

template <int DPL>
cudaError_t bwd(const FlashArgs& a, cudaStream_t stream) {
    const FlashShape& f = a.shape;
    const size_t smem =
        floats_B(2 * rows_per_block * f.head_dim + 2 * tile * tile_pitch(f.head_dim));
    if (const cudaError_t rc = prepare(flash_bwd_dq<DPL>, smem); rc != cudaSuccess) {
        return rc;
    }
    if (const cudaError_t rc = prepare(flash_bwd_dkv<DPL>, smem); rc != cudaSuccess) {
        return rc;
    }
    flash_bwd_dq<DPL><<<grid_of(f.seq, f.batch * f.heads), threads, smem, stream>>>(
        a.q, a.k, a.v, a.lse, a.dout, a.dq, a.delta, f, a.scale);
    if (const cudaError_t rc = cudaGetLastError(); rc != cudaSuccess) {
        return rc;
    }
    flash_bwd_dkv<DPL><<<grid_of(f.seq, f.batch * f.kv_heads), threads, smem, stream>>>(
        a.q, a.k, a.v, a.lse, a.delta, a.dout, a.dk, a.dv, f, a.scale);
    return cudaGetLastError();
}

// DPL: output dims per lane, ceil(hd / 32) rounded up to a power of two (hd <= 256).
template <class F>
cudaError_t dispatch(int64_t hd, F&& f) {
    if (hd <= 32) {
        return f(std::integral_constant<int, 1>{});
    }
    if (hd <= 64) {
        return f(std::integral_constant<int, 2>{});
    }
    if (hd <= 128) {
        return f(std::integral_constant<int, 4>{});
    }
    if (hd <= flash_max_head_dim) {
        return f(std::integral_constant<int, 8>{});
    }
    return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_flash_attention_fwd(const FlashArgs& a, cudaStream_t stream) {
    if (a.shape.seq == 0 || a.shape.batch == 0 || a.shape.heads == 0) {
        return cudaSuccess;
    }
    return dispatch(a.shape.head_dim,
                    [&](auto dpl) { return fwd<decltype(dpl)::value>(a, stream); });
}

cudaError_t launch_flash_attention_bwd(const FlashArgs& a, cudaStream_t stream) {
    if (a.shape.seq == 0 || a.shape.batch == 0 || a.shape.heads == 0) {
        return cudaSuccess;
    }
    return dispatch(a.shape.head_dim,
                    [&](auto dpl) { return bwd<decltype(dpl)::value>(a, stream); });
}

}  // namespace cleave::executor::gpu
