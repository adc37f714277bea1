// Fused causal attention forward on tensor cores (issue 17): the flash forward of
// kernels_attention.cu (Dao et al. 2022, Alg. 1: online softmax with running max and sum) with
// both products, S = Q K^T and O += P V, as 16x16x16 bf16 / fp16 WMMA operations with fp32
// accumulation (CUDA C++ Programming Guide, "Warp Matrix Functions"; sm_80+). Q, K, V and P are
// rounded to the 16-bit type, the scores, the softmax statistics and O stay fp32. A warp owns 16
// query rows; a block of 4 warps shares each 16-key tile of K and V in shared memory. O lives in
// shared memory (fp32) so the softmax's rescaling can reach its rows (a WMMA accumulator's
// element layout is opaque). The backward stays the CUDA-core kernel of kernels_attention.cu; it
// recomputes the probabilities in fp32 from the log-sum-exp written here.
#include "executor/cuda/cuda_kernels.hpp"

#include <cmath>
#include <mma.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace cleave::executor::gpu {

namespace {

namespace wmma = nvcuda::wmma;

constexpr int tc_warps = 4;
constexpr int tc_rows = 16;  // query rows per warp: one WMMA tile
constexpr int tc_block_rows = tc_warps * tc_rows;
constexpr int tc_keys = 16;  // keys per staged tile
constexpr int tc_tile = 16 * 16;

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

// Element offset of (position s, batch b, head h, dim 0) in a [seq, batch, heads, hd] tensor.
__device__ int64_t at(const FlashShape& f, int64_t s, int64_t b, int64_t nh, int64_t h) {
    return ((s * f.batch + b) * nh + h) * f.head_dim;
}

// Shared memory of one block, in this order (every part a multiple of 32 bytes for hd % 16 == 0,
// as WMMA loads and stores need): q (block rows x hd, 16-bit), k and v (keys x hd, 16-bit),
// o (block rows x hd, fp32), per warp a 16x16 fp32 score tile and a 16x16 16-bit P tile, and per
// row the running max, sum and this tile's rescaling factor (fp32).
template <class H>
struct TcSmem {
    H* q;
    H* k;
    H* v;
    float* o;
    float* s;
    H* p;
    float* m;
    float* l;
    float* alpha;

    __device__ TcSmem(unsigned char* base, int hd) {
        q = reinterpret_cast<H*>(base);
        k = q + tc_block_rows * hd;
        v = k + tc_keys * hd;
        o = reinterpret_cast<float*>(v + tc_keys * hd);
        s = o + tc_block_rows * hd;
        p = reinterpret_cast<H*>(s + tc_warps * tc_tile);
        m = reinterpret_cast<float*>(p + tc_warps * tc_tile);
        l = m + tc_block_rows;
        alpha = l + tc_block_rows;
    }
};

size_t tc_smem_B(int64_t hd, size_t h_B) {
    const auto n = static_cast<size_t>(hd);
    return h_B * (tc_block_rows + 2 * tc_keys) * n + 4 * tc_block_rows * n +
           (4 + h_B) * tc_warps * tc_tile + 4 * 3 * tc_block_rows;
}

// Online softmax of one 16x16 score tile: lane r < 16 takes query row r of the warp. Writes P
// (16-bit), and updates the row's max, sum and rescaling factor.
template <class H>
__device__ void softmax_tile(
    TcSmem<H>& sm, int w, int lane, int64_t row0, int64_t j0, const FlashShape& f, float scale) {
    if (lane >= tc_rows) {
        return;
    }
    const int r = w * tc_rows + lane;
    const int64_t i = row0 + lane;
    const float* srow = sm.s + w * tc_tile + lane * 16;
    float sc[tc_keys];
    float mx = sm.m[r];
    for (int c = 0; c < tc_keys; ++c) {
        const int64_t j = j0 + c;
        sc[c] = (j <= i && j < f.seq) ? srow[c] * scale : -INFINITY;
        mx = fmaxf(mx, sc[c]);
    }
    // Every row sees key 0 in the first tile, so mx is finite from then on.
    const float a = expf(sm.m[r] - mx);
    float sum = 0.0f;
    H* prow = sm.p + w * tc_tile + lane * 16;
    for (int c = 0; c < tc_keys; ++c) {
        const float p = expf(sc[c] - mx);
        prow[c] = to_16<H>(p);
        sum += p;
    }
    sm.l[r] = sm.l[r] * a + sum;
    sm.m[r] = mx;
    sm.alpha[r] = a;
}

// One warp, one key tile: S = Q K^T, softmax, O = alpha O + P V.
template <class H>
__device__ void warp_tile(
    TcSmem<H>& sm, int w, int lane, int64_t row0, int64_t j0, const FlashShape& f, float scale) {
    const int hd = static_cast<int>(f.head_dim);
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < hd; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, H, wmma::row_major> qa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, H, wmma::col_major> kb;  // K^T
        wmma::load_matrix_sync(qa, sm.q + w * tc_rows * hd + kk, hd);
        wmma::load_matrix_sync(kb, sm.k + kk, hd);
        wmma::mma_sync(acc, qa, kb, acc);
    }
    wmma::store_matrix_sync(sm.s + w * tc_tile, acc, 16, wmma::mem_row_major);
    __syncwarp();
    softmax_tile(sm, w, lane, row0, j0, f, scale);
    __syncwarp();
    float* o = sm.o + w * tc_rows * hd;
    for (int idx = lane; idx < tc_rows * hd; idx += 32) {
        o[idx] *= sm.alpha[w * tc_rows + idx / hd];
    }
    __syncwarp();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, H, wmma::row_major> pa;
    wmma::load_matrix_sync(pa, sm.p + w * tc_tile, 16);
    for (int n0 = 0; n0 < hd; n0 += 16) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, H, wmma::row_major> vb;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> oc;
        wmma::load_matrix_sync(vb, sm.v + n0, hd);
        wmma::load_matrix_sync(oc, o + n0, hd, wmma::mem_row_major);
        wmma::mma_sync(oc, pa, vb, oc);
        wmma::store_matrix_sync(o + n0, oc, hd, wmma::mem_row_major);
    }
    __syncwarp();
}

template <class H>
__global__ void flash_fwd_tc(const float* q,
                             const float* k,
                             const float* v,
                             float* out,
                             float* lse,
                             FlashShape f,
                             float scale) {
    extern __shared__ __align__(32) unsigned char tc_smem[];
    const int hd = static_cast<int>(f.head_dim);
    TcSmem<H> sm(tc_smem, hd);
    const int64_t bh = blockIdx.y;
    const int64_t b = bh / f.heads;
    const int64_t h = bh % f.heads;
    const int64_t kvh = h / (f.heads / f.kv_heads);
    const int64_t q0 = static_cast<int64_t>(blockIdx.x) * tc_block_rows;
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const int w = static_cast<int>(threadIdx.x) / 32;
    for (int idx = static_cast<int>(threadIdx.x); idx < tc_block_rows * hd; idx += blockDim.x) {
        const int64_t s = q0 + idx / hd;
        sm.q[idx] = to_16<H>(s < f.seq ? q[at(f, s, b, f.heads, h) + idx % hd] : 0.0f);
        sm.o[idx] = 0.0f;
    }
    for (int r = static_cast<int>(threadIdx.x); r < tc_block_rows; r += blockDim.x) {
        sm.m[r] = -INFINITY;
        sm.l[r] = 0.0f;
    }
    __syncthreads();
    const int64_t last = (q0 + tc_block_rows < f.seq ? q0 + tc_block_rows : f.seq) - 1;
    const int64_t row0 = q0 + w * tc_rows;
    for (int64_t j0 = 0; j0 <= last; j0 += tc_keys) {
        for (int idx = static_cast<int>(threadIdx.x); idx < tc_keys * hd; idx += blockDim.x) {
            const int64_t s = j0 + idx / hd;
            const bool in = s < f.seq;
            const int64_t off = in ? at(f, s, b, f.kv_heads, kvh) + idx % hd : 0;
            sm.k[idx] = to_16<H>(in ? k[off] : 0.0f);
            sm.v[idx] = to_16<H>(in ? v[off] : 0.0f);
        }
        __syncthreads();
        if (j0 <= row0 + tc_rows - 1) {  // warp-uniform: the tile reaches some of its rows
            warp_tile(sm, w, lane, row0, j0, f, scale);
        }
        __syncthreads();
    }
    for (int idx = static_cast<int>(threadIdx.x); idx < tc_block_rows * hd; idx += blockDim.x) {
        const int r = idx / hd;
        const int64_t s = q0 + r;
        if (s < f.seq) {
            out[at(f, s, b, f.heads, h) + idx % hd] = sm.o[idx] / sm.l[r];
        }
    }
    for (int r = static_cast<int>(threadIdx.x); r < tc_block_rows; r += blockDim.x) {
        const int64_t s = q0 + r;
        if (s < f.seq) {
            lse[bh * f.seq + s] = sm.m[r] + logf(sm.l[r]);
        }
    }
}

template <class H>
cudaError_t launch_tc(const FlashArgs& a, cudaStream_t stream) {
    const FlashShape& f = a.shape;
    const size_t smem = tc_smem_B(f.head_dim, sizeof(H));
    const cudaError_t rc = cudaFuncSetAttribute(
        flash_fwd_tc<H>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (rc != cudaSuccess) {
        return rc;
    }
    const dim3 grid(static_cast<unsigned>((f.seq + tc_block_rows - 1) / tc_block_rows),
                    static_cast<unsigned>(f.batch * f.heads));
    flash_fwd_tc<H><<<grid, tc_warps * 32, smem, stream>>>(a.q, a.k, a.v, a.out, a.lse, f, a.scale);
    return cudaGetLastError();
}

}  // namespace

bool flash_tc_supported(int64_t head_dim) {
    return head_dim > 0 && head_dim % 16 == 0 && head_dim <= flash_tc_max_head_dim;
}

cudaError_t launch_flash_attention_fwd_tc(const FlashArgs& a, bool fp16, cudaStream_t stream) {
    if (!flash_tc_supported(a.shape.head_dim)) {
        return cudaErrorInvalidValue;
    }
    if (a.shape.seq == 0 || a.shape.batch == 0 || a.shape.heads == 0) {
        return cudaSuccess;
    }
    return fp16 ? launch_tc<__half>(a, stream) : launch_tc<__nv_bfloat16>(a, stream);
}

}  // namespace cleave::executor::gpu
