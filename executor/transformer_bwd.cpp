// The hand-written backward of executor/transformer.cpp (checked against finite differences in
// tests/executor/test_gradcheck.cpp).
#include "executor/transformer.hpp"

#include <array>

namespace cleave::executor {

Buffer Transformer::mlp_bwd(const LayerHandles& l, View dy, LayerCache& lc) {
    const int64_t T = d_.tokens();
    const int64_t Tl = d_.local_tokens();
    const int64_t h = d_.hidden;
    const int64_t f = d_.ffn_local();
    if (l.router >= 0) {
        Buffer dn2 = moe_bwd(l, lc.n2, dy, lc.moe);
        Buffer dx2 = buf(Tl * h);
        norm_bwd(dn2, lc.x2, l.norm2_g, l.norm2_b, lc.mean2, lc.rstd2, dx2);
        return dx2;
    }
    if (l.b2 >= 0) {
        be_.bias_grad(dy, Tl, h, params_.ref(l.b2).g);
    }
    Buffer dy_storage;
    const View dyf = gather_seq(dy, dy_storage);
    const View n2 = d_.sp ? lc.n2_full.view() : lc.n2.view();
    Buffer dact = buf(T * f);
    linear_bwd(lc.act, dyf, T, f, h, l.w2, -1, dact, 0.0f);
    Buffer da = buf(T * f);
    Buffer dn2 = buf(T * h);
    if (d_.swiglu) {
        Buffer dup = buf(T * f);
        be_.swiglu_bwd(lc.a, lc.up, dact, da, dup);
        linear_bwd(n2, da, T, h, f, l.w1, l.b1, dn2, 0.0f);
        linear_bwd(n2, dup, T, h, f, l.w3, l.b3, dn2, 1.0f);
    } else {
        act_bwd(lc.a, dact, da);
        linear_bwd(n2, da, T, h, f, l.w1, l.b1, dn2, 0.0f);
    }
    dn2 = reduce_out(std::move(dn2));
    Buffer dx2 = buf(Tl * h);
    norm_bwd(dn2, lc.x2, l.norm2_g, l.norm2_b, lc.mean2, lc.rstd2, dx2);
    return dx2;
}

Buffer Transformer::attention_bwd(const LayerHandles& l, View dy, LayerCache& lc) {
    const int64_t T = d_.tokens();
    const int64_t Tl = d_.local_tokens();
    const int64_t h = d_.hidden;
    const int64_t qd = d_.heads_local() * d_.head_dim;
    const int64_t kvd = d_.kv_local() * d_.head_dim;
    if (l.bo >= 0) {
        be_.bias_grad(dy, Tl, h, params_.ref(l.bo).g);
    }
    Buffer dy_storage;
    const View dyf = gather_seq(dy, dy_storage);
    Buffer dctx = buf(T * qd);
    linear_bwd(lc.ctx, dyf, T, qd, h, l.wo, -1, dctx, 0.0f);
    if (lc.probs.size() == 0) {  // selective recomputation of the attention core
        lc.probs = buf(be_.attention_saved_size(d_.seq, d_.batch, d_.heads_local()));
        be_.attention_fwd(lc.q,
                          lc.k,
                          lc.v,
                          d_.seq,
                          d_.batch,
                          d_.heads_local(),
                          d_.kv_local(),
                          d_.head_dim,
                          lc.probs,
                          lc.ctx);
    }
    Buffer dq = buf(T * qd);
    Buffer dk = buf(T * kvd);
    Buffer dv = buf(T * kvd);
    be_.attention_bwd(lc.q,
                      lc.k,
                      lc.v,
                      lc.probs,
                      dctx,
                      d_.seq,
                      d_.batch,
                      d_.heads_local(),
                      d_.kv_local(),
                      d_.head_dim,
                      dq,
                      dk,
                      dv);
    if (d_.rope) {
        be_.rope(dq, d_.seq, d_.batch, d_.heads_local(), d_.head_dim, 0, true);
        be_.rope(dk, d_.seq, d_.batch, d_.kv_local(), d_.head_dim, 0, true);
    }
    const View n1 = d_.sp ? lc.n1_full.view() : lc.n1.view();
    Buffer dn1 = buf(T * h);
    linear_bwd(n1, dq, T, h, qd, l.wq, l.bq, dn1, 0.0f);
    linear_bwd(n1, dk, T, h, kvd, l.wk, l.bk, dn1, 1.0f);
    linear_bwd(n1, dv, T, h, kvd, l.wv, l.bv, dn1, 1.0f);
    dn1 = reduce_out(std::move(dn1));
    Buffer dx = buf(Tl * h);
    norm_bwd(dn1, lc.x, l.norm1_g, l.norm1_b, lc.mean1, lc.rstd1, dx);
    return dx;
}

Buffer Transformer::layer_bwd(const LayerHandles& l, Buffer dy, LayerCache& lc) {
    if (l.block != Block::transformer) {
        Buffer dx = l.block == Block::attention ? attention_bwd(l, dy, lc)
                    : l.block == Block::mlp     ? mlp_bwd(l, dy, lc)
                                                : mamba_bwd(l, dy, lc);
        be_.axpy(1.0f, dy, dx);  // residual around the block
        return dx;
    }
    Buffer dx2 = mlp_bwd(l, dy, lc);
    be_.axpy(1.0f, dy, dx2);  // residual around the MLP
    dy = Buffer();
    Buffer dx = attention_bwd(l, dx2, lc);
    be_.axpy(1.0f, dx2, dx);  // residual around attention
    return dx;
}

Buffer Transformer::head_bwd(const ChunkHandles& c, ChunkCache& cache) {
    const int64_t T = d_.tokens();
    const int64_t h = d_.hidden;
    const int64_t V = d_.vocab_local();
    const ParamRef out = params_.ref(c.output);
    const View n = d_.sp ? cache.head_n_full.view() : cache.head_n.view();
    Buffer dn = buf(T * h);
    be_.gemm(Trans::no, Trans::no, T, h, V, 1.0f, cache.dlogits, out.w, 0.0f, dn);
    be_.gemm(Trans::yes, Trans::no, V, h, T, 1.0f, cache.dlogits, n, 1.0f, out.g);
    cache.dlogits = Buffer();
    dn = reduce_out(std::move(dn));
    Buffer dx = buf(d_.local_tokens() * h);
    norm_bwd(dn, cache.head_x, c.final_g, c.final_b, cache.head_mean, cache.head_rstd, dx);
    return dx;
}

void Transformer::embed_bwd(const ChunkHandles& c, Buffer dx, const MicroBatch& mb) {
    if (c.position >= 0) {
        be_.embedding_bwd(mb.positions, dx, 0, d_.seq, d_.hidden, params_.ref(c.position).g);
    }
    Buffer storage;
    const View dxf = gather_seq(dx, storage);
    be_.embedding_bwd(
        mb.ids, dxf, d_.vocab_begin(), d_.vocab_local(), d_.hidden, params_.ref(c.embedding).g);
}

namespace {

// The saved tensors pack_saved() stores in the activation type, but the probabilities: the
// dense layer's, and an MoE layer's received rows and expert activations.
std::array<Buffer*, 24> packable(LayerCache& lc) {
    return {&lc.x,
            &lc.n1,
            &lc.n1_full,
            &lc.q,
            &lc.k,
            &lc.v,
            &lc.ctx,
            &lc.x2,
            &lc.n2,
            &lc.n2_full,
            &lc.a,
            &lc.up,
            &lc.act,
            &lc.moe.xr,
            &lc.moe.a,
            &lc.moe.up,
            &lc.moe.act,
            &lc.mamba.z,
            &lc.mamba.xr,
            &lc.mamba.br,
            &lc.mamba.cr,
            &lc.mamba.dt,
            &lc.mamba.y,
            &lc.mamba.g};
}

}  // namespace

void pack_saved(LayerCache& lc, bool scores) {
    for (Buffer* b : packable(lc)) {
        b->pack();
    }
    if (scores) {
        lc.probs.pack();
    }
}

void unpack_saved(LayerCache& lc) {
    for (Buffer* b : packable(lc)) {
        b->unpack();
    }
    lc.probs.unpack();  // unchanged when it was not packed
}

Buffer
Transformer::backward(const ChunkHandles& c, Buffer dy, const MicroBatch& mb, ChunkCache& cache) {
    Buffer g = c.last ? head_bwd(c, cache) : std::move(dy);
    for (size_t i = c.layers.size(); i-- > 0;) {
        if (recompute_ == Recompute::full) {
            // Rebuild this layer's cache from its kept input; its output is not needed.
            cache.inputs[i].unpack();
            recomputing_ = true;
            (void)layer_fwd(c.layers[i], std::move(cache.inputs[i]), cache.layers[i]);
            recomputing_ = false;
        }
        unpack_saved(cache.layers[i]);
        g = layer_bwd(c.layers[i], std::move(g), cache.layers[i]);
        cache.layers[i] = LayerCache();
        if (after_layer_backward) {
            after_layer_backward(c.layers[i]);
        }
    }
    cache = ChunkCache();
    if (c.first) {
        embed_bwd(c, std::move(g), mb);
        return Buffer();
    }
    return g;
}

}  // namespace cleave::executor
