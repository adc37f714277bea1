// Fused attention as the kernel runs it (costmodel/attention.cpp): efficiency lookup, time,
// memory; each value worked by hand in the comment.
#include "core/load.hpp"
#include "costmodel/attention.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/memory.hpp"
#include "tests/costmodel/fixtures.hpp"

#include <doctest/doctest.h>

using namespace cleave;

namespace {

SoftwareStack fused_stack() {
    SoftwareStack s;
    s.name = "test-fused";
    s.attention = AttentionImpl::fused;
    s.causal_skip = true;
    s.attention_step_overhead_us = 10.0;
    s.attention_curves = {{"h100", 64.0, {1024, 4096}, {0.2, 0.3}, {0.2, 0.3}},
                          {"h100", 128.0, {1024, 4096}, {0.4, 0.5}, {0.3, 0.45}}};
    return s;
}


}  // namespace

TEST_SUITE("costmodel") {
    TEST_CASE("attention: efficiency is read in log(seq) on the nearest head dim's curve") {
        const SoftwareStack s = fused_stack();
        const GpuSpec g = test::h100_round();
        // 2048 is halfway between 1024 and 4096 in log: f = ln 2 / ln 4 = 0.5;
        // fwd 0.4 + 0.5 (0.5 - 0.4) = 0.45, bwd 0.3 + 0.5 (0.45 - 0.3) = 0.375.
        auto e = fused_attention_efficiency(s, g, 128.0, 2048.0);
        REQUIRE(e);
        CHECK(e->fwd == doctest::Approx(0.45));
        CHECK(e->bwd == doctest::Approx(0.375));
        // head dim 96: |ln(96/64)| = 0.405 > |ln(128/96)| = 0.288, so the 128 curve; clamped
        // at both ends: 512 -> 0.4, 16384 -> 0.5.
        CHECK(fused_attention_efficiency(s, g, 96.0, 512.0)->fwd == doctest::Approx(0.4));
        CHECK(fused_attention_efficiency(s, g, 96.0, 16384.0)->fwd == doctest::Approx(0.5));
        // head dim 64 picks the 64 curve: 0.2 at 1024.
        CHECK(fused_attention_efficiency(s, g, 64.0, 1024.0)->fwd == doctest::Approx(0.2));
        GpuSpec a100 = g;
        a100.name = "NVIDIA A100 SXM4";
        CHECK_FALSE(fused_attention_efficiency(s, a100, 128.0, 2048.0).has_value());
    }

    TEST_CASE("attention: the shipped megatron-core stack reads GPT-OSS's head dim 64 on its own cuDNN curve") {
        // stacks/megatron-core.toml, FA3 paper Fig. 5/6 cuDNN bars / 989: at seq 4096 hd 64
        // forward 363 / 989 = 0.367, backward 417 / 989 = 0.422; hd 128 forward 518 / 989 =
        // 0.524, backward 499 / 989 = 0.505. The same on H200 (same SM).
        const SoftwareStack s = load_stack("megatron-core");
        for (const char* profile : {"dgx-h100", "dgx-h200"}) {
            CAPTURE(profile);
            const GpuSpec g = load_cluster(profile).gpu;
            const auto e64 = fused_attention_efficiency(s, g, 64.0, 4096.0);
            const auto e128 = fused_attention_efficiency(s, g, 128.0, 4096.0);
            REQUIRE(e64);
            REQUIRE(e128);
            CHECK(e64->fwd == doctest::Approx(0.367));
            CHECK(e64->bwd == doctest::Approx(0.422));
            CHECK(e128->fwd == doctest::Approx(0.524));
            CHECK(e128->bwd == doctest::Approx(0.505));
        }
    }

    TEST_CASE(
        "attention: fused time is kernel FLOPs at the measured efficiency plus per-call cost") {
        const ModelSpec m = test::model_4k();
        JobSpec job = test::job(8, 8, 4096);
        job.stack = fused_stack();
        Plan p = test::plan(8, 1, 1);
        // F = 4 b a s s d / 2 (causal) = 4 x 1 x 32 x 4096 x 4096 x 128 / 2 = 137,438,953,472.
        // fwd = F / (1e15 x 0.5) + 10 us = 274.878 + 10 = 284.878 us.
        // bwd = 2.5 F / (1e15 x 0.45) + 10 us = 763.550 + 10 = 773.550 us.
        FusedAttentionCost c = fused_attention_cost(m, test::h100_round(), job, p, Seconds{});
        CHECK(c.fwd_flops.value() == doctest::Approx(137438953472.0));
        CHECK(to_us(c.fwd) == doctest::Approx(284.878).epsilon(1e-5));
        CHECK(to_us(c.bwd) == doctest::Approx(773.550).epsilon(1e-5));
        // CP 2: each rank runs 2 ring steps over 2048-key chunks; F = 4 x 32 x 2048 x 4096 x 128
        // / 2 = 68,719,476,736; eff(2048) = 0.45 fwd, 0.375 bwd.
        // fwd = 6.8719e10 / 4.5e14 + 2 x 10 us = 152.710 + 20 = 172.710 us;
        // bwd = 2.5 x 6.8719e10 / 3.75e14 + 20 us = 458.130 + 20 = 478.130 us.
        p.cp = 2;
        p.dp = 4;
        c = fused_attention_cost(m, test::h100_round(), job, p, Seconds{});
        CHECK(to_us(c.fwd) == doctest::Approx(172.710).epsilon(1e-5));
        CHECK(to_us(c.bwd) == doctest::Approx(478.130).epsilon(1e-5));
        // No curve for the GPU: the GEMM price of the core (here 1 ms) halved for causal, and
        // 2.5 x that for backward: fwd 0.5 ms + 20 us = 520 us, bwd 1.25 ms + 20 us = 1270 us.
        GpuSpec other = test::h100_round();
        other.name = "B200";
        c = fused_attention_cost(m, other, job, p, ms(1.0));
        CHECK(to_us(c.fwd) == doctest::Approx(520.0));
        CHECK(to_us(c.bwd) == doctest::Approx(1270.0));
    }

    TEST_CASE("attention: fused keeps no scores, only the log-sum-exp, no masks without dropout") {
        const ModelSpec m = test::model_4k();
        JobSpec legacy = test::job(8, 8, 4096);
        JobSpec fused = legacy;
        fused.stack = fused_stack();
        fused.stack.hidden_dropout = false;
        const Plan p = test::plan(8, 1, 1);
        const double a = activation_per_layer(m, legacy, p, false, Recompute::none).value();
        const double f = activation_per_layer(m, fused, p, false, Recompute::none).value();
        // Scores: b a s^2 = 32 x 4096^2 = 536,870,912; 5 B each (softmax out 2, mask 1, dropout
        // out 2) = 2,684,354,560. Masks: 2 x 1 B x s b h = 2 x 4096 x 4096 = 33,554,432. LSE:
        // 4 B x b a s = 4 x 32 x 4096 = 524,288. a - f = 2,684,354,560 + 33,554,432 - 524,288
        // = 2,717,384,704.
        CHECK(a - f == doctest::Approx(2717384704.0));
        CHECK(fused_attention_saved_bytes(m, fused, p) == doctest::Approx(524288.0));
        // And no score bytes in HBM traffic: the softmax class is empty (materialised: softmax
        // reads and writes 2 B, dropout reads 2 B and writes 2 B + a 1 B mask: 9 B per score).
        CHECK(layer_traffic(m, fused, p, false).fwd_by_class.softmax.value() == 0.0);
        CHECK(layer_traffic(m, legacy, p, false).fwd_by_class.softmax.value() ==
              doctest::Approx(9.0 * 536870912.0));
    }

    TEST_CASE("attention: a fused cross-entropy keeps no fp32 copy of the logits") {
        const ModelSpec m = test::model_4k();
        JobSpec job = test::job(8, 8, 4096);
        const Plan p = test::plan(8, 1, 1);
        // T V / t = 4096 x 51200 = 209,715,200 logits; (2 + 4) B each unfused, 2 B fused.
        const double unfused = logits_bytes(m, job, p).value();
        job.stack.fused_cross_entropy = true;
        CHECK(unfused == doctest::Approx(6.0 * 4096.0 * double(m.vocab)));
        CHECK(logits_bytes(m, job, p).value() == doctest::Approx(2.0 * 4096.0 * double(m.vocab)));
    }
}
