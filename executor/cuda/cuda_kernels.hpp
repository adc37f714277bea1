#pragma once
// Launchers of the CUDA backend's own kernels (the .cu files). Each one enqueues its kernel on
// `stream` and returns cudaGetLastError(), which the caller checks with CLEAVE_CUDA_CHECK.
// Pointers are device memory; sizes are element counts; matrices are row-major. The semantics
// are those of the matching Backend method (executor/backend.hpp), which the CPU backend
// implements as the reference.

#include <cstdint>

#include <cuda_runtime.h>

namespace cleave::executor::gpu {

// ---- element-wise (kernels_elementwise.cu) -------------------------------------------------

cudaError_t launch_fill(float* x, int64_t n, float value, cudaStream_t stream);
cudaError_t launch_axpy(float alpha, const float* x, float* y, int64_t n, cudaStream_t stream);
cudaError_t launch_scale(float* x, int64_t n, float alpha, cudaStream_t stream);
/// x[r, c] += bias[c].
cudaError_t
launch_add_bias(float* x, int64_t rows, int64_t cols, const float* bias, cudaStream_t stream);
/// out[c] += sum over r of x[r, c] (one thread per column: deterministic).
cudaError_t
launch_col_sum(const float* x, int64_t rows, int64_t cols, float* out, cudaStream_t stream);
cudaError_t launch_gelu_fwd(const float* x, float* y, int64_t n, cudaStream_t stream);
cudaError_t
launch_gelu_bwd(const float* x, const float* dy, float* dx, int64_t n, cudaStream_t stream);
cudaError_t
launch_swiglu_fwd(const float* gate, const float* up, float* y, int64_t n, cudaStream_t stream);
cudaError_t launch_swiglu_bwd(const float* gate,
                              const float* up,
                              const float* dy,
                              float* dgate,
                              float* dup,
                              int64_t n,
                              cudaStream_t stream);

/// 16-bit activation storage (issue 17): y[i] = x[i] rounded to nearest-even in bf16 (or fp16
/// when `fp16`), stored as 2-byte elements; and back to fp32 (exact).
cudaError_t launch_pack16(const float* x, void* y, int64_t n, bool fp16, cudaStream_t stream);
cudaError_t launch_unpack16(const void* x, float* y, int64_t n, bool fp16, cudaStream_t stream);

/// Adam hyper-parameters; c1 = 1 - beta1^step and c2 = 1 - beta2^step are computed by the host.
struct AdamArgs {
    float lr = 0;
    float beta1 = 0;
    float beta2 = 0;
    float eps = 0;
    float weight_decay = 0;
    float c1 = 1;
    float c2 = 1;
};

cudaError_t launch_adam(
    float* w, const float* g, float* m, float* v, int64_t n, AdamArgs a, cudaStream_t stream);

/// Shape of a vocab-parallel embedding slice: rows [row_begin, row_begin + rows) of width cols.
struct TableSlice {
    int64_t row_begin = 0;
    int64_t rows = 0;
    int64_t cols = 0;
};

cudaError_t launch_embedding_fwd(const int32_t* ids,
                                 int64_t n,
                                 const float* table,
                                 TableSlice slice,
                                 float* out,
                                 bool accumulate,
                                 cudaStream_t stream);
/// dtable[ids[i] - row_begin] += dy[i] (atomicAdd: repeated ids add in any order).
cudaError_t launch_embedding_bwd(const int32_t* ids,
                                 int64_t n,
                                 const float* dy,
                                 TableSlice slice,
                                 float* dtable,
                                 cudaStream_t stream);

/// Layout of a [seq, batch, heads * head_dim] activation for RoPE.
struct RopeShape {
    int64_t seq = 0;
    int64_t batch = 0;
    int64_t heads = 0;
    int64_t head_dim = 0;
    int64_t first_pos = 0;
};

cudaError_t launch_rope(float* x, RopeShape shape, bool inverse, cudaStream_t stream);

// ---- row reductions (kernels_rows.cu): one thread block per row ----------------------------

/// mean may be null for rmsnorm; beta is ignored (may be null) for rmsnorm.
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
                            cudaStream_t stream);
/// dx of norm_fwd (overwritten).
cudaError_t launch_norm_bwd_dx(bool layernorm,
                               const float* dy,
                               const float* x,
                               int64_t rows,
                               int64_t cols,
                               const float* gamma,
                               const float* mean,
                               const float* rstd,
                               float* dx,
                               cudaStream_t stream);
/// dgamma += sum_r dy * xhat; dbeta += sum_r dy (layernorm only; one thread per column).
cudaError_t launch_norm_bwd_params(bool layernorm,
                                   const float* dy,
                                   const float* x,
                                   int64_t rows,
                                   int64_t cols,
                                   const float* mean,
                                   const float* rstd,
                                   float* dgamma,
                                   float* dbeta,
                                   cudaStream_t stream);

/// In place on `matrices` seq x seq score matrices: row i becomes softmax over columns j <= i,
/// columns j > i become 0.
cudaError_t launch_causal_softmax_fwd(float* p, int64_t matrices, int64_t seq, cudaStream_t stream);
/// In place: dp[i, j] <- p[i, j] * (dp[i, j] - sum_j' p[i, j'] dp[i, j']) * scale.
cudaError_t launch_causal_softmax_bwd(
    const float* p, float* dp, int64_t matrices, int64_t seq, float scale, cudaStream_t stream);

cudaError_t
launch_row_max(const float* x, int64_t rows, int64_t cols, float* row_max, cudaStream_t stream);
cudaError_t launch_xent_partial(const float* logits,
                                int64_t rows,
                                int64_t cols,
                                int64_t col_begin,
                                const int32_t* targets,
                                const float* row_max,
                                float* sum_exp,
                                float* target_logit,
                                cudaStream_t stream);
/// May run in place (dlogits == logits).
cudaError_t launch_xent_bwd(const float* logits,
                            int64_t rows,
                            int64_t cols,
                            int64_t col_begin,
                            const int32_t* targets,
                            const float* row_max,
                            const float* sum_exp,
                            float scale,
                            float* dlogits,
                            cudaStream_t stream);

// ---- fused attention (kernels_attention.cu) ---------------------------------------------------

/// Largest head_dim the fused kernels take.
inline constexpr int64_t flash_max_head_dim = 256;

/// Shape of a causal attention over [seq, batch, heads, head_dim] tensors (k, v: kv_heads).
struct FlashShape {
    int64_t seq = 0;
    int64_t batch = 0;
    int64_t heads = 0;
    int64_t kv_heads = 0;
    int64_t head_dim = 0;
};

/// Operands of the fused attention. lse and delta: [batch, heads, seq] (delta is scratch of the
/// backward). The forward reads q, k, v and writes out and lse; the backward reads q, k, v, lse,
/// dout and overwrites dq, dk, dv (dk, dv summed over the query heads of a kv head) and delta.
struct FlashArgs {
    FlashShape shape;
    float scale = 1.0f;  // 1 / sqrt(head_dim)
    const float* q = nullptr;
    const float* k = nullptr;
    const float* v = nullptr;
    float* out = nullptr;
    float* lse = nullptr;
    const float* dout = nullptr;
    float* dq = nullptr;
    float* dk = nullptr;
    float* dv = nullptr;
    float* delta = nullptr;
};

/// Flash-style causal attention forward (online softmax, no seq x seq buffer).
/// cudaErrorInvalidValue when head_dim > flash_max_head_dim.
cudaError_t launch_flash_attention_fwd(const FlashArgs& a, cudaStream_t stream);
/// Head dims the tensor-core forward takes (multiples of 16 up to this).
inline constexpr int64_t flash_tc_max_head_dim = 128;
[[nodiscard]] bool flash_tc_supported(int64_t head_dim);
/// The same forward with Q K^T and P V on tensor cores (WMMA, bf16 or fp16 operands, fp32
/// accumulation; kernels_attention_tc.cu). cudaErrorInvalidValue unless flash_tc_supported.
cudaError_t launch_flash_attention_fwd_tc(const FlashArgs& a, bool fp16, cudaStream_t stream);
/// Its backward (recomputes the probabilities from lse).
cudaError_t launch_flash_attention_bwd(const FlashArgs& a, cudaStream_t stream);

}  // namespace cleave::executor::gpu
