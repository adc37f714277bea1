// Per-class memory-bound efficiencies and the batched-GEMM efficiency lookup
// (costmodel/compute.hpp, docs/calibrate.md).
#include "costmodel/compute.hpp"
#include "costmodel/memory.hpp"
#include "tests/costmodel/fixtures.hpp"

#include <doctest/doctest.h>

using namespace cleave;

namespace {

// 1 GB/s "HBM" at 0.5, fp32 peak 10 GFLOP/s at a constant GEMM efficiency of 1: round numbers.
ClusterSpec slow_gpu() {
    ClusterSpec c = test::dgx_a100();
    c.gpu.hbm_bw = gbps(1);
    c.gpu.hbm_efficiency = 0.5;
    c.gpu.peak_fp32 = tflops(0.01);
    c.gpu.gemm_efficiency = {{flop(1e6), 1.0}};
    return c;
}

// A small GPT as the CPU executor runs it: 4 layers, h 256, 8 heads, ffn 1024, V 2048, s 128.
ModelSpec small_gpt() {
    ModelSpec m;
    m.name = "small-gpt";
    m.layers = 4;
    m.hidden = 256;
    m.heads = 8;
    m.kv_heads = 8;
    m.ffn_hidden = 1024;
    m.vocab = 2048;
    m.seq_len = 128;
    return m;
}

JobSpec fp32_job() {
    JobSpec j = test::job(1, 8, 128);
    j.compute = Dtype::fp32;
    j.weights = Dtype::fp32;
    j.grads = Dtype::fp32;
    j.optimizer_states = Dtype::fp32;
    j.master_weights = false;
    return j;
}

}  // namespace

TEST_SUITE("costmodel") {
    TEST_CASE("kernel classes: efficiency falls back to hbm_efficiency, then to 1") {
        GpuSpec g = slow_gpu().gpu;
        g.norm_efficiency = 0.25;
        CHECK(kernel_efficiency(g, KernelClass::norm) == 0.25);
        CHECK(kernel_efficiency(g, KernelClass::activation) == 0.5);
        CHECK(kernel_efficiency(g, KernelClass::optimizer) == 0.5);
        g.hbm_efficiency = 0.0;
        CHECK(kernel_efficiency(g, KernelClass::softmax) == 1.0);
        CHECK(kernel_efficiency(g, KernelClass::norm) == 0.25);
        // 1e6 B of norm kernels at 1 GB/s x 0.25 = 4 ms.
        CHECK(memory_time(g, KernelClass::norm, bytes(1e6)).value() ==
              doctest::Approx(4e-3).epsilon(1e-12));
        CHECK(std::string(to_string(KernelClass::cross_entropy)) == "cross_entropy");
        CHECK(std::string(to_string(KernelClass::gated_activation)) == "gated_activation");
    }

    TEST_CASE("kernel classes: one layer's bytes split by class") {
        // mbs 1, fp32 (4 B), tp 1: 128 tokens; norm region e = 128 x 256 = 32768 elements;
        // MLP inner 128 x 1024 = 131072; scores 8 heads x 128 x 128 = 131072.
        const LayerTraffic t = layer_traffic(small_gpt(), fp32_job(), test::plan(1, 1, 1), false);
        // fwd: norms 2 x (4 + 4) e = 524288; bias-dropout-add 2 x (3 x 4 + 1) e = 851968;
        // GeLU (4 + 4) x inner = 1048576; softmax + dropout (4 + 4 + 4 + 4 + 1) x scores.
        CHECK(t.fwd_by_class.norm.value() == 524288.0);
        CHECK(t.fwd_by_class.elementwise.value() == 851968.0);
        CHECK(t.fwd_by_class.activation.value() == 1048576.0);
        CHECK(t.fwd_by_class.gated_activation.value() == 0.0);
        CHECK(t.fwd_by_class.softmax.value() == 17.0 * 131072.0);
        CHECK(t.fwd_by_class.cross_entropy.value() == 0.0);
        CHECK(t.fwd.value() == 4653056.0);  // 524288 + 851968 + 1048576 + 2228224
        // bwd: norms 2 x 12 e = 786432; dropout 2 x 9 e and each block input's two gradients
        // summed 2 x 12 e = 1376256; GeLU 12 x inner = 1572864; softmax 12 + attention dropout
        // 9 per score = 21 x 131072 = 2752512.
        CHECK(t.bwd_by_class.norm.value() == 786432.0);
        CHECK(t.bwd_by_class.elementwise.value() == 1376256.0);
        CHECK(t.bwd_by_class.activation.value() == 1572864.0);
        CHECK(t.bwd_by_class.softmax.value() == 2752512.0);
        CHECK(t.bwd.value() == 6488064.0);

        ModelSpec swiglu = small_gpt();
        swiglu.mlp = MlpKind::swiglu;
        const LayerTraffic s = layer_traffic(swiglu, fp32_job(), test::plan(1, 1, 1), false);
        // SwiGLU: gate, up, out 12 B per inner element forward, 20 B backward.
        CHECK(s.fwd_by_class.activation.value() == 0.0);
        CHECK(s.fwd_by_class.gated_activation.value() == 12.0 * 131072.0);
        CHECK(s.bwd_by_class.gated_activation.value() == 20.0 * 131072.0);
    }

    TEST_CASE("kernel classes: sandwich norms (Gemma) double the norms' bytes and saved inputs") {
        // small_gpt, fp32, mbs 1, tp 1: e = 128 x 256 = 32768 elements of the norm region. A norm
        // after each block too (Gemma3DecoderLayer: post_attention_layernorm,
        // post_feedforward_layernorm): four norms a layer instead of two. fwd 4 x (4 + 4) e =
        // 1048576 (two: 524288); bwd 4 x 12 e = 1572864 (two: 786432). Nothing else moves.
        ModelSpec g = small_gpt();
        g.sandwich_norms = true;
        const LayerTraffic two = layer_traffic(small_gpt(), fp32_job(), test::plan(1, 1, 1), false);
        const LayerTraffic four = layer_traffic(g, fp32_job(), test::plan(1, 1, 1), false);
        CHECK(four.fwd_by_class.norm.value() == 1048576.0);
        CHECK(four.bwd_by_class.norm.value() == 1572864.0);
        CHECK(four.fwd_by_class.elementwise.value() == two.fwd_by_class.elementwise.value());
        CHECK(four.fwd.value() - two.fwd.value() == 524288.0);
        // Saved for the backward: each post-norm keeps its input, the block's output, 4 B x e:
        // 2 x 4 x 32768 = 262144 B more a layer; the parameters 2 x 256 more (RMSNorm weights;
        // small_gpt's LayerNorm has a bias too: 2 x 512).
        const Bytes a2 = activation_per_layer(small_gpt(), fp32_job(), test::plan(1, 1, 1), false,
                                              Recompute::none);
        const Bytes a4 =
            activation_per_layer(g, fp32_job(), test::plan(1, 1, 1), false, Recompute::none);
        CHECK(a4.value() - a2.value() == 262144.0);
        CHECK(params_layer_norms(g) - params_layer_norms(small_gpt()) == 1024);
        // Full recompute keeps the layer input alone, either way.
        CHECK(activation_per_layer(g, fp32_job(), test::plan(1, 1, 1), false, Recompute::full)
                  .value() == activation_per_layer(small_gpt(), fp32_job(), test::plan(1, 1, 1),
                                                   false, Recompute::full)
                                  .value());
    }

    TEST_CASE("kernel classes: GPT-OSS's clamped GLU clamps and concatenates unfused") {
        // small_gpt as an MoE of 4 experts, top-2, expert FFN 512, SwiGLU shapes; fp32, mbs 1,
        // tp 1, 128 tokens: routed copies x f_e = 128 x 2 x 512 = 131072 elements. The clamp
        // path (Megatron-LM @d98e8a64 fused_bias_geglu.py weighted_bias_quick_geglu_impl):
        // forward 8 x 4 B x 131072 = 4194304 B more elementwise traffic (two clamps, each read f
        // + write f, and the cat, read 2 f + write 2 f); backward 10 x 4 x 131072 = 5242880
        // (the clamps' gradients 6 f, the chunk's gradient re-concatenated 4 f). Saved for the
        // backward: each clamp's input, 2 f per routed copy, 2 x 4 x 131072 = 1048576 B.
        ModelSpec plain = small_gpt();
        plain.mlp = MlpKind::swiglu;
        plain.moe.experts = 4;
        plain.moe.top_k = 2;
        plain.moe.expert_ffn_hidden = 512;
        ModelSpec oss = plain;
        oss.clamped_glu = true;
        const Plan p = test::plan(1, 1, 1);
        const LayerTraffic a = layer_traffic(plain, fp32_job(), p, true);
        const LayerTraffic b = layer_traffic(oss, fp32_job(), p, true);
        CHECK(b.fwd_by_class.elementwise.value() - a.fwd_by_class.elementwise.value() == 4194304.0);
        CHECK(b.bwd_by_class.elementwise.value() - a.bwd_by_class.elementwise.value() == 5242880.0);
        CHECK(b.fwd_by_class.gated_activation.value() == a.fwd_by_class.gated_activation.value());
        CHECK(activation_per_layer(oss, fp32_job(), p, true, Recompute::none).value() -
                  activation_per_layer(plain, fp32_job(), p, true, Recompute::none).value() ==
              1048576.0);
        // A dense layer has no clamp path; and recomputing moe_act drops the clamps' inputs too.
        CHECK(layer_traffic(oss, fp32_job(), p, false).fwd.value() ==
              layer_traffic(plain, fp32_job(), p, false).fwd.value());
        Plan act = p;
        act.recompute = Recompute::selective;
        act.recompute_modules = recompute_module::moe_act;
        CHECK(activation_per_layer(oss, fp32_job(), act, true, Recompute::selective).value() ==
              activation_per_layer(plain, fp32_job(), act, true, Recompute::selective).value());
    }

    TEST_CASE("kernel classes: RoPE bytes, and MLA rotating only its decoupled rope columns") {
        // small_gpt with RoPE, fp32, 128 tokens: q and k each 8 heads x 32 = 256 columns read and
        // written: 2 x 4 x 128 x (8 + 8) x 32 = 524288 B more elementwise traffic each way.
        ModelSpec plain = small_gpt();
        const double base = layer_traffic(plain, fp32_job(), test::plan(1, 1, 1), false)
                                .fwd_by_class.elementwise.value();
        plain.positions = PositionKind::rope;
        const LayerTraffic r = layer_traffic(plain, fp32_job(), test::plan(1, 1, 1), false);
        CHECK(r.fwd_by_class.elementwise.value() - base == 524288.0);
        CHECK(r.bwd_by_class.elementwise.value() -
                  layer_traffic(small_gpt(), fp32_job(), test::plan(1, 1, 1), false)
                      .bwd_by_class.elementwise.value() ==
              524288.0);
        // MLA (nope 32, rope 16, v 32) under Megatron-Core's fused MLA RoPE: q's 8 heads x 16
        // rope columns in place (read + write: 2 x 8 x 16 = 256) and the key and value split out
        // of the kv up projection with the shared 16-wide key part rotated and concatenated to
        // every head: read 8 x (32 + 32) + 16, write 8 x (32 + 16) + 8 x 32 (1168): 4 B x 128
        // tokens x 1424 = 729088 B.
        ModelSpec mla = plain;
        mla.mla.kv_lora_rank = 64;
        mla.mla.qk_nope_dim = 32;
        mla.mla.qk_rope_dim = 16;
        mla.mla.v_dim = 32;
        const LayerTraffic q = layer_traffic(mla, fp32_job(), test::plan(1, 1, 1), false);
        CHECK(q.fwd_by_class.elementwise.value() - base == 729088.0);
        CHECK(q.rope.value() == 729088.0);
    }

    TEST_CASE("kernel classes: a layer prices each class at its own efficiency") {
        const ClusterSpec base = slow_gpu();
        ClusterSpec gelu_slow = base;
        gelu_slow.gpu.activation_efficiency = 0.05;
        const ModelSpec m = small_gpt();
        const JobSpec j = fp32_job();
        const Plan p = test::plan(1, 1, 1);
        const LayerCost a = layer_cost(m, base, j, p, plan_links(base, p), false);
        const LayerCost b = layer_cost(m, gelu_slow, j, p, plan_links(gelu_slow, p), false);
        // Only GeLU's bytes change price: fwd 1048576 B x (1 / 0.05 - 1 / 0.5) ns = 18.874368 ms,
        // bwd 1572864 B x 18 ns = 28.311552 ms.
        CHECK((b.fwd - a.fwd).value() == doctest::Approx(0.018874368).epsilon(1e-9));
        CHECK((b.bwd - a.bwd).value() == doctest::Approx(0.028311552).epsilon(1e-9));
        // Without class keys the layer's memory time is the single-efficiency price of all its
        // bytes: 4653056 B / 0.5 GB/s = 9.306112 ms on top of the GEMMs.
        const LayerGemms g = layer_gemms(m, j, p, false);
        const Seconds gemms =
            gemm_time(base.gpu, Dtype::fp32, g.qkv) + gemm_time(base.gpu, Dtype::fp32, g.proj) +
            gemm_time(base.gpu, Dtype::fp32, g.mlp_in) +
            gemm_time(base.gpu, Dtype::fp32, g.mlp_out) +
            gemm_time(base.gpu, Dtype::fp32, g.score) + gemm_time(base.gpu, Dtype::fp32, g.attn_v);
        CHECK((a.fwd - gemms).value() == doctest::Approx(9.306112e-3).epsilon(1e-9));
    }

    TEST_CASE("kernel classes: output layer, embedding and optimizer use their classes") {
        ClusterSpec c = slow_gpu();
        c.gpu.cross_entropy_efficiency = 0.1;
        c.gpu.norm_efficiency = 0.25;
        c.gpu.elementwise_efficiency = 0.2;
        c.gpu.optimizer_efficiency = 0.2;
        const ModelSpec m = small_gpt();
        const JobSpec j = fp32_job();
        const Plan p = test::plan(1, 1, 1);
        const PlanLinks links = plan_links(c, p);
        // Logits GEMM 128 x 2048 x 256 = 134217728 FLOP at 10 GFLOP/s = 13.4217728 ms; final
        // norm 2 x 4 x 32768 B at 0.25 GB/s = 1.048576 ms; cross-entropy (4 + 16) x 262144
        // logits at 0.1 GB/s = 52.4288 ms.
        const EdgeCost out = output_cost(m, c, j, p, links);
        CHECK(out.fwd.value() == doctest::Approx(13.4217728e-3 + 1.048576e-3 + 52.4288e-3));
        // bwd: 2 GEMMs; norm 12 x 32768 B / 0.25 GB/s = 1.572864 ms; (4 + 4) x 262144 B / 0.1
        // GB/s = 20.97152 ms.
        CHECK(out.bwd.value() == doctest::Approx(2.0 * 13.4217728e-3 + 1.572864e-3 + 20.97152e-3));
        // Embedding (elementwise, learned positions): fwd (2 + 2) x 4 + 13 = 29 B per element,
        // 29 x 32768 B / 0.2 GB/s = 4.75136 ms; bwd (4 + 8) x 32768 / 0.2 GB/s = 1.96608 ms.
        const EdgeCost emb = embedding_cost(m, c, j, p, links);
        CHECK(emb.fwd.value() == doctest::Approx(4.75136e-3).epsilon(1e-12));
        CHECK(emb.bwd.value() == doctest::Approx(1.96608e-3).epsilon(1e-12));
        // Adam, fp32 weights without a master copy: w 2 x 4 + g 2 x 4 + m, v 2 x 2 x 4 = 32 B
        // per parameter; 1e6 parameters at 0.2 GB/s = 0.16 s.
        CHECK(optimizer_time(c.gpu, j, 1e6).value() == doctest::Approx(0.16).epsilon(1e-12));
    }

    TEST_CASE("kernel classes: batched GEMMs priced at one GEMM's size when run as a loop") {
        GpuSpec g = slow_gpu().gpu;
        // One Q K^T of 128 x 128 x 32: 1048576 FLOP; 16 of them: 16777216 FLOP.
        g.gemm_efficiency = {{flop(1048576.0), 0.25}, {flop(16777216.0), 0.8}};
        const GemmShape batch{128.0, 128.0, 32.0, 16.0};
        // One batched kernel: 16777216 / (1e10 x 0.8) = 2.097152 ms.
        CHECK(gemm_time(g, Dtype::fp32, batch).value() ==
              doctest::Approx(2.097152e-3).epsilon(1e-12));
        // A loop of 16 (the CPU executor): each at 0.25, 16777216 / 2.5e9 = 6.7108864 ms.
        g.batched_gemm_fused = false;
        CHECK(gemm_time(g, Dtype::fp32, batch).value() ==
              doctest::Approx(6.7108864e-3).epsilon(1e-12));
        // A single GEMM is looked up at its own size either way: 1 x 16777216 FLOP at 0.8.
        const GemmShape one{512.0, 128.0, 128.0, 1.0};
        CHECK(gemm_time(g, Dtype::fp32, one).value() ==
              doctest::Approx(2.097152e-3).epsilon(1e-12));
    }
}
