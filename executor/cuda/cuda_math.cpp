// The transformer-specific ops of the CUDA backend: embeddings, norms, activations, RoPE,
// attention (cuBLAS strided-batched GEMMs around a masked-softmax kernel), vocab-parallel
// cross-entropy and Adam. Shapes are checked as in the CPU reference.
#include "executor/cuda/cuda_backend_impl.hpp"
#include "executor/cuda/cuda_kernels.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace cleave::executor::gpu {

namespace {

void need_len(View v, int64_t n, const char* what) {
    CLEAVE_ASSERT(v.size >= n && (n == 0 || v.data != nullptr), what);
}

// A run of query heads handled by one strided-batched GEMM: `count` consecutive heads starting
// at element offsets q_off (q, out, dq, dout), kv_off (k, v, dk, dv) and p_off (probs). Query
// heads are hd elements apart; their kv heads kv_stride apart (hd without GQA, 0 when the run
// shares one kv head).
struct HeadRun {
    int64_t q_off = 0;
    int64_t kv_off = 0;
    int64_t p_off = 0;
    int64_t count = 0;
    int64_t kv_stride = 0;
};

struct AttnShape {
    int64_t seq = 0;
    int64_t batch = 0;
    int64_t heads = 0;
    int64_t kv_heads = 0;
    int64_t hd = 0;
};

// Without GQA, head i = b * heads + h sits at i * hd in q and k alike, so one run covers all.
// With GQA the query heads sharing a kv head form a run (kv stride 0) unless `shared_kv_output`
// is set: then the GEMM writes into the kv tensor, and heads that share a kv head must run one
// after another (accumulating), never in one batch.
std::vector<HeadRun> head_runs(const AttnShape& s, bool shared_kv_output) {
    const int64_t ss = s.seq * s.seq;
    if (s.heads == s.kv_heads) {
        return {HeadRun{0, 0, 0, s.batch * s.heads, s.hd}};
    }
    const int64_t group = s.heads / s.kv_heads;
    std::vector<HeadRun> runs;
    for (int64_t b = 0; b < s.batch; ++b) {
        for (int64_t kvh = 0; kvh < s.kv_heads; ++kvh) {
            const int64_t first = b * s.heads + kvh * group;
            const int64_t kv_off = (b * s.kv_heads + kvh) * s.hd;
            if (!shared_kv_output) {
                runs.push_back(HeadRun{first * s.hd, kv_off, first * ss, group, 0});
                continue;
            }
            for (int64_t j = 0; j < group; ++j) {
                runs.push_back(HeadRun{(first + j) * s.hd, kv_off, (first + j) * ss, 1, 0});
            }
        }
    }
    return runs;
}

float attention_scale(int64_t head_dim) {
    return static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

// Fused attention's arguments for shape s; head_dim beyond the kernels' limit is a BackendError.
FlashArgs flash_args(const FlashShape& s) {
    if (s.head_dim > flash_max_head_dim) {
        throw BackendError("cuda backend: fused attention takes head_dim <= " +
                           std::to_string(flash_max_head_dim) + ", not " +
                           std::to_string(s.head_dim) + " (run it unfused)");
    }
    FlashArgs a;
    a.shape = s;
    a.scale = attention_scale(s.head_dim);
    return a;
}

}  // namespace

void CudaBackend::embedding_fwd(std::span<const int32_t> ids,
                                View table,
                                int64_t row_begin,
                                int64_t table_rows,
                                int64_t cols,
                                View out,
                                bool accumulate) {
    const auto n = static_cast<int64_t>(ids.size());
    need_len(out, n * cols, "embedding_fwd: out too small");
    need_len(table, table_rows * cols, "embedding_fwd: table too small");
    if (n == 0) {
        return;
    }
    int32_t* d_ids = upload_ints(ids);
    CLEAVE_CUDA_CHECK(launch_embedding_fwd(
        d_ids, n, table.data, {row_begin, table_rows, cols}, out.data, accumulate, stream_));
    temp_free(d_ids);
}

void CudaBackend::embedding_bwd(std::span<const int32_t> ids,
                                View dy,
                                int64_t row_begin,
                                int64_t table_rows,
                                int64_t cols,
                                View dtable) {
    const auto n = static_cast<int64_t>(ids.size());
    need_len(dy, n * cols, "embedding_bwd: dy too small");
    need_len(dtable, table_rows * cols, "embedding_bwd: dtable too small");
    if (n == 0) {
        return;
    }
    int32_t* d_ids = upload_ints(ids);
    CLEAVE_CUDA_CHECK(launch_embedding_bwd(
        d_ids, n, dy.data, {row_begin, table_rows, cols}, dtable.data, stream_));
    temp_free(d_ids);
}

void CudaBackend::norm_fwd(NormType type,
                           View x,
                           int64_t rows,
                           int64_t cols,
                           View gamma,
                           View beta,
                           float eps,
                           View y,
                           View mean,
                           View rstd) {
    const bool ln = type == NormType::layernorm;
    need_len(x, rows * cols, "norm_fwd: x too small");
    need_len(y, rows * cols, "norm_fwd: y too small");
    need_len(gamma, cols, "norm_fwd: gamma too small");
    need_len(rstd, rows, "norm_fwd: rstd too small");
    if (ln) {
        need_len(beta, cols, "norm_fwd: beta too small");
        need_len(mean, rows, "norm_fwd: mean too small");
    }
    CLEAVE_CUDA_CHECK(launch_norm_fwd(ln,
                                      x.data,
                                      rows,
                                      cols,
                                      gamma.data,
                                      ln ? beta.data : nullptr,
                                      eps,
                                      y.data,
                                      ln ? mean.data : nullptr,
                                      rstd.data,
                                      stream_));
}

void CudaBackend::norm_bwd(NormType type,
                           View dy,
                           View x,
                           int64_t rows,
                           int64_t cols,
                           View gamma,
                           View mean,
                           View rstd,
                           View dx,
                           View dgamma,
                           View dbeta) {
    const bool ln = type == NormType::layernorm;
    need_len(dy, rows * cols, "norm_bwd: dy too small");
    need_len(x, rows * cols, "norm_bwd: x too small");
    need_len(dx, rows * cols, "norm_bwd: dx too small");
    need_len(gamma, cols, "norm_bwd: gamma too small");
    need_len(dgamma, cols, "norm_bwd: dgamma too small");
    need_len(rstd, rows, "norm_bwd: rstd too small");
    if (ln) {
        need_len(mean, rows, "norm_bwd: mean too small");
        need_len(dbeta, cols, "norm_bwd: dbeta too small");
    }
    const float* mu = ln ? mean.data : nullptr;
    // Parameter gradients first: dx may alias dy.
    CLEAVE_CUDA_CHECK(launch_norm_bwd_params(ln,
                                             dy.data,
                                             x.data,
                                             rows,
                                             cols,
                                             mu,
                                             rstd.data,
                                             dgamma.data,
                                             ln ? dbeta.data : nullptr,
                                             stream_));
    CLEAVE_CUDA_CHECK(launch_norm_bwd_dx(
        ln, dy.data, x.data, rows, cols, gamma.data, mu, rstd.data, dx.data, stream_));
}

void CudaBackend::gelu_fwd(View x, View y) {
    need_len(y, x.size, "gelu_fwd: y too small");
    CLEAVE_CUDA_CHECK(launch_gelu_fwd(x.data, y.data, x.size, stream_));
}

void CudaBackend::gelu_bwd(View x, View dy, View dx) {
    need_len(dy, x.size, "gelu_bwd: dy too small");
    need_len(dx, x.size, "gelu_bwd: dx too small");
    CLEAVE_CUDA_CHECK(launch_gelu_bwd(x.data, dy.data, dx.data, x.size, stream_));
}

void CudaBackend::swiglu_fwd(View gate, View up, View y) {
    need_len(up, gate.size, "swiglu_fwd: up too small");
    need_len(y, gate.size, "swiglu_fwd: y too small");
    CLEAVE_CUDA_CHECK(launch_swiglu_fwd(gate.data, up.data, y.data, gate.size, stream_));
}

void CudaBackend::swiglu_bwd(View gate, View up, View dy, View dgate, View dup) {
    need_len(up, gate.size, "swiglu_bwd: up too small");
    need_len(dy, gate.size, "swiglu_bwd: dy too small");
    need_len(dgate, gate.size, "swiglu_bwd: dgate too small");
    need_len(dup, gate.size, "swiglu_bwd: dup too small");
    CLEAVE_CUDA_CHECK(
        launch_swiglu_bwd(gate.data, up.data, dy.data, dgate.data, dup.data, gate.size, stream_));
}

void CudaBackend::rope(View x,
                       int64_t seq,
                       int64_t batch,
                       int64_t heads,
                       int64_t head_dim,
                       int64_t first_pos,
                       bool inverse) {
    CLEAVE_ASSERT(head_dim % 2 == 0, "rope: head_dim must be even");
    need_len(x, seq * batch * heads * head_dim, "rope: x too small");
    CLEAVE_CUDA_CHECK(
        launch_rope(x.data, {seq, batch, heads, head_dim, first_pos}, inverse, stream_));
}

void CudaBackend::attention_fwd(View q,
                                View k,
                                View v,
                                int64_t seq,
                                int64_t batch,
                                int64_t heads,
                                int64_t kv_heads,
                                int64_t head_dim,
                                View probs,
                                View out) {
    CLEAVE_ASSERT(kv_heads > 0 && heads % kv_heads == 0, "attention: kv_heads must divide heads");
    need_len(q, seq * batch * heads * head_dim, "attention_fwd: q too small");
    need_len(k, seq * batch * kv_heads * head_dim, "attention_fwd: k too small");
    need_len(v, seq * batch * kv_heads * head_dim, "attention_fwd: v too small");
    need_len(probs, attention_saved_size(seq, batch, heads), "attention_fwd: probs too small");
    if (fused_attention_) {
        need_len(out, seq * batch * heads * head_dim, "attention_fwd: out too small");
        FlashArgs a = flash_args({seq, batch, heads, kv_heads, head_dim});
        a.q = q.data;
        a.k = k.data;
        a.v = v.data;
        a.out = out.data;
        a.lse = probs.data;
        // Issue 17: on a 16-bit run, both products on tensor cores (the backward stays fp32).
        if (precision_ != GemmPrecision::fp32 && flash_tc_supported(head_dim)) {
            CLEAVE_CUDA_CHECK(
                launch_flash_attention_fwd_tc(a, precision_ == GemmPrecision::fp16, stream_));
            return;
        }
        CLEAVE_CUDA_CHECK(launch_flash_attention_fwd(a, stream_));
        return;
    }
    need_len(out, seq * batch * heads * head_dim, "attention_fwd: out too small");
    const AttnShape s{seq, batch, heads, kv_heads, head_dim};
    const int64_t q_ld = batch * heads * head_dim;
    const int64_t kv_ld = batch * kv_heads * head_dim;
    const int64_t ss = seq * seq;
    const auto runs = head_runs(s, false);
    // Scores: probs = scale * Q K^T per head (seq x seq).
    for (const HeadRun& r : runs) {
        gemm_batched(Trans::no,
                     Trans::yes,
                     seq,
                     seq,
                     head_dim,
                     attention_scale(head_dim),
                     {q.data + r.q_off, q_ld, head_dim},
                     {k.data + r.kv_off, kv_ld, r.kv_stride},
                     0.0f,
                     {probs.data + r.p_off, seq, ss},
                     r.count);
    }
    CLEAVE_CUDA_CHECK(launch_causal_softmax_fwd(probs.data, batch * heads, seq, stream_));
    // out = P V per head.
    for (const HeadRun& r : runs) {
        gemm_batched(Trans::no,
                     Trans::no,
                     seq,
                     head_dim,
                     seq,
                     1.0f,
                     {probs.data + r.p_off, seq, ss},
                     {v.data + r.kv_off, kv_ld, r.kv_stride},
                     0.0f,
                     {out.data + r.q_off, q_ld, head_dim},
                     r.count);
    }
}

void CudaBackend::attention_bwd(View q,
                                View k,
                                View v,
                                View probs,
                                View dout,
                                int64_t seq,
                                int64_t batch,
                                int64_t heads,
                                int64_t kv_heads,
                                int64_t head_dim,
                                View dq,
                                View dk,
                                View dv) {
    CLEAVE_ASSERT(kv_heads > 0 && heads % kv_heads == 0, "attention: kv_heads must divide heads");
    const int64_t q_elems = seq * batch * heads * head_dim;
    const int64_t kv_elems = seq * batch * kv_heads * head_dim;
    need_len(q, q_elems, "attention_bwd: q too small");
    need_len(k, kv_elems, "attention_bwd: k too small");
    need_len(v, kv_elems, "attention_bwd: v too small");
    need_len(probs, attention_saved_size(seq, batch, heads), "attention_bwd: probs too small");
    need_len(dout, q_elems, "attention_bwd: dout too small");
    need_len(dq, q_elems, "attention_bwd: dq too small");
    need_len(dk, kv_elems, "attention_bwd: dk too small");
    need_len(dv, kv_elems, "attention_bwd: dv too small");
    if (fused_attention_) {
        FlashArgs a = flash_args({seq, batch, heads, kv_heads, head_dim});
        a.q = q.data;
        a.k = k.data;
        a.v = v.data;
        a.lse = probs.data;
        a.dout = dout.data;
        a.dq = dq.data;
        a.dk = dk.data;
        a.dv = dv.data;
        a.delta = static_cast<float*>(temp_alloc(batch * heads * seq * 4));
        const cudaError_t rc = launch_flash_attention_bwd(a, stream_);
        temp_free(a.delta);  // stream-ordered: freed after the kernels that use it
        CLEAVE_CUDA_CHECK(rc);
        return;
    }
    const AttnShape s{seq, batch, heads, kv_heads, head_dim};
    const int64_t q_ld = batch * heads * head_dim;
    const int64_t kv_ld = batch * kv_heads * head_dim;
    const int64_t ss = seq * seq;
    if (kv_elems > 0) {
        CLEAVE_CUDA_CHECK(cudaMemsetAsync(dk.data, 0, static_cast<size_t>(kv_elems) * 4, stream_));
        CLEAVE_CUDA_CHECK(cudaMemsetAsync(dv.data, 0, static_cast<size_t>(kv_elems) * 4, stream_));
    }
    auto* ds = static_cast<float*>(temp_alloc(batch * heads * ss * 4));
    // dV += P^T dO (heads sharing a kv head accumulate one after another).
    for (const HeadRun& r : head_runs(s, true)) {
        gemm_batched(Trans::yes,
                     Trans::no,
                     seq,
                     head_dim,
                     seq,
                     1.0f,
                     {probs.data + r.p_off, seq, ss},
                     {dout.data + r.q_off, q_ld, head_dim},
                     1.0f,
                     {dv.data + r.kv_off, kv_ld, r.kv_stride},
                     r.count);
    }
    const auto runs = head_runs(s, false);
    // dP = dO V^T, then the softmax backward turns it into dS (scale included) in place.
    for (const HeadRun& r : runs) {
        gemm_batched(Trans::no,
                     Trans::yes,
                     seq,
                     seq,
                     head_dim,
                     1.0f,
                     {dout.data + r.q_off, q_ld, head_dim},
                     {v.data + r.kv_off, kv_ld, r.kv_stride},
                     0.0f,
                     {ds + r.p_off, seq, ss},
                     r.count);
    }
    CLEAVE_CUDA_CHECK(launch_causal_softmax_bwd(
        probs.data, ds, batch * heads, seq, attention_scale(head_dim), stream_));
    // dQ = dS K.
    for (const HeadRun& r : runs) {
        gemm_batched(Trans::no,
                     Trans::no,
                     seq,
                     head_dim,
                     seq,
                     1.0f,
                     {ds + r.p_off, seq, ss},
                     {k.data + r.kv_off, kv_ld, r.kv_stride},
                     0.0f,
                     {dq.data + r.q_off, q_ld, head_dim},
                     r.count);
    }
    // dK += dS^T Q.
    for (const HeadRun& r : head_runs(s, true)) {
        gemm_batched(Trans::yes,
                     Trans::no,
                     seq,
                     head_dim,
                     seq,
                     1.0f,
                     {ds + r.p_off, seq, ss},
                     {q.data + r.q_off, q_ld, head_dim},
                     1.0f,
                     {dk.data + r.kv_off, kv_ld, r.kv_stride},
                     r.count);
    }
    temp_free(ds);
}

void CudaBackend::xent_row_max(View logits, int64_t rows, int64_t cols, View row_max) {
    need_len(logits, rows * cols, "xent_row_max: logits too small");
    need_len(row_max, rows, "xent_row_max: row_max too small");
    CLEAVE_CUDA_CHECK(launch_row_max(logits.data, rows, cols, row_max.data, stream_));
}

void CudaBackend::xent_partial(View logits,
                               int64_t rows,
                               int64_t cols,
                               int64_t col_begin,
                               std::span<const int32_t> targets,
                               View row_max,
                               View sum_exp,
                               View target_logit) {
    CLEAVE_ASSERT(static_cast<int64_t>(targets.size()) == rows, "xent_partial: targets size");
    need_len(logits, rows * cols, "xent_partial: logits too small");
    need_len(row_max, rows, "xent_partial: row_max too small");
    need_len(sum_exp, rows, "xent_partial: sum_exp too small");
    need_len(target_logit, rows, "xent_partial: target_logit too small");
    if (rows == 0) {
        return;
    }
    int32_t* d_targets = upload_ints(targets);
    CLEAVE_CUDA_CHECK(launch_xent_partial(logits.data,
                                          rows,
                                          cols,
                                          col_begin,
                                          d_targets,
                                          row_max.data,
                                          sum_exp.data,
                                          target_logit.data,
                                          stream_));
    temp_free(d_targets);
}

void CudaBackend::xent_bwd(View logits,
                           int64_t rows,
                           int64_t cols,
                           int64_t col_begin,
                           std::span<const int32_t> targets,
                           View row_max,
                           View sum_exp,
                           float scale,
                           View dlogits) {
    CLEAVE_ASSERT(static_cast<int64_t>(targets.size()) == rows, "xent_bwd: targets size");
    need_len(logits, rows * cols, "xent_bwd: logits too small");
    need_len(dlogits, rows * cols, "xent_bwd: dlogits too small");
    need_len(row_max, rows, "xent_bwd: row_max too small");
    need_len(sum_exp, rows, "xent_bwd: sum_exp too small");
    if (rows == 0) {
        return;
    }
    int32_t* d_targets = upload_ints(targets);
    CLEAVE_CUDA_CHECK(launch_xent_bwd(logits.data,
                                      rows,
                                      cols,
                                      col_begin,
                                      d_targets,
                                      row_max.data,
                                      sum_exp.data,
                                      scale,
                                      dlogits.data,
                                      stream_));
    temp_free(d_targets);
}

void CudaBackend::adam(View w,
                       View g,
                       View m,
                       View v,
                       float lr,
                       float beta1,
                       float beta2,
                       float eps,
                       float weight_decay,
                       int64_t step) {
    CLEAVE_ASSERT(g.size == w.size && m.size == w.size && v.size == w.size, "adam: size mismatch");
    CLEAVE_ASSERT(step >= 1, "adam: step starts at 1");
    AdamArgs a;
    a.lr = lr;
    a.beta1 = beta1;
    a.beta2 = beta2;
    a.eps = eps;
    a.weight_decay = weight_decay;
    // Bias corrections in double, as the CPU reference computes them.
    a.c1 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta1), step));
    a.c2 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta2), step));
    CLEAVE_CUDA_CHECK(launch_adam(w.data, g.data, m.data, v.data, w.size, a, stream_));
}

}  // namespace cleave::executor::gpu
