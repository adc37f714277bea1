#pragma once
// A block as uncompiled PyTorch model code runs it: the elementwise chains PyTorch launches one
// op at a time where torch.compile (and Megatron's fused kernels, which layer_traffic prices)
// read and write each tensor once, and what op-level selective activation checkpointing
// recomputes. Two model codes: torchtitan's and Hugging Face transformers' Llama. Sources:
// torchtitan @9dec370 (TT) torchtitan/models/norms.py RMSNorm, torchtitan/models/llama/model.py
// apply_rotary_emb / repeat_kv / FeedForward, torchtitan/parallelisms/parallelize_llama.py
// _save_list; huggingface/transformers src/transformers/models/llama/modeling_llama.py (v4.40,
// the HF Llama of 2024: LlamaRMSNorm, rotate_half / apply_rotary_pos_emb, LlamaMLP, the
// flash_attention_2 path); PyTorch autograd formulas (tools/autograd/derivatives.yaml) for the
// backward of each op.

#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"

namespace cleave {

/// Bytes and launches of one layer, one micro-batch, one GPU that torchtitan's or HF
/// transformers' block moves beyond the fused kernels layer_traffic prices: torchtitan's
/// repeat_kv copies (compiled too), and uncompiled the eager chains. Zero for other stacks, for
/// MLA and for a hybrid block's other kinds (their code is not derived here).
struct EagerTraffic {
    double fwd_bytes = 0.0;
    double bwd_bytes = 0.0;
    double fwd_launches = 0.0;
    double bwd_launches = 0.0;
};

/// The layers run as uncompiled PyTorch model code: torchtitan with its blocks not compiled
/// (SoftwareStack::torch_compile false), or HF transformers' modeling code (ModelCode).
[[nodiscard]] bool eager_chains(const JobSpec& job);

/// Per token and GPU, a = 2-byte activations, fp32 = 4 B; widths per token on the GPU: h (the
/// norm region, SP-split), q = heads x head_dim / tp, kv = kv_heads x head_dim / tp, f = the MLP's
/// inner width / tp.
/// - RMSNorm `(x.float() * rsqrt(x.float().pow(2).mean(-1) + eps)).type_as(x) * weight`, forward:
///   float (a + 4), pow (8), mean (4), mul (8), type_as (4 + a), weight mul (2a) = 4a + 28 B per
///   element, 8 launches (add eps and rsqrt on the per-row mean) against a fused norm's 2a and 1.
///   Backward: weight mul (grad 2a, its weight-gradient product and sum 4a), type_as (a + 4),
///   mul's two gradients (8, and the product and row sum 16), mean (4), pow (grad * 2x: 8 + 12),
///   the two gradients of x.float() summed (12), float (4 + a) = 8a + 68 B (84 at a = 2) and 13
///   launches (rsqrt's and the add's on the row means), against 3a and 1.
/// - RoPE through complex64 on q and k: float (a + 4), complex mul (8), type_as (4 + a) =
///   2a + 16 B per element, 3 launches each; backward the same; fused: 2a, 1 launch each.
/// - repeat_kv (kv_heads < heads): expand + reshape copies k and v to q's width: read a kv,
///   write a q each, 2 launches; backward the expand's sum back: the same bytes. Compiled too
///   (SDPA's expanded inputs are materialised).
/// The chains below only uncompiled:
/// - SwiGLU `w2(silu(w1 x) * w3 x)`: silu (2a) and the product (3a) = 5a per inner element, 2
///   launches; backward the product's two gradients (6a) and silu's (3a) = 9a, 3 launches;
///   fused: 3a and 5a, 1 launch each.
/// HF transformers' Llama: LlamaRMSNorm and LlamaMLP are the same chains; no repeat_kv (its
/// flash_attention_2 path hands flash-attn the kv heads as they are, GQA native); RoPE
/// `q * cos + rotate_half(q) * sin`, rotate_half = cat(-x2, x1), on q and on k: neg of half (a),
/// cat (2a), the two products (2a each), the sum (3a) = 10a per element, 5 launches; backward
/// the products' gradients (2a each), the neg's (a) and the two paths summed into q's gradient
/// (3a) = 8a, 4 launches; fused 2a and 1 each way.
/// `moe`: the FFN block is routed experts (their activation is not derived here; the norm is).
[[nodiscard]] EagerTraffic eager_traffic(
    const ModelSpec& m, const JobSpec& job, const Plan& p, bool has_attn, bool has_ffn, bool moe);

/// Whether op-level SAC (TT parallelize_llama.py _save_list: every other aten.mm, SDPA's output
/// saved; all else recomputed) prices the selective recompute of this layer: the stack's
/// op_level_sac, a dense, non-MLA full layer (as memory.cpp's op_sac_saved_bytes_per_token).
[[nodiscard]] bool op_level_sac(const ModelSpec& m, const JobSpec& job, const Plan& p, bool moe,
                                bool full_layer);

/// Of a dense layer's forward matmuls in order (q, k, v, o, w1, w3, w2; 6 without the gate),
/// the ones op-level SAC recomputes, the 2nd, 4th and 6th (k, o and w3, or k, o and w2 without
/// the gate; the counter restarts per block as the memory model assumes): their forward FLOPs
/// as a share of the layer's linear forward FLOPs per GPU.
[[nodiscard]] double op_sac_recomputed_linear_share(const ModelSpec& m);

}  // namespace cleave
