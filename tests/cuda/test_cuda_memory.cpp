// Issue 17 on the GPU: activations saved for the backward are stored in 16 bits on a bf16 run
// (Backend::pack_activation), so a run's activation memory is the cost model's bf16 price.
#include "core/model.hpp"
#include "costmodel/memory.hpp"
#include "executor/cuda/cuda_backend.hpp"
#include "executor/run.hpp"
#include "tests/cuda/cuda_fixture.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

#include <doctest/doctest.h>

using namespace cleave;
using namespace cleave::executor;
using namespace cleave::executor::test;

namespace {

// fp32 -> bf16 with round-to-nearest-even, then back: the top 16 bits of the rounded value.
float bf16_round(float x) {
    uint32_t u = 0;
    std::memcpy(&u, &x, sizeof u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    u &= 0xFFFF0000u;
    float r = 0.0f;
    std::memcpy(&r, &u, sizeof r);
    return r;
}

BackendOptions bf16_fused() {
    BackendOptions o;
    o.precision = GemmPrecision::bf16;
    o.fused_attention = true;
    return o;
}

// A GPT sized so that every large saved tensor is a whole number of 2 MiB at both micro-batch
// sizes of the test below (T h 2 B = 2048 x 512 x 2 = 2 MiB at mbs 2), so the pool's rounding
// of allocations cannot change their difference.
ModelSpec memory_gpt() {
    ModelSpec m;
    m.name = "memory-gpt";
    m.layers = 24;
    m.hidden = 512;
    m.heads = 8;
    m.kv_heads = 8;
    m.ffn_hidden = 2048;
    m.vocab = 512;
    m.seq_len = 1024;
    return m;
}

int64_t peak_at(const ModelSpec& m, int64_t mbs) {
    JobSpec job;
    job.gpus = 1;
    job.global_batch = mbs;  // one micro-batch: its activations are all in flight
    job.seq_len = m.seq_len;
    Plan plan;
    plan.mbs = mbs;
    RunOptions ro;
    ro.iters = 1;
    ro.warmup = 0;
    auto gpu = make_cuda_backend(bf16_fused());
    return run_training(*gpu, m, job, plan, ro).peak_memory_B;
}

}  // namespace

TEST_SUITE("cuda") {
    TEST_CASE("cuda bf16 activations: pack rounds to bf16 and halves the tracked bytes") {
        ensure_mpi();
        const int64_t n = 1000;
        const std::vector<float> x = eighths(n, 31);
        std::vector<float> odd(x.begin(), x.end());
        for (size_t i = 0; i < odd.size(); ++i) {
            odd[i] += static_cast<float>(i) * 1e-3f;  // values bf16 cannot hold exactly
        }
        auto gpu = make_cuda_backend(bf16_fused());
        Buffer b(*gpu, n);
        gpu->upload(b, odd);
        const int64_t before = gpu->bytes_in_use();
        b.pack();
        CHECK(gpu->bytes_in_use() == before - 2 * n);  // 4 B -> 2 B per element
        b.pack();                                      // packing twice changes nothing
        CHECK(gpu->bytes_in_use() == before - 2 * n);
        b.unpack();
        CHECK(gpu->bytes_in_use() == before);
        std::vector<float> got(static_cast<size_t>(n));
        gpu->download(got, b);
        int wrong = 0;
        int rounded = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            wrong += got[i] != bf16_round(odd[i]) ? 1 : 0;
            rounded += got[i] != odd[i] ? 1 : 0;
        }
        CHECK(wrong == 0);
        CHECK(rounded > 0);  // the rounding happened
        auto fp32 = make_cuda_backend({});
        Buffer c(*fp32, n);
        const View v = c.view();
        c.pack();  // an fp32 run stores fp32
        CHECK(c.view().data == v.data);
    }

    TEST_CASE("cuda bf16 activations: a run's activation memory is the priced bf16 memory") {
        // memory_gpt, pp 1, one micro-batch of mbs sequences, fused attention, no recompute.
        // Per layer the executor keeps, packed to bf16: x, n1, q, k, v, ctx, x2, n2 (T h each,
        // kv_heads = heads) and the GeLU input and output (T f each): 2 (8 T h + 2 T f) bytes;
        // in fp32: the two norms' mean and rstd (16 T bytes) and the attention's log-sum-exp
        // (4 T heads bytes). The cost model (activation_per_layer, bf16, no dropout, fused)
        // prices 2 (2 T h + 2 T h + 4 T h + 2 T f) + 4 T heads: the same, less the 16 T of norm
        // statistics. Model states do not depend on mbs, so the difference of the peaks at
        // mbs 4 and mbs 2 (dT = 2048 tokens) is
        //   dPeak = L (dPriced + 16 dT) + dX,
        // dX being what the peak holds beyond the saved activations: at most one layer in fp32
        // beside its packed copy during its backward (+ the layer's 2 (8 dT h + 2 dT f)), its
        // gradient buffers (dy, dx, dq, dk, dv, dctx, dn: 7 dT h; d_act, d_a: 2 dT f, in fp32:
        // 4 (7 dT h + 2 dT f)), and the head's fp32 tensors (x, n: 2 dT h; logits and their
        // gradient: 2 dT V, 4 B each). With h = 512, f = 2048, V = 512: per layer dPriced =
        // 2 (8 x 512 + 2 x 2048) dT + 32 dT = 16416 dT; dX <= (16384 + 4 (3584 + 4096) + 4 (1024
        // + 1024)) dT = 55296 dT = 0.14 of L dPriced (L = 24). Stored in fp32 the layers alone
        // would add 2 L dPriced. Below, the allocator's rounding of the small fp32 tensors (a
        // few 64 KiB, at most L x 96 KiB = 2.3 MiB of 770 MiB) is well inside the 3 % of slack.
        ensure_mpi();
        const ModelSpec m = memory_gpt();
        const int64_t dT = 2 * m.seq_len;
        JobSpec job;
        job.gpus = 1;
        job.seq_len = m.seq_len;
        job.stack.attention = AttentionImpl::fused;
        job.stack.hidden_dropout = false;
        Plan p2;
        p2.mbs = 2;
        Plan p4;
        p4.mbs = 4;
        const double priced_layer =
            activation_per_layer(m, job, p4, false, Recompute::none).value() -
            activation_per_layer(m, job, p2, false, Recompute::none).value();
        CHECK(priced_layer == doctest::Approx(16416.0 * static_cast<double>(dT)));  // by hand
        const double layers = static_cast<double>(m.layers);
        const auto d_peak = static_cast<double>(peak_at(m, 4) - peak_at(m, 2));
        const double priced = layers * priced_layer;
        const double x_bound = 55296.0 * static_cast<double>(dT);
        MESSAGE("peak difference ", d_peak, " B; priced activations ", priced, " B");
        CHECK(d_peak >= 0.97 * priced);
        CHECK(d_peak <= priced + layers * 16.0 * static_cast<double>(dT) + x_bound);
        CHECK(d_peak < 1.5 * priced);  // fp32 storage would be at least 2x
    }
}
