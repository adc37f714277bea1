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

/// The Mamba-2 mixer's sizes (core/model.hpp MambaSpec), split over TP by heads and by B / C
/// groups as Megatron-Core's MambaMixer does (megatron/core/ssm/mamba_mixer.py @d98e8a64:
/// nheads_local_tp = nheads / tp, ngroups_local_tp = ngroups / tp).
struct SsmDims {
    int64_t heads = 0;  // global; 0 = the model has no Mamba layer
    int64_t head_dim = 0;
    int64_t state = 0;
    int64_t groups = 1;
    int64_t conv_kernel = 4;
    int64_t chunk = 128;

    [[nodiscard]] int64_t d_inner() const { return heads * head_dim; }
};

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
    bool squared_relu = false;  // MLP activation relu(x)^2 (Nemotron-H) instead of GeLU
    float eps = 1e-5f;
    MoeDims moe;  // MoE layers (issue 16); set by the caller from make_moe_dims
    SsmDims ssm;  // Mamba-2 layers of a hybrid model (issue 26)

    [[nodiscard]] int64_t tokens() const { return seq * batch; }

    [[nodiscard]] int64_t local_tokens() const { return sp ? tokens() / tp : tokens(); }

    [[nodiscard]] int64_t local_row_begin() const { return sp ? tp_rank * local_tokens() : 0; }

    [[nodiscard]] int64_t heads_local() const { return heads / tp; }

    [[nodiscard]] int64_t kv_local() const { return kv_heads / tp; }

    [[nodiscard]] int64_t ffn_local() const { return ffn / tp; }

    [[nodiscard]] int64_t vocab_local() const { return vocab / tp; }

    [[nodiscard]] int64_t vocab_begin() const { return tp_rank * vocab_local(); }

    [[nodiscard]] int64_t ssm_heads_local() const { return ssm.heads / tp; }

    [[nodiscard]] int64_t ssm_groups_local() const { return ssm.groups / tp; }

    [[nodiscard]] int64_t d_inner_local() const { return ssm_heads_local() * ssm.head_dim; }

    /// Width of the local B (and of C): this rank's groups x state.
    [[nodiscard]] int64_t bc_local() const { return ssm_groups_local() * ssm.state; }

    /// The local SSD scan over a whole micro-batch (every row: the sequence is gathered).
    [[nodiscard]] SsdShape ssd_shape() const {
        return {seq, batch, ssm_heads_local(), ssm.head_dim, ssm_groups_local(), ssm.state,
                ssm.chunk};
    }
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

/// What a layer computes. A transformer's layer is attention then an MLP (or MoE); a hybrid
/// model's layer (core/model.hpp LayerKind) is one block with its own pre-norm and residual:
/// attention (norm1 + attention), mlp (norm2 + MLP, or MoE when the router is set) or mamba.
enum class Block : uint8_t { transformer, attention, mlp, mamba };

/// A Mamba-2 layer's tensors (Megatron-Core MambaMixer). in_proj is held as five column-parallel
/// matrices [hidden, width] (z and x: d_inner, B and C: groups x state, dt: heads), each split
/// over TP as Megatron splits the fused one; the depthwise conv's taps [kernel, channels] and
/// bias [1, channels] for x, B and C; per-head dt_bias, A_log and D; the gated norm's gain
/// [1, d_inner]; out_proj row-parallel [d_inner, hidden]. No linear biases (Megatron:
/// bias=False on in_proj and out_proj).
struct MambaHandles {
    int64_t in_z = -1, in_x = -1, in_b = -1, in_c = -1, in_dt = -1;
    int64_t conv_x_w = -1, conv_x_b = -1, conv_b_w = -1, conv_b_b = -1, conv_c_w = -1,
            conv_c_b = -1;
    int64_t dt_bias = -1, a_log = -1, d = -1, norm_g = -1, out = -1;
};

struct LayerHandles {
    Block block = Block::transformer;
    int64_t norm1_g = -1, norm1_b = -1;
    int64_t wq = -1, bq = -1, wk = -1, bk = -1, wv = -1, bv = -1, wo = -1, bo = -1;
    int64_t norm2_g = -1, norm2_b = -1;
    int64_t w1 = -1, b1 = -1;            // GeLU: first matrix; SwiGLU: gate
    int64_t w3 = -1, b3 = -1;            // SwiGLU: up
    int64_t w2 = -1, b2 = -1;            // second (down) matrix
    int64_t router = -1;                 // MoE layer: router [hidden, experts] (else -1)
    std::vector<ExpertHandles> experts;  // MoE layer: this rank's experts, in order
    MambaHandles mamba;                  // Block::mamba (norm1 is its pre-norm)

    /// Every dense (non-expert) tensor of the layer, -1 where absent.
    [[nodiscard]] std::vector<int64_t> dense_handles() const;
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

/// A Mamba-2 layer's saved tensors: the in_proj outputs (the conv and its SiLU are recomputed
/// in the backward, as the fused causal-conv1d kernels do), the scan output, the gated norm's
/// statistics and its output (out_proj's input).
struct MambaCache {
    Buffer z, xr, br, cr, dt, y, rstd, g;
};

struct LayerCache {
    Buffer x, n1, mean1, rstd1, n1_full, q, k, v, probs, ctx;
    Buffer x2, n2, mean2, rstd2, n2_full, a, up, act;
    MoeCache moe;
    MambaCache mamba;
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
    // x + attention(norm1(x)); keeps x in lc.x.
    Buffer attention_block_fwd(const LayerHandles& l, Buffer x, LayerCache& lc);
    // x + mlp(norm2(x)) (or MoE); keeps x in lc.x2.
    Buffer mlp_block_fwd(const LayerHandles& l, Buffer x, LayerCache& lc);
    // x + mamba(norm1(x)) (executor/mamba.cpp); keeps x in lc.x.
    Buffer mamba_fwd(const LayerHandles& l, Buffer x, LayerCache& lc);
    // Gradient of the mixer branch only (the caller adds the residual's dy).
    Buffer mamba_bwd(const LayerHandles& l, View dy, LayerCache& lc);
    // The conv + SiLU of x, B and C from the saved in_proj outputs: conv outputs (SiLU's
    // inputs) and SiLU outputs (the scan's inputs).
    struct MambaConv {
        Buffer xc, xs, bc, bs, cc, cs;
    };
    MambaConv mamba_conv(const MambaHandles& m, const MambaCache& mc);
    // GeLU or squared ReLU (the ungated MLPs).
    void act_fwd(View a, View act);
    void act_bwd(View a, View dact, View da);
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
