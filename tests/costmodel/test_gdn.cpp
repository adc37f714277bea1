// Gated DeltaNet layers (issue 26): Qwen3-Next's linear-attention mixer as a hybrid G layer, its
// gated attention and gated shared expert. Every expected value is worked by hand in the comment
// above it.
#include "core/load.hpp"
#include "core/errors.hpp"
#include "core/plan.hpp"
#include "core/stack.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/estimate.hpp"
#include "costmodel/flops.hpp"
#include "costmodel/memory.hpp"
#include "costmodel/splits.hpp"
#include "published/published.hpp"
#include "tests/cli_run.hpp"
#include "tests/costmodel/fixtures.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace cleave;

namespace {

ModelSpec qwen3_next() {
    return load_model(std::string(CLEAVE_TEST_DATA_DIR) +
                      "/examples/hf/qwen3-next-80b-a3b-instruct.config.json");
}

// h 64; 2 key heads and 4 value heads of 16; chunk 8: qk_dim 32, v_dim 64, in_proj 2 x 32 +
// 2 x 64 + 2 x 4 = 200, conv channels 2 x 32 + 64 = 128.
ModelSpec tiny() {
    return parse_model_toml(R"(
[model]
arch = "llama"
layers = 4
hidden = 64
heads = 4
kv_heads = 2
ffn_hidden = 96
vocab = 128
seq_len = 64
hybrid_layer_pattern = "G-*-"

[model.gdn]
qk_heads = 2
v_heads = 4
qk_head_dim = 16
v_head_dim = 16
chunk = 8
)",
                            "tiny-gdn.toml");
}

}  // namespace

TEST_SUITE("costmodel") {
    TEST_CASE("gdn: Qwen3-Next loads as 36 gated DeltaNet, 12 gated attention and 48 MoE blocks") {
        const ModelSpec m = qwen3_next();
        REQUIRE(is_hybrid(m));
        CHECK(m.layers == 96);  // 48 decoder layers, two blocks each
        CHECK(kind_count(m, LayerKind::gdn, 0, 96) == 36);
        CHECK(kind_count(m, LayerKind::attention, 0, 96) == 12);
        CHECK(kind_count(m, LayerKind::moe, 0, 96) == 48);
        CHECK(m.layer_kinds[6] == LayerKind::attention);  // decoder layer 3 = (3 + 1) % 4 == 0
        CHECK(m.attn_output_gate);
        CHECK(m.moe.shared_gate);
        // GDN block: in_proj 2048 x (2 x 2048 + 2 x 4096 + 2 x 32) = 2048 x 12,352 = 25,296,896;
        // conv1d (2 x 2048 + 4096) x 4 = 32,768; dt_bias + A_log 64; norm 128; out_proj 4096 x
        // 2048 = 8,388,608; pre-norm 2048: 33,720,512.
        CHECK(params_hybrid_layer(m, LayerKind::gdn) == 33720512);
        // Gated attention block: q + gate 2048 x 2 x 4096 = 16,777,216; k, v 2 x 2048 x 512 =
        // 2,097,152; o 4096 x 2048 = 8,388,608; q/k norms 2 x 256; pre-norm 2048: 27,265,536.
        CHECK(params_hybrid_layer(m, LayerKind::attention) == 27265536);
        // MoE block: router 2048 x 512 = 1,048,576; shared expert 3 x 2048 x 512 = 3,145,728 +
        // its gate 2048; 512 experts x 3,145,728 = 1,610,612,736; pre-norm 2048: 1,614,811,136.
        CHECK(params_hybrid_layer(m, LayerKind::moe) == 1614811136);
        // 36 x 33,720,512 + 12 x 27,265,536 + 48 x 1,614,811,136 + embedding 151,936 x 2048
        // (311,164,928) + head (311,164,928 + final norm 2048) = 79,674,391,296: the card's "80B",
        // and the count another public test derives from the checkpoint's safetensors (without
        // its mtp.* tensors, which transformers drops).
        CHECK(params_total(m) == 79674391296);
        // Active: each MoE block keeps 10 of 512 experts: 79,674,391,296 - 48 x 502 x 3,145,728
        // = 3,874,929,408, the same test's active count (the card's "3B": 3,252,599,552 without
        // either embedding).
        CHECK(params_active(m) == 3874929408);
        CHECK(params_active(m) - 2 * m.vocab * m.hidden == 3252599552);
    }

    TEST_CASE("gdn: the chunked delta rule's FLOPs and GEMM shapes") {
        const ModelSpec m = qwen3_next();
        // Hv (2 C (3 d_k + 2 d_v) + 6 d_k d_v) = 32 x (2 x 64 x 640 + 6 x 16,384) = 32 x 180,224
        // = 5,767,168 per token (Megatron's training.py count, 4 x 2 x 32 x 128^2 = 4,194,304,
        // leaves out the intra-chunk products).
        CHECK(gdn_scan_flops_per_token(m) == doctest::Approx(5767168.0));
        // in_proj 2048 x 12,352 + out_proj 4096 x 2048 = 33,685,504 weights.
        CHECK(gdn_gemm_params(m) == doctest::Approx(33685504.0));
        JobSpec j = test::job(8, 8, 4096);
        Plan p = test::plan(4, 2, 1);
        const GdnGemms g = gdn_gemms(m, j, p);
        // TP 2: in_proj 12,352 / 2 = 6,176 columns; 4096 / 64 = 64 chunks x 16 local heads =
        // 1024 per product, 3 x 1024 state products.
        CHECK(g.in_proj.n == doctest::Approx(6176.0));
        CHECK(g.out_proj.k == doctest::Approx(2048.0));
        CHECK(g.kk.count == doctest::Approx(1024.0));
        CHECK(g.state.count == doctest::Approx(3072.0));
        // The five products at t 2: 4096 tokens x 5,767,168 / 2 = 11,811,160,064 FLOPs.
        CHECK((gemm_flops(g.kk) + gemm_flops(g.wu) + gemm_flops(g.qk) + gemm_flops(g.attn_v) +
               gemm_flops(g.state))
                  .value() == doctest::Approx(11811160064.0));
    }

    TEST_CASE("gdn: a tiny layer's parameters, saved activations and kernel bytes") {
        const ModelSpec m = tiny();
        REQUIRE(m.gdn.in_proj_dim() == 200);
        // in_proj 64 x 200 = 12,800; conv 128 x 4 = 512; dt_bias + A_log 8; norm 16; out_proj
        // 64 x 64 = 4096; pre-norm (RMSNorm) 64: 17,496.
        CHECK(params_gdn_layer(m) == 17496);
        JobSpec j = test::job(1, 1, 64);
        j.stack = load_stack("megatron-core");
        const Plan p = test::plan(1, 1, 1);
        // bf16, t 1, per token: pre-norm + in_proj inputs (2 + 2) x 64 = 256; in_proj output
        // 2 x 200 = 400; conv output 2 x 128 = 256; q, k normed 2 x 64 and repeated to 4 heads
        // 2 x 128: 384; g fp32 + beta (4 + 2) x 4 = 24; A 2 x 4 x 8 = 64; o + norm output 2 x 2 x
        // 64 = 256; rstd 4 x 4 = 16; out_proj input 2 x 64 = 128: 1,784 B x 64 tokens = 114,176.
        CHECK(gdn_activation_per_layer(m, j, p, Recompute::none).value() ==
              doctest::Approx(114176.0));
        // Full recomputation keeps the layer input: 2 x 64 x 64 = 8,192.
        CHECK(gdn_activation_per_layer(m, j, p, Recompute::full).value() == doctest::Approx(8192.0));
        // Kernel bytes per token (compute.cpp gdn_traffic): q_e = k_e = 4 x 16 = 64, states
        // 2 x 4 x 16 x 16 / 8 = 256, g 4 x 4 = 16. WY 2 (64 + 64) + 16 + 2 x 4 + 2 x 4 x 8 +
        // 2 (64 + 64) = 600; state pass 2 (128 + 64) + 16 + 2 x 64 + 256 = 784; output pass
        // 2 (128 + 128) + 256 + 16 = 784: chunk 2,168. Forward: the pre-norm 2 x 2 x 64 = 256
        // (norm); the mixer's own kernels (ssm): gated norm 3 x 2 x 64 = 384, conv 2 x 2 x 128 =
        // 512, L2 norm 2 x 2 x 64 = 256, repeat 2 x 128 = 256, gates 2 x 2 x 4 + 2 x 4 + 16 = 40,
        // chunk 2,168: 3,616; the residual 3 x 2 x 64 = 384 (elementwise). Backward: pre-norm
        // 3 x 2 x 64 = 384; ssm 5 x 2 x 64 + 3 x 2 x 128 + 3 x 2 x 64 + 2 x 2,168 + 2 x 256 =
        // 6,640; the residual's two gradients summed 3 x 2 x 64 = 384.
        const LayerTraffic tr = gdn_traffic(m, j, p);
        CHECK(tr.fwd_by_class.norm.value() == doctest::Approx(256.0 * 64.0));
        CHECK(tr.fwd_by_class.ssm.value() == doctest::Approx(3616.0 * 64.0));
        CHECK(tr.fwd_by_class.elementwise.value() == doctest::Approx(384.0 * 64.0));
        CHECK(tr.bwd_by_class.norm.value() == doctest::Approx(384.0 * 64.0));
        CHECK(tr.bwd_by_class.ssm.value() == doctest::Approx(6640.0 * 64.0));
        CHECK(tr.bwd_by_class.elementwise.value() == doctest::Approx(384.0 * 64.0));
        // Scan FLOPs: 4 x (2 x 8 x (48 + 32) + 6 x 256) = 4 x 2,816 = 11,264 per token.
        CHECK(gdn_scan_flops_per_token(m) == doctest::Approx(11264.0));
    }

    TEST_CASE("gdn: a G layer's time is its GEMMs, its delta rule and its kernel bytes") {
        const ModelSpec m = qwen3_next();
        JobSpec j = test::job(8, 64, 4096);
        j.stack = load_stack("megatron-core");
        const Plan p = test::plan(8, 1, 1);
        const ClusterSpec c = load_cluster("dgx-h100");
        const PlanLinks links = plan_links(c, p);
        const LayerCost lc = gdn_layer_cost(m, c, j, p, links);
        const GdnGemms g = gdn_gemms(m, j, p);
        const Dtype cd = j.compute;  // bf16: the products run in the recipe's own 16 bits
        const Seconds lin = gemm_time(c.gpu, j.compute, g.in_proj) + gemm_time(c.gpu, j.compute, g.out_proj);
        const Seconds scan = gemm_time(c.gpu, cd, g.kk) + gemm_time(c.gpu, cd, g.wu) +
                             gemm_time(c.gpu, cd, g.qk) + gemm_time(c.gpu, cd, g.attn_v) +
                             gemm_time(c.gpu, cd, g.state);
        const LayerTraffic tr = gdn_traffic(m, j, p);
        // Forward: the two projections, the five products, the kernels' bytes at HBM speed.
        CHECK(lc.fwd.value() ==
              doctest::Approx((lin + scan + memory_time(c.gpu, tr.fwd_by_class)).value()));
        // Backward: twice the projections, twice the products plus W, U and two thirds of the
        // state products recomputed.
        const Seconds scan_bwd =
            2.0 * scan + gemm_time(c.gpu, cd, g.wu) + gemm_time(c.gpu, cd, g.state) * (2.0 / 3.0);
        CHECK(lc.bwd.value() ==
              doctest::Approx((2.0 * lin + scan_bwd + memory_time(c.gpu, tr.bwd_by_class)).value()));
        CHECK(lc.gemm.value() == doctest::Approx(3.0 * lin.value()));
        CHECK(lc.tp_fwd.value() == 0.0);  // t 1: no TP pair
        // CP 2: the in_proj output (2 B x 4096 / 2 tokens x 12,352) and the norm output (x 4096)
        // through two all-to-alls each way.
        Plan pc = test::plan(4, 1, 1);
        pc.cp = 2;
        const LayerCost lcp = gdn_layer_cost(m, c, j, pc, plan_links(c, pc));
        CHECK(lcp.cp_fwd.value() > 0.0);
        CHECK(lcp.cp_bwd.value() == doctest::Approx(lcp.cp_fwd.value()));
        CHECK(lcp.cp_bytes.value() ==
              doctest::Approx((collective_bytes_sent(Collective::all_to_all,
                                                     bytes(2.0 * 2048.0 * 12352.0), 2) +
                               collective_bytes_sent(Collective::all_to_all,
                                                     bytes(2.0 * 2048.0 * 4096.0), 2))
                                  .value() *
                              2.0));
    }

    TEST_CASE("gdn: Megatron-Bridge's FLOP count of Qwen3-Next") {
        // Per token forward, s = 4096 (flop_utils.py @067f987df, the GPT path Bridge takes for
        // Qwen3-Next; its hybrid path gives the same terms): 12 gated attention layers x
        // (2048 x (4096 + 512 + 512 + 4096) + 4096 x 2048 + 4096 x 4096 = 44,040,192); 36 GDN x
        // (2048 x 12,352 + 4 x 8192 + 4 x 32 x 128^2 + 2048 x 4096 = 35,815,424); 48 MoE x
        // 3 x 2048 x (10 x 512 + 512) = 34,603,008; all doubled: 6,957,563,904; logits 2 x 2048
        // x 151,936 = 622,329,856: 7,579,893,760; x 3 x B x s.
        const ModelSpec m = qwen3_next();
        JobSpec j = test::job(32, 256, 4096);
        CHECK(bridge_flops(m, j) == doctest::Approx(3.0 * 256.0 * 4096.0 * 7579893760.0));
        // A published row naming the model is priced with the shipped config.
        CHECK(std::string(shipped_model_config("Qwen3-Next-80B-A3B (Qwen3_Next)")) ==
              "qwen3-next-80b-a3b-instruct.config.json");
    }

    TEST_CASE("gdn: TP x CP must split the key and value heads, as Megatron asserts") {
        const ModelSpec m = qwen3_next();  // 16 key heads, 32 value heads
        JobSpec j = test::job(32, 32, 4096);
        Plan p = test::plan(2, 16, 1);
        CHECK(keeps(Rule::tp_gdn, m, j, p));
        p.tp = 8;
        p.cp = 4;
        p.dp = 1;
        CHECK_FALSE(keeps(Rule::tp_gdn, m, j, p));  // 32 ranks over 16 key heads
        bool named = false;
        for (const auto& v : plan_violations(m, j, p)) {
            named = named || (v.rule == Rule::tp_gdn &&
                              v.message == "tp x cp=32 does not divide linear_num_key_heads=16");
        }
        CHECK(named);
    }

    TEST_CASE("gdn: plan ranks Qwen3-Next and exports the G layers as Megatron flags") {
        const test::CliRun r = test::run_cleave(
            {"plan", std::string(CLEAVE_TEST_DATA_DIR) + "/examples/hf/qwen3-next-80b-a3b-instruct.config.json",
             "dgx-h100", "--gpus", "32", "--gbs", "256", "--seq", "4096", "--tp", "1", "--pp", "4",
             "--cp", "1", "--ep", "8", "--vpp", "1", "--top", "1", "--format", "megatron"});
        REQUIRE_MESSAGE(r.code == 0, r.err);
        // 96 blocks over 4 stages by work, not by count: the last stage also holds the output
        // layer (2 h V = 0.62 GFLOP a token, about 8 mean blocks: 36 G blocks x 73.1 MFLOP +
        // 48 MoE x 71.3 + 12 attention x ~90 over 96), so it takes 18 blocks and the other three
        // 26 each; a boundary may fall inside a decoder layer (between its G
        // and its E), as Megatron's hybrid pattern allows.
        CHECK(r.out.find("--hybrid-layer-pattern 'GEGEGE*EGEGEGE*EGEGEGE*EGE|GEGE*EGEGEGE*EGEGEGE*EGEGE|"
                         "GE*EGEGEGE*EGEGEGE*EGEGEGE|*EGEGEGE*EGEGEGE*E'") != std::string::npos);
        CHECK(r.out.find("--linear-num-value-heads 32") != std::string::npos);
        CHECK(r.out.find("--linear-key-head-dim 128") != std::string::npos);
        CHECK(r.out.find("--attention-output-gate") != std::string::npos);
        CHECK(r.out.find("--moe-shared-expert-gate") != std::string::npos);
        CHECK(r.out.find("--mamba-num-heads") == std::string::npos);  // no Mamba layer
    }

    TEST_CASE("gdn: the Bridge export writes Qwen3-Next's stages in decoder layers") {
        const std::string cfg =
            std::string(CLEAVE_TEST_DATA_DIR) + "/examples/hf/qwen3-next-80b-a3b-instruct.config.json";
        // Stages of 26, 26, 26, 18 blocks: 13, 13, 13, 9 decoder layers of Bridge's GPTModel.
        const test::CliRun r = test::run_cleave(
            {"plan", cfg, "dgx-h100", "--gpus", "32", "--gbs", "256", "--seq", "4096", "--tp", "1",
             "--pp", "4", "--cp", "1", "--ep", "8", "--vpp", "1", "--top", "1", "--format", "bridge"});
        REQUIRE_MESSAGE(r.code == 0, r.err);
        CHECK(r.out.find("model.pipeline_model_parallel_layout='Et*13|t*13|t*13|t*9L'") !=
              std::string::npos);
        CHECK(r.out.find("hybrid_layer_pattern") == std::string::npos);
        // 25 / 23 / 24 / 24 blocks: boundaries inside decoder layers, said, not written.
        const test::CliRun odd = test::run_cleave(
            {"plan", cfg, "dgx-h100", "--gpus", "32", "--gbs", "256", "--seq", "4096", "--tp", "1",
             "--pp", "4", "--cp", "1", "--ep", "8", "--vpp", "1", "--first-stage-layers", "25",
             "--last-stage-layers", "23", "--top", "1", "--format", "bridge"});
        REQUIRE_MESSAGE(odd.code == 0, odd.err);
        CHECK(odd.out.find("falls inside a decoder layer") != std::string::npos);
        CHECK(odd.out.find("pipeline_model_parallel_layout") == std::string::npos);
    }

    TEST_CASE("gdn: a model TOML names what a G layer needs") {
        // A G layer without its table, at the pattern key.
        try {
            (void)parse_model_toml(R"([model]
arch = "llama"
layers = 2
hidden = 64
heads = 4
ffn_hidden = 96
vocab = 128
seq_len = 64
hybrid_layer_pattern = "G-"
)",
                                   "no-gdn.toml");
            FAIL("expected an error");
        } catch (const ConfigError& e) {
            const std::string what = e.what();
            CHECK(what.find("no-gdn.toml:9:") != std::string::npos);
            CHECK(what.find("no [model.gdn] table") != std::string::npos);
        }
        // Value heads not a multiple of key heads.
        try {
            (void)parse_model_toml(R"([model]
arch = "llama"
layers = 2
hidden = 64
heads = 4
ffn_hidden = 96
vocab = 128
seq_len = 64
hybrid_layer_pattern = "G-"
[model.gdn]
qk_heads = 3
v_heads = 4
qk_head_dim = 16
v_head_dim = 16
)",
                                   "bad-gdn.toml");
            FAIL("expected an error");
        } catch (const ConfigError& e) {
            const std::string what = e.what();
            CHECK(what.find("bad-gdn.toml:12:") != std::string::npos);
            CHECK(what.find("model.gdn.v_heads") != std::string::npos);
        }
    }
}
