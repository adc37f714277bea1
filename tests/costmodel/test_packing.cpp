// Packed sequences (costmodel/packing.hpp): the attention core over each sample of a pack, its
// FLOPs, its kernel time, the estimate, the flags and the exports, each against a value worked
// by hand in the comment.
#include "costmodel/attention.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/estimate.hpp"
#include "costmodel/flops.hpp"
#include "costmodel/packing.hpp"
#include "tests/cli_run.hpp"
#include "tests/costmodel/fixtures.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

namespace cleave {

namespace {

SoftwareStack packing_fused_stack() {
    SoftwareStack s;
    s.name = "test-fused";
    s.attention = AttentionImpl::fused;
    s.causal_skip = true;
    s.attention_step_overhead_us = 10.0;
    s.attention_curves = {{"h100", 128.0, {1024, 4096}, {0.4, 0.5}, {0.3, 0.45}}};
    return s;
}


JobSpec packed_job(double mean, double std = 0.0) {
    JobSpec j = test::job(8, 8, 4096);
    j.stack = packing_fused_stack();
    j.packed_mean_len = mean;
    j.packed_len_std = std;
    return j;
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& extra) {
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

}  // namespace

TEST_SUITE("costmodel") {
    TEST_CASE("packing: the core's span is E[L^2] / E[L] of the samples, the pack's at most") {
        // Unpacked: S keys a query, scale 1.
        const JobSpec plain = test::job(8, 8, 4096);
        CHECK(attention_span(plain) == 4096.0);
        CHECK(packed_attention_scale(plain) == 1.0);
        // Eight samples of 512 in a pack of 4096: sum L^2 / sum L = 8 x 512^2 / 4096 = 512, so
        // the core does 512 / 4096 = 1/8 of the unpacked core's work.
        CHECK(attention_span(packed_job(512.0)) == 512.0);
        CHECK(packed_attention_scale(packed_job(512.0)) == 0.125);
        // Mean 512, std 256: E[L^2] = 512^2 + 256^2, / 512 = 512 + 128 = 640 (>= the mean);
        // 640 / 4096 = 0.15625.
        CHECK(attention_span(packed_job(512.0, 256.0)) == 640.0);
        CHECK(packed_attention_scale(packed_job(512.0, 256.0)) == 0.15625);
        // No sample outgrows its pack: 3000 + 2000^2 / 3000 = 4333.3 is held at 4096.
        CHECK(attention_span(packed_job(3000.0, 2000.0)) == 4096.0);
    }

    TEST_CASE("packing: model FLOPs count the core over each sample, the linears unchanged") {
        const ModelSpec m = test::model_4k();
        // One layer's core over a sequence: 2 s a (d_qk + d_v) = 2 x 4096 x 32 x 256 =
        // 67,108,864 FLOPs a key; x 512 keys x 32 layers = 1,099,511,627,776 packed, x 4096 keys
        // = 8,796,093,022,208 unpacked: 1/8.
        CHECK(attention_core_per_sequence(m, 4096.0, 512.0) == 1099511627776.0);
        CHECK(attention_core_per_sequence(m, 4096.0) == 8796093022208.0);
        // Model FLOPs (fwd + bwd = 3 x fwd) of one pack: the difference is the core's alone,
        // 3 x (8,796,093,022,208 - 1,099,511,627,776) = 23,089,744,183,296.
        JobSpec unpacked = packed_job(512.0);
        unpacked.packed_mean_len = 0.0;
        JobSpec pk = packed_job(512.0);
        unpacked.global_batch = 1;
        pk.global_batch = 1;
        CHECK((model_flops(m, unpacked) - model_flops(m, pk)).value() == 23089744183296.0);
        // Selective recomputation redoes the core: the packed core, 3 x 1,099,511,627,776 more.
        CHECK((hardware_flops(m, pk, Recompute::selective) - model_flops(m, pk)).value() ==
              3.0 * 1099511627776.0);
    }

    TEST_CASE("packing: the fused kernel runs 1/8 of the FLOPs at the curve's efficiency at L") {
        const ModelSpec m = test::model_4k();
        Plan p = test::plan(8, 1, 1);
        // S 4096, L 512: F = 4 b a s L d / 2 (causal) = 4 x 32 x 4096 x 512 x 128 / 2 =
        // 17,179,869,184 = 137,438,953,472 (unpacked) / 8. The curve at 512 keys is clamped at
        // its first point: fwd 0.4, bwd 0.3.
        // fwd = 1.7179869184e10 / (1e15 x 0.4) + 10 us = 42.94967 + 10 = 52.94967 us;
        // bwd = 2.5 x 1.7179869184e10 / (1e15 x 0.3) + 10 us = 143.16558 + 10 = 153.16558 us.
        FusedAttentionCost c = fused_attention_cost(m, test::h100_round(), packed_job(512.0), p, Seconds{});
        CHECK(c.fwd_flops.value() == doctest::Approx(17179869184.0));
        CHECK(to_us(c.fwd) == doctest::Approx(52.94967).epsilon(1e-6));
        CHECK(to_us(c.bwd) == doctest::Approx(153.16558).epsilon(1e-6));
        // Unpacked the same layer reads the curve at 4096 (0.5, 0.45): 274.878 + 10 us forward;
        // packing cuts the forward by 284.878 / 52.950 = 5.38x, not 8x (short calls run slower).
        JobSpec unpacked = packed_job(512.0);
        unpacked.packed_mean_len = 0.0;
        CHECK(to_us(fused_attention_cost(m, test::h100_round(), unpacked, p, Seconds{}).fwd) ==
              doctest::Approx(284.878).epsilon(1e-5));
        // CP 2, L 2048: every sample split over the two ranks (THD), a call of 2048 / 2 = 1024
        // keys (eff 0.4, 0.3); F = 4 x 32 x 2048 x 2048 x 128 / 2 = 34,359,738,368 a rank.
        // fwd = 3.4359738368e10 / 4e14 + 2 x 10 us = 85.89935 + 20 = 105.89935 us;
        // bwd = 2.5 x 3.4359738368e10 / 3e14 + 20 us = 286.33115 + 20 = 306.33115 us.
        p.cp = 2;
        p.dp = 4;
        c = fused_attention_cost(m, test::h100_round(), packed_job(2048.0), p, Seconds{});
        CHECK(c.fwd_flops.value() == doctest::Approx(34359738368.0));
        CHECK(to_us(c.fwd) == doctest::Approx(105.89935).epsilon(1e-6));
        CHECK(to_us(c.bwd) == doctest::Approx(306.33115).epsilon(1e-6));
    }

    TEST_CASE("packing: a layer's core shrinks, its linears, activations and loss do not") {
        const ModelSpec m = test::model_4k();
        ClusterSpec c = test::dgx_a100();
        c.gpu.name = "NVIDIA H100 SXM5 80GB";  // the stack's curve applies
        JobSpec pk = packed_job(512.0);
        JobSpec unpacked = pk;
        unpacked.packed_mean_len = 0.0;
        const Plan p = test::plan(8, 1, 1);
        const PlanLinks l = plan_links(c, p);
        const LayerCost a = layer_cost(m, c, pk, p, l, false);
        const LayerCost b = layer_cost(m, c, unpacked, p, l, false);
        // The core is the fused kernel's price, fwd + bwd, at the span: 1/8 of the FLOPs.
        const FusedAttentionCost fa = fused_attention_cost(m, c.gpu, pk, p, Seconds{});
        const FusedAttentionCost fb = fused_attention_cost(m, c.gpu, unpacked, p, Seconds{});
        CHECK(fa.fwd_flops.value() * 8.0 == doctest::Approx(fb.fwd_flops.value()));
        CHECK(a.gemm == b.gemm);
        CHECK(a.memory.value() == doctest::Approx(b.memory.value()).epsilon(1e-12));
        CHECK(a.attention.value() == doctest::Approx((fa.fwd + fa.bwd).value()).epsilon(1e-12));
        CHECK(b.attention.value() == doctest::Approx((fb.fwd + fb.bwd).value()).epsilon(1e-12));
        // The forward and backward differ by the core's difference alone.
        CHECK((b.fwd - a.fwd).value() == doctest::Approx((fb.fwd - fa.fwd).value()).epsilon(1e-9));
        CHECK((b.bwd - a.bwd).value() == doctest::Approx((fb.bwd - fa.bwd).value()).epsilon(1e-9));
        const Estimate ea = estimate(m, c, pk, p);
        const Estimate eb = estimate(m, c, unpacked, p);
        CHECK(ea.memory.activations == eb.memory.activations);  // the same tokens a micro-batch
        CHECK(ea.memory.total == eb.memory.total);
        CHECK(ea.iteration_time < eb.iteration_time);
    }

    TEST_CASE("packing: --packed-seq on explain and plan, its refusals, and the exports") {
        const std::string model = std::string(CLEAVE_TEST_DATA_DIR) + "/examples/llama-3-8b.toml";
        const std::vector<std::string> base = {"explain", model,  "dgx-h100", "--gpus", "8",
                                               "--gbs",   "16",   "--seq",    "4096",   "--tp",
                                               "1",       "--zero", "1",      "--format", "json"};
        const test::CliRun plain = test::run_cleave(base);
        REQUIRE(plain.code == 0);
        const test::CliRun pk =
            test::run_cleave(with(base, {"--packed-seq", "--packed-seq-mean-len", "512"}));
        REQUIRE(pk.code == 0);
        const nlohmann::json jp = nlohmann::json::parse(plain.out);
        const nlohmann::json jk = nlohmann::json::parse(pk.out);
        CHECK(jp.count("packed_seq") == 0);
        CHECK(jk["packed_seq"]["packed_sequence_size"] == 4096);
        CHECK(jk["packed_seq"]["mean_len"].get<double>() == 512.0);
        CHECK(jk["packed_seq"]["attention_scale"].get<double>() == 0.125);
        // Packing prices a cheaper step on the same tokens and the same memory.
        CHECK(jk["iteration_time_s"].get<double>() < jp["iteration_time_s"].get<double>());
        CHECK(jk["memory_gib"]["total"].get<double>() == jp["memory_gib"]["total"].get<double>());
        // Full fine-tuning (--peft none) and LoRA both combine with packing.
        CHECK(test::run_cleave(with(base, {"--peft", "none", "--packed-seq",
                                           "--packed-seq-mean-len", "512"}))
                  .code == 0);
        const test::CliRun lora = test::run_cleave(
            with(base, {"--peft", "lora", "--packed-seq", "--packed-seq-mean-len", "512"}));
        REQUIRE(lora.code == 0);
        CHECK(nlohmann::json::parse(lora.out).count("peft") == 1);
        CHECK(nlohmann::json::parse(lora.out).count("packed_seq") == 1);
        // Refusals exit 2 naming the flag.
        const auto refused = [&base](const std::vector<std::string>& extra, const char* flag) {
            const test::CliRun x = test::run_cleave(with(base, extra));
            CHECK(x.code == 2);
            CHECK(x.err.find(flag) != std::string::npos);
        };
        refused({"--packed-seq"}, "--packed-seq-mean-len");
        refused({"--packed-seq", "--packed-seq-mean-len", "8192"}, "--packed-seq-mean-len");
        refused({"--packed-seq-mean-len", "512"}, "--packed-seq");
        refused({"--packed-seq", "--packed-seq-mean-len", "512", "--packed-seq-len-std", "-1"},
                "--packed-seq-len-std");
        refused({"--packed-seq", "--packed-seq-mean-len", "512", "--mbs", "2"}, "--mbs 2");
        refused({"--packed-seq", "--packed-seq-mean-len", "512", "--stack", "torchtitan-fsdp2"},
                "--packed-seq");
        // plan: one pack a micro-batch, the header says so; Bridge gets --mode sft and the
        // offline packing specs (TP 2 with SP: every sample padded to cp x tp = 2); Megatron-LM
        // gets --sft.
        const std::vector<std::string> plan = {"plan", model, "dgx-h100", "--gpus", "8", "--gbs",
                                               "16", "--seq", "4096", "--tp", "2", "--sp",
                                               "--packed-seq", "--packed-seq-mean-len", "512",
                                               "--top", "1"};
        const test::CliRun t = test::run_cleave(plan);
        REQUIRE(t.code == 0);
        CHECK(t.out.find("# packed: packs of 4096 tokens, samples of mean 512 (std 0) tokens: "
                         "attention per sample, span E[L^2]/E[L] 512 = 0.125 of the unpacked "
                         "core") != std::string::npos);
        const test::CliRun b = test::run_cleave(with(plan, {"--format", "bridge"}));
        REQUIRE(b.code == 0);
        CHECK(b.out.find("--mode sft") != std::string::npos);
        CHECK(b.out.find("train.micro_batch_size=1 ") != std::string::npos);
        CHECK(b.out.find("dataset.enable_offline_packing=true") != std::string::npos);
        CHECK(b.out.find("dataset.offline_packing_specs.packed_sequence_size=4096") !=
              std::string::npos);
        CHECK(b.out.find("dataset.offline_packing_specs.pad_seq_to_mult=2") != std::string::npos);
        const test::CliRun mg = test::run_cleave(with(plan, {"--format", "megatron"}));
        REQUIRE(mg.code == 0);
        CHECK(mg.out.find("--sft") != std::string::npos);
        // torchtitan and DeepSpeed configs have no THD packing cleave writes: exit 2.
        const test::CliRun tt = test::run_cleave(with(plan, {"--format", "torchtitan"}));
        CHECK(tt.code == 2);
        CHECK(tt.err.find("--packed-seq") != std::string::npos);
        const test::CliRun bl = test::run_cleave(with(plan, {"--peft", "lora", "--format", "bridge"}));
        REQUIRE(bl.code == 0);
        CHECK(bl.out.find("--mode lora") != std::string::npos);
        CHECK(bl.out.find("dataset.enable_offline_packing=true") != std::string::npos);
    }
}

}  // namespace cleave
