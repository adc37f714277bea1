#include "costmodel/flops.hpp"
#include "tests/costmodel/fixtures.hpp"

#include <doctest/doctest.h>

using namespace cleave;

TEST_SUITE("costmodel") {
    TEST_CASE("flops: GPT-3 model FLOPs are 72 B s L h^2 (1 + s/6h + V/12Lh)") {
        const ModelSpec m = test::gpt3();
        const JobSpec j = test::job(1536, 1536);
        // 72 x 1536 x 2048 x 96 x 12288^2 x (1 + 2048/73728 + 51200/14155776) = 3.38620e18
        CHECK(model_flops(m, j).value() == doctest::Approx(3.3861967463873244e18).epsilon(1e-12));
        // full recompute: 96 B s L h^2 (1 + s/6h + V/16Lh) = 4.51097e18
        CHECK(hardware_flops(m, j, Recompute::full).value() ==
              doctest::Approx(4.5109707533231063e18).epsilon(1e-12));
        // selective, the paper's HFU convention: 72 B s L h^2 (1 + s/3h + V/12Lh) = 3.47739e18
        CHECK(hardware_flops(m, j, Recompute::selective).value() ==
              doctest::Approx(3.4773946388415775e18).epsilon(1e-12));
        CHECK(hardware_flops(m, j, Recompute::none) == model_flops(m, j));
    }

    TEST_CASE("flops: layer GEMMs after the TP split") {
        const ModelSpec m = test::gpt3();
        Plan p = test::plan(1, 8, 1);
        const LayerGemms g = layer_gemms(m, test::job(8, 1), p, false);
        // QKV: 2048 tokens x 12288 -> 3 x 12288 / 8 = 4608
        CHECK(g.qkv.m == 2048);
        CHECK(g.qkv.n == 4608);
        CHECK(g.qkv.k == 12288);
        // per GPU: 24 b s h^2 / t + 4 b s^2 h / t = 9.277e11 + 2.577e10
        const double want = 24.0 * 2048 * 12288.0 * 12288 / 8 + 4.0 * 2048.0 * 2048 * 12288 / 8;
        CHECK(forward_flops(g).value() == doctest::Approx(want).epsilon(1e-12));
    }

    TEST_CASE("flops: GQA and SwiGLU change the active GEMM weights") {
        ModelSpec m;  // Llama-2-70B: h 8192, 64 heads, 8 kv heads, ffn 28672, SwiGLU
        m.layers = 80;
        m.hidden = 8192;
        m.heads = 64;
        m.kv_heads = 8;
        m.ffn_hidden = 28672;
        m.vocab = 32000;
        m.mlp = MlpKind::swiglu;
        // attention 2 h^2 + 2 h (8 x 128) = 134,217,728 + 16,777,216; MLP 3 x 8192 x 28672
        const double want = 2.0 * 8192 * 8192 + 2.0 * 8192 * 1024 + 3.0 * 8192 * 28672;
        CHECK(gemm_params_active(m, false) == doctest::Approx(want).epsilon(1e-12));
    }

    TEST_CASE("flops: MoE layers count top_k experts") {
        ModelSpec m = test::gpt3();
        m.layers = 4;
        m.moe.experts = 8;
        m.moe.top_k = 2;
        m.moe.expert_ffn_hidden = 4 * 12288;
        m.moe.layer_freq = 2;
        CHECK(moe_layers_in(m, 0, 4) == 2);  // layers 0 and 2
        CHECK(moe_layers_in(m, 1, 2) == 0);
        CHECK(moe_layers_in(m, 2, 4) == 1);
        const double h = 12288;
        // MoE: attention 4 h^2 + 2 experts x 8 h^2 + router 8 h
        CHECK(gemm_params_active(m, true) == doctest::Approx(4 * h * h + 16 * h * h + 8 * h));
        Plan p = test::plan(8, 1, 1);
        p.ep = 8;
        const LayerGemms g = layer_gemms(m, test::job(8, 8), p, true);
        // one local expert gets 2048 x top_k 2 x ep 8 / experts 8 = 4096 tokens
        CHECK(g.mlp_in.count == 1);
        CHECK(g.mlp_in.m == 4096);
    }
}
