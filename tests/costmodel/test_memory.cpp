#include "costmodel/estimate.hpp"
#include "costmodel/memory.hpp"
#include "tests/costmodel/fixtures.hpp"

#include <doctest/doctest.h>

using namespace cleave;

namespace {

JobSpec bf16_grads(JobSpec j) {
    j.grads = Dtype::bf16;
    return j;
}

}  // namespace

TEST_SUITE("costmodel") {
    TEST_CASE(
        "memory: mixed-precision Adam is 16 B per param with 2-byte grads and 18 with fp32 grads") {
        const JobSpec j = bf16_grads(test::job(1, 1));
        // 2 (bf16 weights) + 2 (bf16 grads) + 4 (fp32 master) + 4 + 4 (Adam m, v) = 16
        const StateBytes s = model_states(j, 1e9, 0, 1);
        CHECK(s.weights.value() == doctest::Approx(2e9));
        CHECK(s.grads.value() == doctest::Approx(2e9));
        CHECK(s.optimizer.value() == doctest::Approx(12e9));
        // Megatron's default fp32 main grads: 2 + 4 + 12 = 18
        const StateBytes f = model_states(test::job(1, 1), 1e9, 0, 1);
        CHECK((f.weights + f.grads + f.optimizer).value() == doctest::Approx(18e9));
    }

    TEST_CASE("memory: ZeRO 1 2 3 shard optimizer then grads then weights") {
        const JobSpec j = bf16_grads(test::job(8, 8));
        const auto total = [&](int zero) {
            const StateBytes s = model_states(j, 1e9, zero, 8);
            return (s.weights + s.grads + s.optimizer).value();
        };
        CHECK(total(0) == doctest::Approx(16e9));
        CHECK(total(1) == doctest::Approx(5.5e9));   // 4 + 12/8 = 5.5 B/param
        CHECK(total(2) == doctest::Approx(3.75e9));  // 2 + 14/8 = 3.75
        CHECK(total(3) == doctest::Approx(2e9));     // 16/8 = 2
    }

    TEST_CASE("memory: seed 13B with pure DP on 32 x A100-80GB does not fit") {
        const ModelSpec m = test::seed13b();
        // 32 x (12 h^2 + 13 h) + V h + s h + 2h = 13,049,314,560 parameters (h = 5760)
        REQUIRE(params_total(m) == 13049314560);
        const JobSpec j = bf16_grads(test::job(32, 128));
        const Estimate e = estimate(m, test::dgx_a100(), j, test::plan(32, 1, 1, 1));
        // 16 B/param x 13,049,314,560 = 208,789,032,960 B (~208.8 GB, 194.4 GiB) of model states
        const Bytes states = e.memory.weights + e.memory.grads + e.memory.optimizer;
        CHECK(states.value() == doctest::Approx(208789032960.0).epsilon(1e-9));
        CHECK_FALSE(e.fits);
        CHECK(e.has(RiskKind::oom));
        // ZeRO-3 over 32 GPUs shards it to 6.5 GB and fits
        Plan z3 = test::plan(32, 1, 1, 1);
        z3.zero = 3;
        z3.recompute = Recompute::full;
        const Estimate e3 = estimate(m, test::dgx_a100(), j, z3);
        CHECK((e3.memory.weights + e3.memory.grads + e3.memory.optimizer).value() ==
              doctest::Approx(208789032960.0 / 32).epsilon(1e-9));
        CHECK(e3.fits);
    }

    TEST_CASE("memory: Korthikanti activation formulas per layer") {
        const ModelSpec m = test::gpt3();
        const JobSpec j = test::job(8, 8);
        // s b h = 2048 x 1 x 12288 = 25,165,824; 5 a s / h = 5 x 96 x 2048 / 12288 = 80
        const double sbh = 25165824.0;
        Plan p = test::plan(1, 1, 1);
        // no parallelism: s b h (34 + 5as/h) = 114 sbh
        CHECK(activation_per_layer(m, j, p, false, Recompute::none).value() ==
              doctest::Approx(114 * sbh).epsilon(1e-12));
        p.tp = 8;
        // TP: s b h (10 + 24/t + 5as/(ht)) = (10 + 3 + 10) sbh = 23 sbh
        CHECK(activation_per_layer(m, j, p, false, Recompute::none).value() ==
              doctest::Approx(23 * sbh).epsilon(1e-12));
        // TP, selective: s b h (10 + 24/t) = 13 sbh
        CHECK(activation_per_layer(m, j, p, false, Recompute::selective).value() ==
              doctest::Approx(13 * sbh).epsilon(1e-12));
        // full: the layer input 2 s b h
        CHECK(activation_per_layer(m, j, p, false, Recompute::full).value() ==
              doctest::Approx(2 * sbh).epsilon(1e-12));
        p.sp = true;
        // TP + SP: s b h (34 + 5as/h) / t = 114/8 sbh = 14.25 sbh
        CHECK(activation_per_layer(m, j, p, false, Recompute::none).value() ==
              doctest::Approx(14.25 * sbh).epsilon(1e-12));
        // TP + SP + selective: 34 s b h / t = 4.25 sbh
        CHECK(activation_per_layer(m, j, p, false, Recompute::selective).value() ==
              doctest::Approx(4.25 * sbh).epsilon(1e-12));
        // TP + SP + full: 2 s b h / t
        CHECK(activation_per_layer(m, j, p, false, Recompute::full).value() ==
              doctest::Approx(0.25 * sbh).epsilon(1e-12));
        // mbs scales linearly
        p.mbs = 2;
        CHECK(activation_per_layer(m, test::job(8, 16), p, false, Recompute::selective).value() ==
              doctest::Approx(8.5 * sbh).epsilon(1e-12));
    }

    TEST_CASE("memory: uneven first and last stages") {
        Plan p = test::plan(1, 8, 8);
        p.sp = true;
        p.recompute = Recompute::selective;
        p.schedule = Schedule::interleaved;
        p.vpp = 3;
        const Estimate e = estimate(test::gpt3(), test::dgx_a100(), test::job(64, 64), p);
        // The last stage holds fp32 + 16-bit logits of one micro-batch: (2 + 4) x 2048 x 51200/8
        CHECK(e.stage[2].memory.logits.value() ==
              doctest::Approx(6.0 * 2048 * 6400).epsilon(1e-12));
        CHECK(e.stage[0].memory.logits.value() == 0.0);
        // The first stage adds the embedding (V h + s h)/t parameters: 2 B each more weights
        const double emb = (51200.0 * 12288 + 2048.0 * 12288) / 8;
        CHECK((e.stage[0].memory.weights - e.stage[1].memory.weights).value() ==
              doctest::Approx(2 * emb).epsilon(1e-9));
        // The first stage holds the most micro-batches: p (1 + (p-1)/(p v)) = 10.33
        CHECK(e.stage[0].memory.activations > e.stage[1].memory.activations);
        CHECK(e.stage[2].fwd > e.stage[1].fwd);  // output layer + loss
        CHECK(e.peak_memory_stage == 0);
    }
}
