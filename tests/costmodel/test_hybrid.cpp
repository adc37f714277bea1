// Hybrid models (issue 26): Nemotron-H's Mamba-2 / attention / MLP / MoE layers, each priced by
// its own kind. Every expected value is worked by hand in the comment above it.
#include "core/load.hpp"
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
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

using namespace cleave;

namespace {

ModelSpec nano() {
    return load_model(std::string(CLEAVE_TEST_DATA_DIR) +
                      "/examples/hf/nemotron-3-nano-30b-a3b.config.json");
}

ModelSpec super_() {
    return load_model(std::string(CLEAVE_TEST_DATA_DIR) +
                      "/examples/hf/nemotron-3-super-120b-a12b.config.json");
}

}  // namespace

TEST_SUITE("costmodel") {
    TEST_CASE("hybrid: Nemotron 3 Nano loads as 23 Mamba-2, 6 attention and 23 MoE layers") {
        const ModelSpec m = nano();
        REQUIRE(is_hybrid(m));
        CHECK(m.layers == 52);
        CHECK(kind_count(m, LayerKind::mamba, 0, 52) == 23);
        CHECK(kind_count(m, LayerKind::attention, 0, 52) == 6);
        CHECK(kind_count(m, LayerKind::moe, 0, 52) == 23);
        CHECK(kind_count(m, LayerKind::mlp, 0, 52) == 0);
        CHECK(m.mamba.d_inner() == 4096);  // 64 heads x 64
        CHECK(m.squared_relu);             // mlp_hidden_act relu2
        // Mamba layer: in_proj 2688 x (2 x 4096 + 2 x 8 x 128 + 64) = 2688 x 10304 = 27,697,152;
        // conv1d (4096 + 2048) x (4 + 1) = 30,720; dt_bias, A_log, D 3 x 64 = 192; gated norm
        // 4096; out_proj 4096 x 2688 = 11,010,048; pre-norm 2688: 38,744,896.
        CHECK(params_mamba_layer(m) == 38744896);
        // Attention layer: q 2688 x 4096 + k, v 2 x 2688 x 256 + o 4096 x 2688 + norm 2688
        // = 11,010,048 + 1,376,256 + 11,010,048 + 2688 = 23,399,040.
        CHECK(params_layer(m, 5) == 23399040);
        // MoE layer: router 2688 x 128 + 128 bias = 344,192; shared expert 2 x 2688 x 3712 =
        // 19,955,712; 128 experts x 2 x 2688 x 1856 = 1,277,165,568; norm 2688: 1,297,468,160.
        CHECK(params_layer(m, 1) == 1297468160);
        // 23 x 38,744,896 + 6 x 23,399,040 + 23 x 1,297,468,160 + embedding 131072 x 2688
        // (352,321,536) + head (352,321,536 + final norm 2688) = 31,577,940,288: the card's 31.6B.
        CHECK(params_total(m) == 31577940288);
        // Active: each MoE layer 344,192 + 19,955,712 + 6 x 9,977,856 + 2688 = 80,169,728;
        // 23 x that + the Mamba and attention layers + embedding and head = 3,580,076,352 (the
        // card's 3.6B with embeddings), 3,227,754,816 without the input embedding (its 3.2B).
        CHECK(params_active(m) == 3580076352);
        CHECK(params_active(m) - m.vocab * m.hidden == 3227754816);
    }

    TEST_CASE("hybrid: the SSD scan's FLOPs and a Mamba-2 layer's saved activations") {
        const ModelSpec m = nano();
        // 2 Q N G + H (2 Q P + 4 N P) = 2 x 128 x 128 x 8 + 64 x (2 x 128 x 64 + 4 x 128 x 64)
        // = 262,144 + 64 x 49,152 = 3,407,872 per token.
        CHECK(mamba_scan_flops_per_token(m) == doctest::Approx(3407872.0));
        JobSpec j = test::job(8, 8, 8192);
        j.stack = load_stack("megatron-core");
        Plan p = test::plan(8, 1, 1);
        const MambaGemms g = mamba_gemms(m, j, p);
        // 8192 tokens / 128 = 64 chunks: C B^T 2 x 128 x 128 x 128 x 64 x 8 = 2,147,483,648; the
        // four products sum to 8192 x 3,407,872 = 27,917,287,424.
        CHECK(gemm_flops(g.cb).value() == doctest::Approx(2147483648.0));
        CHECK((gemm_flops(g.cb) + gemm_flops(g.scan_x) + gemm_flops(g.states) +
               gemm_flops(g.state_out))
                  .value() == doctest::Approx(27917287424.0));
        // bf16, t 1, no SP, per token: norm input + in_proj input (2 + 2) x 2688 = 10,752;
        // zxbcdt 2 x 10304 = 20,608; scan output + gated-norm input 2 x 2 x 4096 = 16,384;
        // out_proj input 2 x 4096 = 8,192; rstd 4 x 8 = 32: 55,968 B x 8192 = 458,489,856.
        CHECK(mamba_activation_per_layer(m, j, p, Recompute::none).value() ==
              doctest::Approx(458489856.0));
        // Full recomputation keeps the layer input: 2 x 2688 x 8192 = 44,040,192.
        CHECK(mamba_activation_per_layer(m, j, p, Recompute::full).value() ==
              doctest::Approx(44040192.0));
        // Kernel bytes per token (compute.cpp mamba_traffic), bf16, t 1: x B C = 4096 + 2 x 8 x
        // 128 = 6144, fp32 states 4 x 64 x 64 x 128 / 128 = 16,384. Forward: pre-norm 2 x 2 x
        // 2688 = 10,752 (norm); gated norm 3 x 2 x 4096 = 24,576, conv 2 x 2 x 6144 = 24,576,
        // the scan's reads 2 x (6144 + 64 + 4096) = 20,608, states 4 x 16,384 = 65,536: 135,296
        // (ssm); residual 3 x 2 x 2688 = 16,128. Backward: pre-norm 3 x 2 x 2688 = 16,128; gated
        // norm 5 x 2 x 4096 = 40,960, the conv recomputed 2 x 2 x 6144 = 24,576 and its gradient
        // 3 x 2 x 6144 = 36,864, the scan 2 x 2 x 10,304 = 41,216, states 6 x 16,384 = 98,304:
        // 241,920; the residual's two gradients summed 3 x 2 x 2688 = 16,128.
        const LayerTraffic tr = mamba_traffic(m, j, p);
        CHECK(tr.fwd_by_class.norm.value() == doctest::Approx(10752.0 * 8192.0));
        CHECK(tr.fwd_by_class.ssm.value() == doctest::Approx(135296.0 * 8192.0));
        CHECK(tr.fwd_by_class.elementwise.value() == doctest::Approx(16128.0 * 8192.0));
        CHECK(tr.bwd_by_class.norm.value() == doctest::Approx(16128.0 * 8192.0));
        CHECK(tr.bwd_by_class.ssm.value() == doctest::Approx(241920.0 * 8192.0));
        CHECK(tr.bwd_by_class.elementwise.value() == doctest::Approx(16128.0 * 8192.0));
        // TP 2: in_proj / out_proj / the scan split by heads.
        p.tp = 2;
        p.dp = 4;
        CHECK(mamba_gemms(m, j, p).in_proj.n == doctest::Approx(10304.0 / 2.0));
        CHECK(mamba_gemms(m, j, p).scan_x.count == doctest::Approx(64.0 * 32.0));
    }

    TEST_CASE("hybrid: a single-block layer keeps one norm and its block, and one TP pair") {
        ModelSpec m = test::seed13b();
        JobSpec j = test::job(8, 8, 2048);
        j.stack = load_stack("megatron-core");
        const Plan p = test::plan(4, 2, 1);
        // Activations per token (bf16, t 2, no SP, fused attention, no dropout): a transformer
        // layer keeps 2 norm inputs (2 x 2h) + 2 norm outputs (2 x 2h) + attention (Q, K, V,
        // projection input 4 h / t x 2) + MLP (fc1 output + activation output 2 x 4h / t x 2)
        // + the kernel's fp32 log-sum-exp; the attention-only and MLP-only layers split it, each
        // with one of the two norms' input and output: attention + mlp = full.
        const double full = activation_per_layer(m, j, p, false, Recompute::none).value();
        const double attn =
            activation_per_layer(m, j, p, false, Recompute::none, LayerShape::attention).value();
        const double mlp =
            activation_per_layer(m, j, p, false, Recompute::none, LayerShape::ffn).value();
        const double h_tok = 5760.0 * 2048.0;  // h x tokens
        CHECK(attn + mlp == doctest::Approx(full));
        // MLP-only: norm in + out (2 + 2) h + fc1 out 2 x 4h / 2 + fc2 in 2 x 4h / 2 = 12 h.
        CHECK(mlp == doctest::Approx(12.0 * h_tok));
        // TP: one all-reduce pair per block; no SP: forward = blocks x (all-reduce + sync).
        const ClusterSpec c = test::dgx_a100();
        const PlanLinks links = plan_links(c, p);
        const LayerCost lf = layer_cost(m, c, j, p, links, false);
        const LayerCost la = layer_cost(m, c, j, p, links, false, LayerShape::attention);
        const LayerCost lm = layer_cost(m, c, j, p, links, false, LayerShape::ffn);
        CHECK(la.tp_fwd.value() == doctest::Approx(lf.tp_fwd.value() / 2.0));
        CHECK(lm.tp_fwd.value() == doctest::Approx(lf.tp_fwd.value() / 2.0));
        // The GEMMs split too: attention + MLP = the whole layer's.
        CHECK((la.gemm + lm.gemm).value() == doctest::Approx(lf.gemm.value()));
        CHECK(lm.attention.value() == 0.0);
    }

    TEST_CASE("hybrid: a stage sums its layers by kind, parameters and time") {
        const ModelSpec m = nano();
        JobSpec j = test::job(8, 64, 8192);
        j.stack = load_stack("megatron-core");
        Plan p = test::plan(8, 1, 1);
        p.ep = 8;
        p.zero = 0;
        const ClusterSpec c = load_cluster("dgx-h100");
        const Estimate e = estimate(m, c, j, p);
        // Weights, bf16: every parameter but the experts (31,577,940,288 - 23 x 1,277,165,568 =
        // 2,203,132,224) + the experts over EP 8 (29,374,808,064 / 8 = 3,671,851,008) =
        // 5,874,983,232 parameters x 2 B = 11,749,966,464 B.
        CHECK(e.stage[0].memory.weights.value() == doctest::Approx(11749966464.0));
        // The forward of one micro-batch: 23 Mamba + 6 attention + 23 MoE layers, embedding and
        // output layer, as layer_cost / mamba_layer_cost price each (the straggler factor of 8
        // GPUs on each layer's kernels, and the MoE layers' exposed all-to-all).
        const PlanLinks links = plan_links(c, p);
        const double slow = straggler_factor(c.gpu, 8);
        const LayerCost mb = mamba_layer_cost(m, c, j, p, links);
        const LayerCost at = layer_cost(m, c, j, p, links, false, LayerShape::attention);
        const LayerCost mo = layer_cost(m, c, j, p, links, true, LayerShape::ffn);
        const EdgeCost emb = embedding_cost(m, c, j, p, links);
        const EdgeCost out = output_cost(m, c, j, p, links);
        const auto fwd = [slow](const LayerCost& l) {
            return (l.fwd.value() - l.expert_overhead.value() / 3.0) * slow +
                   l.expert_overhead.value() / 3.0 + l.tp_fwd.value() + l.cp_fwd.value() +
                   l.ep_fwd.value();
        };
        const double want = 23.0 * fwd(mb) + 6.0 * fwd(at) + 23.0 * fwd(mo) +
                            (emb.fwd.value() + out.fwd.value()) * slow + emb.comm_fwd.value() +
                            out.comm_fwd.value();
        CHECK(e.stage[0].fwd.value() == doctest::Approx(want).epsilon(1e-9));
        // Model FLOPs: 3 x B x s x per token (the Mamba layers' GEMMs 2 x 38,707,200 weights +
        // the scan 3,407,872; attention 2 x 23,396,352 + core 2 s a (d_qk + d_v) = 2 x 8192 x
        // 32 x 256; MoE 2 x (6 x 9,977,856 + 19,955,712 + 344,064); logits 2 x 2688 x 131072).
        const double s = 8192.0;
        const double per_token = 23.0 * (2.0 * 38707200.0 + 3407872.0) +
                                 6.0 * (2.0 * 23396352.0 + 2.0 * s * 32.0 * 256.0) +
                                 23.0 * 2.0 * (6.0 * 9977856.0 + 19955712.0 + 344064.0) +
                                 2.0 * 2688.0 * 131072.0;
        CHECK(e.model_flops.value() == doctest::Approx(3.0 * 64.0 * s * per_token));
    }

    TEST_CASE("hybrid: LatentMoE's experts, projections and all-to-all are latent wide") {
        // Megatron-Core moe_layer.py @d98e8a64: fc1_latent_proj h -> latent before the
        // dispatch, fc2_latent_proj after the combine (whole on every TP rank); experts.py: fc1
        // input and fc2 output latent wide; token_dispatcher.py: hidden_dim = moe_latent_size.
        ModelSpec m = super_();
        JobSpec j = test::job(64, 512, 8192);
        j.stack = load_stack("megatron-core");
        Plan p = test::plan(32, 2, 1);
        p.sp = true;
        p.ep = 64;
        p.etp = 1;
        // tok = 8192 (mbs 1); 512 / 64 = 8 local experts; rows per expert 8192 x 22 / 8 = 22,528
        // (layer_gemms' even split before the expert grid's own); f = 2688 / 2 = 1344.
        const LayerGemms g = layer_gemms(m, j, p, true, LayerShape::ffn);
        CHECK(g.mlp_in.m == doctest::Approx(22528.0));
        CHECK(g.mlp_in.n == doctest::Approx(1344.0));
        CHECK(g.mlp_in.k == doctest::Approx(1024.0));  // the latent, not h = 4096
        CHECK(g.mlp_out.n == doctest::Approx(1024.0));
        // The projections on the SP shard, 8192 / 2 = 4096 rows: 4096 x 1024 x 4096 each.
        CHECK(g.latent_in.m == doctest::Approx(4096.0));
        CHECK(g.latent_in.n == doctest::Approx(1024.0));
        CHECK(g.latent_in.k == doctest::Approx(4096.0));
        CHECK(g.latent_out.n == doctest::Approx(4096.0));
        CHECK(g.latent_out.k == doctest::Approx(1024.0));
        // Active GEMM weights per token of an MoE layer: 22 experts x 2 x 1024 x 2688
        // (121,110,528) + shared 2 x 4096 x 5376 (44,040,192) + router 4096 x 512 (2,097,152)
        // + projections 2 x 4096 x 1024 (8,388,608) = 175,636,480.
        CHECK(gemm_params_active(m, true, LayerShape::ffn) == doctest::Approx(175636480.0));
        // The all-to-all carries latent rows: a quarter of the bytes of the same layer at h.
        const ClusterSpec c = load_cluster("dgx-b200");
        const PlanLinks links = plan_links(c, p);
        const LayerCost latent = layer_cost(m, c, j, p, links, true, LayerShape::ffn);
        ModelSpec wide = m;
        wide.moe.latent = 0;
        const LayerCost full = layer_cost(wide, c, j, p, links, true, LayerShape::ffn);
        CHECK(latent.ep_bytes.value() == doctest::Approx(full.ep_bytes.value() / 4.0));
        CHECK(latent.ep_bytes.value() > 0.0);
        // Saved for the backward, per MoE layer: the routed copies at 1024 instead of 4096
        // (the experts' inputs) and fc2_latent_proj's input, 8192 / 2 x 1024 x 2 B.
        const Bytes a_lat = activation_per_layer(m, j, p, true, Recompute::none, LayerShape::ffn);
        const Bytes a_wide =
            activation_per_layer(wide, j, p, true, Recompute::none, LayerShape::ffn);
        // Routed copies: 2 B x 8192 x 22 x (4096 - 1024) / 2 = 553,648,128 fewer bytes; the
        // projection's input 2 x 8192 x 1024 / 2 = 8,388,608 more.
        CHECK(a_wide.value() - a_lat.value() == doctest::Approx(553648128.0 - 8388608.0));
    }

    TEST_CASE("hybrid: Megatron-Bridge's FLOP count of Nemotron 3 Nano matches its perf table") {
        // Row 2026 of public_runs_2026h1.csv: 323 TFLOP/s per GPU at 14,507 tokens/s per GPU =
        // 22.265e9 FLOPs per token. Bridge's hybrid_flops (flop_utils.py @0fbfe7d3e9) at
        // s 8192, per token of the forward: attention 4 h p (h + h g / a + s / 2) with p =
        // 128 x 32 / 2688, g 2: 4 x 2688 x 1.52381 x (2688 + 168 + 4096) = 113,901,568, x 6;
        // Mamba 2 h (2 x 5376 + 2 x 8 x 128 + 64) + 7 x 5376 x 128 + 2 x 5376 x 2688 =
        // 69,156,864 + 4,816,896 + 28,901,376 = 102,875,136, x 23; MoE 4 h (6 x 1856 + 3712) =
        // 159,645,696, x 23; logits 2 x 2688 x 131072 = 704,643,072. Sum 683,409,408 +
        // 2,366,128,128 + 3,671,851,008 + 704,643,072 = 7,426,031,616, x 3 = 22,278,094,848 per
        // token: 0.06 % from the table.
        const ModelSpec m = nano();
        JobSpec j = test::job(16, 1024, 8192);
        const double per_token = bridge_flops(m, j) / (1024.0 * 8192.0);
        CHECK(per_token == doctest::Approx(22278094848.0));
        CHECK(per_token == doctest::Approx(323e12 / 14507.0).epsilon(0.002));
        // Row 2030 (Nemotron 3 Super, 475 TFLOP/s at 5,606 tokens/s = 84.731e9 per token),
        // with the recipe's 2 MTP depths of '*E' counted as Bridge counts the unified pattern
        // (calculate_layer_counts @v0.4.0: the MTP layers once per depth; logits x (1 + 2)).
        // h 4096, p = 128 x 32 / 4096 = 1, g 2: attention 4 x 4096 x (4096 + 256 + 4096) =
        // 138,412,032, x (8 + 2); Mamba 2 x 4096 x (2 x 8192 + 2 x 8 x 128 + 128) + 7 x 8192 x
        // 128 + 2 x 8192 x 4096 = 226,492,416, x 40; LatentMoE 4 x 1024 x 22 x 2688 + 4 x 4096
        // x 1024 + 4 x 4096 x 5376 = 347,078,656, x (40 + 2); logits 2 x 4096 x 131072 x 3 =
        // 3,221,225,472. Sum 28,242,345,984, x 3 = 84,727,037,952: 0.005 % from the table.
        const ModelSpec sup = super_();
        JobSpec js = test::job(64, 512, 8192);
        js.mtp = true;
        js.mtp_repeats = 2;
        const double super_token = bridge_flops(sup, js) / (512.0 * 8192.0);
        CHECK(super_token == doctest::Approx(84727037952.0));
        CHECK(super_token == doctest::Approx(475e12 / 5606.0).epsilon(0.001));
    }

    TEST_CASE("hybrid: the Nemotron 3 rows of public_runs_2026h1.csv, priced or refused with why") {
        std::ifstream in(std::string(CLEAVE_TEST_DATA_DIR) + "/tests/data/public_runs_2026h1.csv");
        std::stringstream ss;
        ss << in.rdbuf();
        std::map<int64_t, PublishedCase> rows;
        for (auto& c : parse_public_runs(ss.str(), "public_runs_2026h1.csv")) {
            rows[c.row_id] = c;
        }
        // Nemotron 3 Super (LatentMoE, MTP '*E' trained twice: the recipe's mtp_num_layers 2 over
        // one shared module), built from the shipped config and priced. Measured 2026-12-04:
        // -29.5 % (2030, B200 NVFP4, tp 2 sp) and -20.4 % (2031, B200 MXFP8): too fast, as the
        // other 26.04 Blackwell MoE rows (issue 25's per-expert cost and CUDA-graph scopes).
        for (const auto& [r, lo, hi] : {std::tuple{2030, -35.0, -20.0}, std::tuple{2031, -30.0, -10.0}}) {
            CAPTURE(r);
            PublishedCase c = rows.at(r);
            REQUIRE(c.expressible);
            CHECK(c.model.moe.latent == 1024);
            CHECK(c.job.mtp);
            CHECK(c.job.mtp_repeats == 2);
            load_case_stack(c);
            const PublishedResult res = evaluate_published(c, load_cluster(c.profile));
            CHECK(res.error_pct > lo);
            CHECK(res.error_pct < hi);
        }
        // Nemotron 3 Nano: built from the shipped config, priced by kind. Measured 2026-12-02:
        // +4.6 % (2026, H100 FP8-CS), -23.1 % (2033, GB300 MXFP8, mbs 4), -14.2 % (2034, GB200
        // MXFP8, mbs 2); 2033 is outside the 15 % of issue 26 (its CUDA-graph scopes and the
        // 26.04 Blackwell expert cost are not priced: docs/costmodel.md section 2.2). Issue 47
        // priced the flex dispatcher's permutation without the alltoall dispatcher's two chunk
        // sorts (2 (r + k) T h, not (2 + 6k) T h): 2034 -14.0 -> -16.0 %, 2033 -22.8 -> -25.2 %.
        const std::map<int64_t, std::pair<double, double>> bounds = {
            {2026, {-15.0, 15.0}}, {2033, {-30.0, -15.0}}, {2034, {-20.0, 15.0}}};
        for (const auto& [r, b] : bounds) {
            CAPTURE(r);
            PublishedCase c = rows.at(r);
            REQUIRE(c.expressible);
            CHECK(is_hybrid(c.model));
            CHECK(kind_count(c.model, LayerKind::mamba, 0, c.model.layers) == 23);
            load_case_stack(c);
            const PublishedResult res = evaluate_published(c, load_cluster(c.profile));
            CHECK(res.error_pct > b.first);
            CHECK(res.error_pct < b.second);
        }
    }

    TEST_CASE("hybrid: explain cautions that Mamba-2 layers on Blackwell are priced optimistic") {
        // The caution states what the rows test above pins: the Blackwell Nemotron 3 rows (2030,
        // 2031, 2033, 2034) 14-29 % too fast, the H100 row (2026) within 15 %. A Blackwell GPU is
        // one with an MXFP8 peak; H100 has none, so no caution there.
        const std::string nano_cfg =
            std::string(CLEAVE_TEST_DATA_DIR) + "/examples/hf/nemotron-3-nano-30b-a3b.config.json";
        const auto cautions = [&](const char* hw, const char* dtype) {
            const test::CliRun r = test::run_cleave({"explain", nano_cfg, hw, "--gpus", "8",
                                                     "--gbs", "64", "--seq", "8192", "--ep", "8",
                                                     "--dtype", dtype, "--format", "json"});
            REQUIRE(r.code == 0);
            return test::joined_cautions(r.out);
        };
        const std::string said = "Mamba-2 layers on Blackwell";
        CHECK(cautions("gb300-nvl72", "mxfp8").find(said) != std::string::npos);
        CHECK(cautions("dgx-b200", "bf16").find(said) != std::string::npos);
        CHECK(cautions("dgx-h100", "fp8").find(said) == std::string::npos);
        // A transformer on Blackwell: none.
        const test::CliRun t = test::run_cleave(
            {"explain", std::string(CLEAVE_TEST_DATA_DIR) + "/examples/hf/qwen3-30b-a3b.config.json",
             "gb300-nvl72", "--gpus", "8", "--gbs", "64", "--seq", "4096", "--ep", "8",
             "--format", "json"});
        REQUIRE(t.code == 0);
        CHECK(t.out.find(said) == std::string::npos);
    }

    TEST_CASE("hybrid: every middle stage is priced, wherever the heavy layers sit") {
        // 8 layers on pp 4, two a stage; the two MoE layers on stage 1 or on stage 2, the rest
        // attention layers. A pipeline's time is sum(t_s) + (m - 1) max(t_s)
        // (costmodel/pipeline.hpp): where the odd stage sits does not change it, so both give
        // one time (pricing stage 1 for every middle stage would miss stage 2's), above the
        // all-attention model's (measured 0.208 s against 0.193 s: the MoE stage's forward is
        // 2.2 ms against 0.66 ms, the last stage's logits 4.6 ms set the steady state).
        ModelSpec m = nano();
        const auto with = [&m](const char* pattern) {
            ModelSpec x = m;
            x.layer_kinds.clear();
            for (const char* c = pattern; *c != 0; ++c) {
                x.layer_kinds.push_back(*c == 'E' ? LayerKind::moe : LayerKind::attention);
            }
            x.layers = static_cast<int64_t>(x.layer_kinds.size());
            return x;
        };
        JobSpec j = test::job(4, 16, 4096);
        j.stack = load_stack("megatron-core");
        const Plan p = test::plan(1, 1, 4);
        const ClusterSpec c = load_cluster("gb200-nvl72");
        const Estimate a = estimate(with("**EE****"), c, j, p);
        const Estimate b = estimate(with("****EE**"), c, j, p);
        const Estimate none = estimate(with("********"), c, j, p);
        CHECK(a.iteration_time.value() == doctest::Approx(b.iteration_time.value()).epsilon(1e-9));
        CHECK(std::abs(b.iteration_time.value() - none.iteration_time.value()) >
              0.05 * none.iteration_time.value());
        // Memory: stage 1 holds 3 micro-batches in flight (1F1B, p - 1), stage 2 holds 2; the MoE
        // layers' weights and activations make the stage that holds them the middle one shown.
        CHECK(b.stage[1].memory.weights.value() > none.stage[1].memory.weights.value() * 10.0);
        CHECK(a.middle_stage == 1);
        CHECK(b.middle_stage == 2);
        CHECK(b.middle_stages_differ);
        CHECK(none.middle_stages_differ);  // a hybrid with pp 4, even if its stages agree
    }

    TEST_CASE("hybrid: pipeline stages balance by layer kind, not by layer count") {
        const ModelSpec m = nano();
        JobSpec j = test::job(64, 512, 8192);
        j.stack = load_stack("megatron-core");
        const SplitWeights w = split_weights(m, j);
        REQUIRE(w.layer.size() == 52);
        // Forward work per token by kind (splits.cpp):
        //   Mamba-2: 2 x (in_proj 27,697,152 + out_proj 11,010,048) + scan 3,407,872 = 80,822,272
        //   attention: 2 x (q 11,010,048 + k, v 1,376,256 + o 11,010,048) + the core, halved by
        //     megatron-core's causal skip, 2 x 8192 x 32 heads x 128 = 46,792,704 + 67,108,864
        //     = 113,901,568
        //   MoE: 2 x (router 344,064 + shared 19,955,712 + 6 x 9,977,856) = 160,333,824
        // 23 x 80,822,272 + 6 x 113,901,568 + 23 x 160,333,824 = 6,229,999,616; mean over 52
        // layers 119,807,684.92; the output 2 x 2688 x 131072 = 704,643,072 = 5.8815 layers.
        const double mean = 6229999616.0 / 52.0;
        CHECK(w.layer[0] == doctest::Approx(80822272.0 / mean));   // M: 0.6746
        CHECK(w.layer[1] == doctest::Approx(160333824.0 / mean));  // E: 1.3383
        CHECK(w.layer[5] == doctest::Approx(113901568.0 / mean));  // *: 0.9507
        CHECK(w.output == doctest::Approx(704643072.0 / mean));
        // PP 4 x VPP 2 (52 layers): by count the planner took 14 / 14 / 14 / 10, whose last
        // stage (10 layers + the head) is the slowest. By kind, 15 / 14 / 14 / 9: the stages'
        // work is within 3 % of each other (explain: 99.2, 97.1, 96.8 ms fwd + bwd per
        // micro-batch on gb200-nvl72 against 93.6 / 93.5 / 106.0 by count).
        const auto splits = balanced_splits(m, j, 4, 2, w);
        REQUIRE_FALSE(splits.empty());
        CHECK(splits.front() == Split{15, 9});
        // Its slowest stage, summed by kind, below the count split's.
        const auto stage_work = [&](Split sp) {
            Plan p;
            p.pp = 4;
            p.vpp = 2;
            p.schedule = Schedule::interleaved;
            p.first_layers = sp.first;
            p.last_layers = sp.last;
            double worst = 0.0;
            for (int64_t st = 0; st < 4; ++st) {
                double sum = st == 3 ? w.output : 0.0;
                for (int64_t c = 0; c < 2; ++c) {
                    const int64_t f = chunk_first_layer(52, p, st, c);
                    for (int64_t i = f; i < f + chunk_layers(52, p, st, c); ++i) {
                        sum += w.layer[static_cast<std::size_t>(i)];
                    }
                }
                worst = std::max(worst, sum);
            }
            return worst;
        };
        CHECK(stage_work({15, 9}) < stage_work({14, 10}));
        // ... and the planner ranks it first: the fixed --pp 4 search's top plan.
        const auto r = test::run_cleave({"plan", std::string(CLEAVE_TEST_DATA_DIR) +
                                         "/examples/hf/nemotron-3-nano-30b-a3b.config.json",
                                         "gb200-nvl72", "--gpus", "64", "--gbs", "512", "--seq",
                                         "8192", "--pp", "4", "--top", "1", "--format", "json"});
        REQUIRE(r.code == 0);
        const auto top = nlohmann::json::parse(r.out)["plans"][0]["plan"];
        CHECK(top["first_stage_layers"] == 15);
        CHECK(top["last_stage_layers"] == 9);
    }

    TEST_CASE("hybrid: the Megatron export writes the layer pattern by stage and the activation") {
        // pp 2, no interleaving: the planner's map for Nano (first 28, last 24 layers).
        const test::CliRun r = test::run_cleave(
            {"plan", std::string(CLEAVE_TEST_DATA_DIR) + "/examples/hf/nemotron-3-nano-30b-a3b.config.json",
             "dgx-h100", "--gpus", "16", "--gbs", "1024", "--seq", "8192", "--ep", "8", "--pp", "2",
             "--vpp", "1", "--first-stage-layers", "28", "--top", "1", "--format", "megatron"});
        REQUIRE_MESSAGE(r.code == 0, r.err);
        // The pattern's first 28 letters, '|', the last 24.
        CHECK(r.out.find("--hybrid-layer-pattern 'MEMEM*EMEMEM*EMEMEM*EMEMEM*E|MEMEM*EMEMEMEM*EMEMEMEME'") !=
              std::string::npos);
        CHECK(r.out.find("--squared-relu") != std::string::npos);
        CHECK(r.out.find("--mamba-num-heads 64") != std::string::npos);
        CHECK(r.out.find("--moe-shared-expert-intermediate-size 3712") != std::string::npos);
        CHECK(r.out.find("--pipeline-model-parallel-layout") == std::string::npos);  // not combined
    }

    TEST_CASE("hybrid: --mtp-num-layers trains the MTP block, priced and exported as Megatron") {
        const std::string super_cfg =
            std::string(CLEAVE_TEST_DATA_DIR) + "/examples/hf/nemotron-3-super-120b-a12b.config.json";
        const std::vector<std::string> base = {
            "dgx-b200", "--gpus", "64", "--gbs", "512", "--seq", "8192", "--tp", "2", "--sp",
            "--pp", "2", "--vpp", "1", "--ep", "32", "--etp", "1", "--mbs", "1", "--dtype", "mxfp8",
            "--top", "1"};
        const auto run = [&](const std::vector<std::string>& extra, const char* format) {
            std::vector<std::string> a = {"plan", super_cfg};
            a.insert(a.end(), base.begin(), base.end());
            a.insert(a.end(), extra.begin(), extra.end());
            a.push_back("--format");
            a.push_back(format);
            return test::run_cleave(a);
        };
        // Two depths of Super's one module (Megatron-Bridge's recipe): the unified pattern
        // (arguments.py @d98e8a64: main + '/' + the MTP pattern per depth), the depth count, the
        // repeated layer, the latent.
        const test::CliRun r = run({"--mtp-num-layers", "2"}, "megatron");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        CHECK(r.out.find("EME/*E/*E'") != std::string::npos);
        CHECK(r.out.find("--mtp-num-layers 2") != std::string::npos);
        CHECK(r.out.find("--mtp-use-repeated-layer") != std::string::npos);
        CHECK(r.out.find("--moe-latent-size 1024") != std::string::npos);
        // Priced: two MTP passes cost more than one, one more than none.
        const auto step = [&](const std::vector<std::string>& extra) {
            const test::CliRun j = run(extra, "json");
            REQUIRE_MESSAGE(j.code == 0, j.err);
            return nlohmann::json::parse(j.out)["plans"][0]["iteration_time_s"].get<double>();
        };
        const double none = step({});
        const double one = step({"--mtp-num-layers", "1"});
        const double two = step({"--mtp-num-layers", "2"});
        CHECK(one > none);
        CHECK(two - one == doctest::Approx(one - none).epsilon(0.05));
        // A depth count the modules cannot make, and a model without MTP, are exit 2.
        const test::CliRun bad = test::run_cleave(
            {"plan", std::string(CLEAVE_TEST_DATA_DIR) + "/examples/hf/nemotron-3-nano-30b-a3b.config.json",
             "dgx-b200", "--gpus", "8", "--gbs", "64", "--mtp-num-layers", "1"});
        CHECK(bad.code == 2);
        CHECK(bad.err.find("the model has no MTP module") != std::string::npos);
    }

    TEST_CASE("hybrid: TP must split the Mamba-2 heads and groups, as Megatron asserts") {
        const ModelSpec m = nano();  // 64 Mamba heads in 8 groups; 32 heads, 2 KV heads
        JobSpec j = test::job(16, 16, 8192);
        Plan p = test::plan(8, 2, 1);
        CHECK(keeps(Rule::tp_mamba, m, j, p));
        p.tp = 16;
        p.dp = 1;
        CHECK_FALSE(keeps(Rule::tp_mamba, m, j, p));  // 8 groups over 16 ranks
        bool named = false;
        for (const auto& v : plan_violations(m, j, p)) {
            named = named || (v.rule == Rule::tp_mamba &&
                              v.message == "tp=16 does not divide mamba_groups=8");
        }
        CHECK(named);
        CHECK(keeps(Rule::tp_mamba, test::seed13b(), j, p));  // no Mamba layers: nothing to split
    }

    TEST_CASE("hybrid: a layers_block_type list reads as the pattern does") {
        // Newer Nemotron-H configs list the kinds by name instead of the pattern string.
        std::ifstream in(std::string(CLEAVE_TEST_DATA_DIR) +
                         "/examples/hf/nemotron-3-nano-30b-a3b.config.json");
        std::stringstream ss;
        ss << in.rdbuf();
        std::string text = ss.str();
        const std::string key = "\"hybrid_override_pattern\": ";
        const auto at = text.find(key);
        REQUIRE(at != std::string::npos);
        const auto end = text.find('\n', at);
        std::string list = "\"layers_block_type\": [";
        const std::string pattern = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME";
        for (std::size_t i = 0; i < pattern.size(); ++i) {
            const char c = pattern[i];
            list += std::string(i > 0 ? ", " : "") + "\"" +
                    (c == 'M' ? "mamba" : c == 'E' ? "moe" : "attention") + "\"";
        }
        text.replace(at, end - at, list + "],");
        const ModelSpec a = parse_model_hf_json(text, "list.json");
        const ModelSpec b = nano();
        CHECK(a.layer_kinds == b.layer_kinds);
        CHECK(params_total(a) == params_total(b));
    }

    TEST_CASE("hybrid: a Mamba-2 stack alone (mamba2 780M) loads and is priced without attention") {
        const ModelSpec m = load_model(std::string(CLEAVE_TEST_DATA_DIR) +
                                       "/examples/hf/mamba2-780m.config.json");
        REQUIRE(is_hybrid(m));
        CHECK(kind_count(m, LayerKind::mamba, 0, 48) == 48);
        CHECK(m.heads == 0);
        CHECK(m.seq_len == 0);  // Mamba2Config states none: the job's --seq
        // Per layer: in_proj 1536 x (2 x 3072 + 2 x 1 x 128 + 48) = 9,904,128; conv (3072 + 256)
        // x 5 = 16,640; dt_bias, A_log, D 144; gated norm 3072; out_proj 3072 x 1536 = 4,718,592;
        // pre-norm 1536: 14,644,112. 48 of them + the tied embedding 50,288 x 1536 = 77,242,368 +
        // the final norm 1536 = 780,161,280: the release's "780m".
        CHECK(params_mamba_layer(m) == 14644112);
        CHECK(params_total(m) == 780161280);
        // Model FLOPs per token: 48 x (2 x 14,622,720 GEMM weights + the scan 2 x 256 x 128 x 1 +
        // 48 x (2 x 256 x 64 + 4 x 128 x 64) = 3,211,264) = 1,557,921,792, + logits 2 x 1536 x
        // 50,288 = 154,484,736: 1,712,406,528; no attention core. x 3 x 64 x 4096 tokens.
        CHECK(mamba_scan_flops_per_token(m) == doctest::Approx(3211264.0));
        JobSpec j = test::job(8, 64, 4096);
        j.stack = load_stack("megatron-core");
        Plan p = test::plan(8, 1, 1);
        p.zero = 1;
        const Estimate e = estimate(m, load_cluster("dgx-h100"), j, p);
        CHECK(e.model_flops.value() == doctest::Approx(3.0 * 64.0 * 4096.0 * 1712406528.0));
        CHECK(e.iteration_time.value() > 0.0);
        CHECK(e.stage[0].memory.activations.value() > 0.0);
        // Without --seq the job has no sequence length: exit 2 with why.
        const test::CliRun r = test::run_cleave(
            {"plan", std::string(CLEAVE_TEST_DATA_DIR) + "/examples/hf/mamba2-780m.config.json",
             "dgx-h100", "--gpus", "8", "--gbs", "64"});
        CHECK(r.code == 2);
        CHECK(r.err.find("--seq is required") != std::string::npos);
    }

    TEST_CASE("published: every row not priced is listed with why, in every public CSV") {
        // What cleave does not model is refused, not priced (issue 26): the whole list, by file.
        const std::string root = std::string(CLEAVE_TEST_DATA_DIR) + "/tests/data/";
        const std::map<std::string, std::map<int64_t, std::string>> want = {
            {"public_runs.csv", {}},
            {"public_runs_2024.csv", {}},
            {"public_runs_2025.csv", {}},
            {"public_runs_2026h1.csv", {}}};
        for (const auto& [file, rows] : want) {
            CAPTURE(file);
            std::ifstream in(root + file);
            std::stringstream ss;
            ss << in.rdbuf();
            std::map<int64_t, std::string> got;
            for (const auto& c : parse_public_runs(ss.str(), file)) {
                if (!c.expressible) {
                    got[c.row_id] = c.reason;
                }
            }
            CHECK(got.size() == rows.size());
            for (const auto& [row, why] : rows) {
                CAPTURE(row);
                REQUIRE(got.count(row) == 1);
                CHECK(got.at(row).find(why) != std::string::npos);
            }
        }
    }
}
