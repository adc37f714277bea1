#pragma once
// The workload: a decoder-only transformer built from a ModelSpec, split Megatron-style over TP
// (column-parallel QKV and first MLP matrices, row-parallel output projections, vocab-parallel
// embedding and cross-entropy, optional sequence parallelism) and over pipeline chunks. Forward
// and backward are written by hand against the Backend interface.

#include "core/model.hpp"
#include "core/plan.hpp"
#include "executor/backend.hpp"
#include "executor/moe.hpp"
#include "executor/params.hpp"
#include "executor/recorder.hpp"
#include "executor/schedule.hpp"

#include <cstdint>
#include <functional>
#include <vector>

namespace cleave::executor {

/// Sizes of one micro-batch on one rank. T = seq * batch rows in [seq, batch, hidden] order.
struct Dims {
    int64_t seq = 0;
    int64_t batch = 0;  // micro-batch size
    int64_t hidden = 0;
    int64_t heads = 0;
    int64_t kv_heads = 0;
    int64_t head_dim = 0;
    int64_t ffn = 0;
    int64_t vocab = 0;
    int64_t tp = 1;
    int64_t tp_rank = 0;
    bool sp = false;
    NormType norm = NormType::layernorm;
    bool swiglu = false;
    bool bias = true;       // every linear layer has a bias (GPT)
    bool qkv_bias = false;  // Q, K and V have biases (Qwen2); implied by bias
    bool rope = false;
    float eps = 1e-5f;
    MoeDims moe;  // MoE layers (issue 16); set by the caller from make_moe_dims

    [[nodiscard]] int64_t tokens() const { return seq * batch; }

    [[nodiscard]] int64_t local_tokens() const { return sp ? tokens() / tp : tokens(); }

    [[nodiscard]] int64_t local_row_begin() const { return sp ? tp_rank * local_tokens() : 0; }

    [[nodiscard]] int64_t heads_local() const { return heads / tp; }

    [[nodiscard]] int64_t kv_local() const { return kv_heads / tp; }

    [[nodiscard]] int64_t ffn_local() const { return ffn / tp; }

    [[nodiscard]] int64_t vocab_local() const { return vocab / tp; }

    [[nodiscard]] int64_t vocab_begin() const { return tp_rank * vocab_local(); }
};

/// Dims of `model` for a micro-batch of `mbs` sequences of `seq` tokens on TP rank `tp_rank`.
[[nodiscard]] Dims
make_dims(const ModelSpec& model, int64_t seq, int64_t mbs, const Plan& plan, int64_t tp_rank);

struct Groups {
    Group tp;
    Group dp;
    Group pp;
    Group embedding;  // first and last pipeline stage (tied embeddings with pp > 1)
    Group ep;         // MoE: the expert-model-parallel group (ep x etp ranks of one stage)
    Group edp;        // MoE: the expert-DP group (ranks holding the same expert shards)
};

struct LayerHandles {
    int64_t norm1_g = -1, norm1_b = -1;
    int64_t wq = -1, bq = -1, wk = -1, bk = -1, wv = -1, bv = -1, wo = -1, bo = -1;
    int64_t norm2_g = -1, norm2_b = -1;
    int64_t w1 = -1, b1 = -1;            // GeLU: first matrix; SwiGLU: gate
    int64_t w3 = -1, b3 = -1;            // SwiGLU: up
    int64_t w2 = -1, b2 = -1;            // second (down) matrix
    int64_t router = -1;                 // MoE layer: router [hidden, experts] (else -1)
    std::vector<ExpertHandles> experts;  // MoE layer: this rank's experts, in order
};

/// One model chunk (virtual pipeline stage) held by this rank.
struct ChunkHandles {
    int64_t virtual_stage = 0;
    bool first = false;  // holds the embedding
    bool last = false;   // holds the final norm, output layer and loss
    int64_t embedding = -1, position = -1, final_g = -1, final_b = -1, output = -1;
    std::vector<LayerHandles> layers;
};

/// Registers this rank's parameters for all its chunks (vpp of them, chunk v = virtual stage
/// v * pp + pp_rank). `counted` marks the copy that enters the checksum: DP rank 0, TP rank 0
/// for replicated tensors, the first stage for a tied embedding.
[[nodiscard]] std::vector<ChunkHandles> build_chunks(
    Params& params, const ModelSpec& model, const Dims& d, const Plan& plan, const RankCoords& at);

/// Tokens of one micro-batch in [seq, batch] order, and their next-token targets.
struct MicroBatch {
    std::vector<int32_t> ids;        // T
    std::vector<int32_t> targets;    // T
    std::vector<int32_t> positions;  // this rank's local rows (SP shard)
};

struct LayerCache {
    Buffer x, n1, mean1, rstd1, n1_full, q, k, v, probs, ctx;
    Buffer x2, n2, mean2, rstd2, n2_full, a, up, act;
    MoeCache moe;
};

/// Issue 17: a layer's saved activations in the backend's activation type between its forward
/// and its backward (Buffer::pack; bf16 / fp16 on a GPU running 16-bit GEMMs, unchanged fp32 on
/// the CPU): every tensor the backward reads except the norms' statistics (mean, rstd) and the
/// fused attention's log-sum-exp, which stay fp32 as in Megatron-LM / Transformer Engine.
/// `scores`: probs holds the seq x seq probabilities (unfused attention), packed too.
void pack_saved(LayerCache& lc, bool scores);
/// Inverse of pack_saved (fp32 again), just before the layer's backward.
void unpack_saved(LayerCache& lc);

struct ChunkCache {
    // Full recomputation keeps each layer's input only (Megatron --recompute-granularity full
    // --recompute-method uniform --recompute-num-layers 1) and rebuilds that layer's cache just
    // before its backward, so that one layer's activations are live at a time.
    std::vector<Buffer> inputs;
    std::vector<LayerCache> layers;
    Buffer head_x, head_n, head_mean, head_rstd, head_n_full, dlogits;
};

class Transformer {
public:
    /// `loss_scale` multiplies every token's loss gradient: 1 / (tokens in the global batch).
    Transformer(Backend& be,
                Recorder& rec,
                const Dims& d,
                const Groups& groups,
                const Params& params,
                Recompute recompute,
                float loss_scale);

    /// Forward of one chunk on one micro-batch. `input` is the previous chunk's output [local
    /// tokens, hidden] (ignored for the first chunk). Returns this chunk's output (empty for the
    /// last chunk, which adds its token losses to `loss_sum` and keeps dlogits in the cache).
    Buffer forward(const ChunkHandles& c,
                   Buffer input,
                   const MicroBatch& mb,
                   ChunkCache& cache,
                   double& loss_sum);

    /// Backward of one chunk: `dy` is the gradient of its output (ignored for the last chunk).
    /// Accumulates weight gradients; returns the gradient of its input (empty for the first).
    Buffer backward(const ChunkHandles& c, Buffer dy, const MicroBatch& mb, ChunkCache& cache);

    /// Called by backward() after each layer's backward, when set (issue 17: the run starts the
    /// layer's DP gradient bucket after the chunk's last backward).
    std::function<void(const LayerHandles&)> after_layer_backward;

    /// Sum of the MoE load-balancing losses of the forwards since the last call (one term per
    /// micro-batch and MoE layer, not yet weighted by MoeDims::microbatch_weight); resets it.
    [[nodiscard]] double take_aux_loss() {
        const double s = aux_sum_;
        aux_sum_ = 0.0;
        return s;
    }

private:
    Buffer run_layers(const ChunkHandles& c, Buffer x, ChunkCache& cache);
    Buffer embed(const ChunkHandles& c, const MicroBatch& mb);
    void head(
        const ChunkHandles& c, Buffer x, const MicroBatch& mb, ChunkCache& cache, double& loss_sum);
    Buffer layer_fwd(const LayerHandles& l, Buffer x, LayerCache& lc);
    Buffer layer_bwd(const LayerHandles& l, Buffer dy, LayerCache& lc);
    Buffer mlp_bwd(const LayerHandles& l, View dy, LayerCache& lc);
    Buffer attention_bwd(const LayerHandles& l, View dy, LayerCache& lc);
    // MoE MLP (executor/moe.cpp): x and dy are this rank's rows [local tokens, hidden]; both
    // return complete (not TP-partial) rows.
    Buffer moe_fwd(const LayerHandles& l, View x, MoeCache& mc);
    Buffer moe_bwd(const LayerHandles& l, View x, View dy, MoeCache& mc);
    void moe_route(const LayerHandles& l, View x, MoeCache& mc);
    void moe_plan(MoeCache& mc);
    Buffer moe_exchange(View rows, const MoeCache& mc, bool to_experts, const char* what);
    void moe_experts_fwd(const LayerHandles& l, MoeCache& mc, View y);
    Buffer moe_experts_bwd(const LayerHandles& l, MoeCache& mc, View dy);
    Buffer moe_router_bwd(const LayerHandles& l, View x, const MoeCache& mc, View dslot_gate);
    Buffer head_bwd(const ChunkHandles& c, ChunkCache& cache);
    void embed_bwd(const ChunkHandles& c, Buffer dx, const MicroBatch& mb);

    // Megatron's conjugate operators (with SP: all-gather / reduce-scatter along the sequence).
    View gather_seq(View local, Buffer& storage);
    Buffer reduce_out(Buffer partial);
    void linear(View x, int64_t rows, int64_t in, int64_t out, int64_t w, int64_t b, View y);
    void linear_bwd(View x,
                    View dy,
                    int64_t rows,
                    int64_t in,
                    int64_t out,
                    int64_t w,
                    int64_t b,
                    View dx,
                    float dx_beta);
    void norm(View x, int64_t g, int64_t b, View y, View mean, View rstd);
    void norm_bwd(View dy, View x, int64_t g, int64_t b, View mean, View rstd, View dx);

    // Every buffer of the workload is written in full before it is read (GEMM outputs with
    // beta 0, kernel outputs, collective and copy destinations), so none is zero-filled: the
    // modelled training's caching allocator does not clear memory either.
    Buffer buf(int64_t count) { return Buffer(be_, count, uninitialized); }

    Backend& be_;
    Recorder& rec_;
    Dims d_;
    Groups groups_;
    const Params& params_;
    Recompute recompute_;
    float loss_scale_;
    double aux_sum_ = 0.0;
    bool recomputing_ = false;  // full recomputation's rerun forward: no loss terms again
};

}  // namespace cleave::executor
