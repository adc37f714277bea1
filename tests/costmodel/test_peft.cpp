// LoRA fine-tuning (costmodel/peft.hpp): adapter shapes, states, activations and time, each
// against a hand-worked value.
#include "costmodel/collectives.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/estimate.hpp"
#include "costmodel/peft.hpp"
#include "core/load.hpp"
#include "published/published.hpp"
#include "tests/cli_run.hpp"
#include "tests/costmodel/fixtures.hpp"

#include <doctest/doctest.h>
#include <fstream>
#include <map>
#include <sstream>
#include <nlohmann/json.hpp>

namespace cleave {

namespace {

// Llama 2 70B (its HF config): 80 layers, h 8192, 64 heads, 8 KV heads, f 28672 SwiGLU, V 32000.
ModelSpec peft_llama2_70b() {
    ModelSpec m;
    m.name = "llama2-70b";
    m.layers = 80;
    m.hidden = 8192;
    m.heads = 64;
    m.kv_heads = 8;
    m.ffn_hidden = 28672;
    m.vocab = 32000;
    m.seq_len = 4096;
    m.mlp = MlpKind::swiglu;
    m.norm = NormKind::rmsnorm;
    return m;
}

// MLPerf's LoRA: dim 16, alpha 32, on the attention's linears (qkv and proj).
JobSpec peft_mlperf_job() {
    JobSpec j = test::job(8, 8, 8192);
    j.peft = Peft::lora;
    j.lora_dim = 16;
    j.lora_alpha = 32.0;
    j.lora_targets = lora_target::linear_qkv | lora_target::linear_proj;
    return j;
}

}  // namespace

TEST_SUITE("costmodel") {

    TEST_CASE("peft: LoRA parameters per layer are dim x (in + out) per adapted linear") {
        const ModelSpec m = peft_llama2_70b();
        JobSpec j = peft_mlperf_job();
        // qkv 8192 -> (64 + 2 x 8) x 128 = 10240: 16 x 18432; proj 8192 -> 8192: 16 x 16384.
        // 294,912 + 262,144 = 557,056 (x 80 layers = 44,564,480).
        CHECK(lora_params_per_layer(m, j) == doctest::Approx(557056.0).epsilon(1e-12));
        // Bridge's defaults, dim 32 on all four: 32 (18432 + 16384 + (8192 + 57344) + (28672 +
        // 8192)) = 32 x 137,216 = 4,390,912.
        j.lora_dim = 32;
        j.lora_targets = lora_target::all;
        CHECK(lora_params_per_layer(m, j) == doctest::Approx(4390912.0).epsilon(1e-12));
        j.peft = Peft::none;
        CHECK(lora_params_per_layer(m, j) == 0.0);
    }

    TEST_CASE("peft: a frozen base keeps weights only, the adapters full mixed-precision states") {
        JobSpec j = test::job(8, 8);  // bf16 weights, fp32 main grads, Adam fp32 master + m + v
        // frozen 1e9 x 2 B + adapters 1e6 x 2 B; grads 1e6 x 4 B; optimizer 1e6 x 12 B / 4 (zero
        // 1).
        const StateBytes z1 = lora_model_states(j, 1e9, 1e6, 1, 4);
        CHECK(z1.weights.value() == doctest::Approx(2.002e9).epsilon(1e-12));
        CHECK(z1.grads.value() == doctest::Approx(4e6).epsilon(1e-12));
        CHECK(z1.optimizer.value() == doctest::Approx(3e6).epsilon(1e-12));
        // ZeRO 3 shards the frozen weights too: (2e9 + 2e6) / 4; grads 4e6 / 4, optimizer 12e6 / 4.
        const StateBytes z3 = lora_model_states(j, 1e9, 1e6, 3, 4);
        CHECK(z3.weights.value() == doctest::Approx(5.005e8).epsilon(1e-12));
        CHECK(z3.grads.value() == doctest::Approx(1e6).epsilon(1e-12));
        CHECK(z3.optimizer.value() == doctest::Approx(3e6).epsilon(1e-12));
        // A frozen FP8 base: 1e9 x 1 B; the adapters stay 16-bit: + 1e6 x 2 B.
        j.weights = Dtype::fp8;
        CHECK(lora_model_states(j, 1e9, 1e6, 1, 4).weights.value() ==
              doctest::Approx(1.002e9).epsilon(1e-12));
    }

    TEST_CASE("peft: adapters keep A's output and a column adapter its whole input") {
        const ModelSpec m = peft_llama2_70b();
        const JobSpec j = peft_mlperf_job();
        Plan p = test::plan(1, 8, 1);
        // T = 8192 tokens, bf16: qkv and proj each keep 2 x 8192 x 16 = 262,144 B of A's output,
        // and qkv's adapter its input, the norm's output, 2 x 8192 x 8192 = 134,217,728 B (the
        // frozen base linear keeps none of it), gathered whole under SP too.
        CHECK(lora_activation_per_layer(m, j, p, Recompute::none).value() ==
              doctest::Approx(524288.0 + 134217728.0).epsilon(1e-12));
        p.sp = true;
        CHECK(lora_activation_per_layer(m, j, p, Recompute::selective).value() ==
              doctest::Approx(524288.0 + 134217728.0).epsilon(1e-12));
        CHECK(lora_activation_per_layer(m, j, p, Recompute::full).value() == 0.0);
    }

    TEST_CASE("peft: a frozen base keeps no linear's input") {
        // TE v1.10 linear.py / layernorm_linear.py save a GEMM input only for a weight that
        // requires grad (memory.cpp activation_per_layer). Llama 2 70B, T 8192, t 8, no SP, bf16:
        // the QKV and fc1 inputs 2 x (2 x 8192 x 8192) = 268,435,456 B and fc2's input
        // 2 x 8192 x 28672 / 8 = 58,720,256 B (the projection's input is the attention output
        // the attention core keeps): 327,155,712 B fewer than the trained layer.
        const ModelSpec m = peft_llama2_70b();
        JobSpec frozen = peft_mlperf_job();
        JobSpec trained = frozen;
        trained.peft = Peft::none;
        const Plan p = test::plan(1, 8, 1);
        const double diff = activation_per_layer(m, trained, p, false, Recompute::none).value() -
                            activation_per_layer(m, frozen, p, false, Recompute::none).value();
        CHECK(diff == doctest::Approx(327155712.0).epsilon(1e-12));
    }

    TEST_CASE("peft: a thin adapter GEMM streams its operands at HBM speed, at least one launch") {
        GpuSpec gpu = test::dgx_a100().gpu;  // GEMMs at 0.8 of 312 TFLOP/s, HBM 2039 GB/s x 0.8
        const GemmShape a{8192, 16, 8192, 1.0};
        // math 2 x 8192 x 16 x 8192 / (312e12 x 0.8) = 8.60 us; bytes (8192^2 + 8192 x 16) x 2 +
        // 2 x 8192 x 16 (the output) = 134,742,016 B / 1.6312e12 B/s = 82.60 us: the stream.
        CHECK(lora_gemm_time(gpu, Dtype::bf16, a, GemmPass::fprop).value() ==
              doctest::Approx(134742016.0 / 1.6312e12).epsilon(1e-12));
        // wgrad: (8192^2 + 8192 x 16) x 2 + 8 x 8192 x 16 (the fp32 main grad) = 135,528,448 B.
        CHECK(lora_gemm_time(gpu, Dtype::bf16, a, GemmPass::wgrad).value() ==
              doctest::Approx(135528448.0 / 1.6312e12).epsilon(1e-12));
        gpu.kernel_floor = Seconds{5e-6};  // 16 x 16 x 16: a launch
        CHECK(
            lora_gemm_time(gpu, Dtype::bf16, GemmShape{16, 16, 16, 1.0}, GemmPass::fprop).value() ==
            doctest::Approx(5e-6).epsilon(1e-12));
    }

    TEST_CASE(
        "peft: one adapter's layer time, and the base backward without its weight gradients") {
        const ModelSpec m = peft_llama2_70b();
        const ClusterSpec c = test::dgx_a100();
        JobSpec j = peft_mlperf_job();
        j.lora_targets = lora_target::linear_proj;
        const Plan p = test::plan(8, 1, 1);
        // proj, t 1, T 8192: A 8192 x 8192 -> 16, B 8192 x 16 -> 8192. Each pass of either streams
        // (as above) 134,742,016 B (fprop; dgrad: (8192 x 16 + 16 x 8192) x 2 + 2 x 8192^2 for A,
        // (8192^2 + 16 x 8192) x 2 + 2 x 8192 x 16 for B) or 135,528,448 B (wgrad), B/s 1.6312e12.
        const double bw = 1.6312e12;
        const LoraTimes t = lora_layer_times(m, c.gpu, j, p, plan_links(c, p));
        CHECK(t.fwd_gemm.value() == doctest::Approx(2.0 * 134742016.0 / bw).epsilon(1e-12));
        CHECK(t.bwd_gemm.value() ==
              doctest::Approx((2.0 * 134742016.0 + 2.0 * 135528448.0) / bw).epsilon(1e-12));
        // Scale + add: 5 x 2 B x 8192^2 forward; the scale's backward 2 x out + the input
        // gradients' sum 3 x in, 2 B each: 10 x 8192^2 B too.
        CHECK(t.fwd_memory.value() == doctest::Approx(10.0 * 8192.0 * 8192.0 / bw).epsilon(1e-12));
        CHECK(t.bwd_memory.value() == doctest::Approx(10.0 * 8192.0 * 8192.0 / bw).epsilon(1e-12));
        // No adapter at all: the base linears' backward is their dgrad alone, 2/3 of the GEMM time
        // at the fixture's constant efficiency.
        JobSpec bare = j;
        bare.lora_targets = 0;
        JobSpec full = j;
        full.peft = Peft::none;
        const PlanLinks l = plan_links(c, p);
        const LayerCost frozen = layer_cost(m, c, bare, p, l, false);
        const LayerCost trained = layer_cost(m, c, full, p, l, false);
        CHECK(frozen.gemm.value() ==
              doctest::Approx(trained.gemm.value() * 2.0 / 3.0).epsilon(1e-12));
        CHECK(frozen.fwd == trained.fwd);
        // The adapter adds exactly its own times to the layer.
        const LayerCost adapted = layer_cost(m, c, j, p, l, false);
        CHECK(adapted.fwd.value() ==
              doctest::Approx((frozen.fwd + t.fwd_gemm + t.fwd_memory).value()).epsilon(1e-12));
    }

    TEST_CASE("peft: DoRA's magnitudes, its kept sums and the weight it rebuilds every forward") {
        const ModelSpec m = peft_llama2_70b();
        JobSpec j = peft_mlperf_job();
        j.peft = Peft::dora;
        // LoRA's 557,056 and a magnitude per output row: qkv 10240 + proj 8192 = 575,488.
        CHECK(lora_params_per_layer(m, j) == doctest::Approx(575488.0).epsilon(1e-12));
        // Activations, T 8192, t 8, bf16: LoRA's 524,288 + 134,217,728 B, and the sum each scale
        // keeps: qkv's output 8192 x 10240 / 8 x 2 = 20,971,520 B; proj's whole output 8192 x
        // 8192 x 2 = 134,217,728 B, under SP its sequence shard, 16,777,216 B.
        Plan p = test::plan(1, 8, 1);
        CHECK(lora_activation_per_layer(m, j, p, Recompute::none).value() ==
              doctest::Approx(524288.0 + 134217728.0 + 20971520.0 + 134217728.0).epsilon(1e-12));
        p.sp = true;
        CHECK(lora_activation_per_layer(m, j, p, Recompute::none).value() ==
              doctest::Approx(524288.0 + 134217728.0 + 20971520.0 + 16777216.0).epsilon(1e-12));
        // Time, proj alone at t 1 (T 8192): W + s B A rebuilt, 7 x 2 B x 8192^2 a forward, and
        // the output scaled, 2 x 2 B x 8192^2, beside LoRA's 10 x 8192^2 B: 28 x 8192^2 B;
        // backward LoRA's 10 and the scale's two gradients 5 x 2 B: 20 x 8192^2 B; the GEMMs as
        // LoRA's. No TP: nothing gathered.
        const ClusterSpec c = test::dgx_a100();
        j.lora_targets = lora_target::linear_proj;
        const Plan q = test::plan(8, 1, 1);
        const double bw = 1.6312e12;
        const LoraTimes t = lora_layer_times(m, c.gpu, j, q, plan_links(c, q));
        CHECK(t.fwd_memory.value() == doctest::Approx(28.0 * 8192.0 * 8192.0 / bw).epsilon(1e-12));
        CHECK(t.bwd_memory.value() == doctest::Approx(20.0 * 8192.0 * 8192.0 / bw).epsilon(1e-12));
        CHECK(t.fwd_gemm.value() == doctest::Approx(2.0 * 134742016.0 / bw).epsilon(1e-12));
        CHECK(t.tp_fwd.value() == 0.0);
        // At t 8 proj's B (8192 / 8 x 16 a rank) is gathered first: 8192 x 16 x 2 = 262,144 B.
        const LoraTimes t8 = lora_layer_times(m, c.gpu, j, p, plan_links(c, p));
        JobSpec lora = j;
        lora.peft = Peft::lora;
        const LoraTimes l8 = lora_layer_times(m, c.gpu, lora, p, plan_links(c, p));
        CHECK((t8.tp_bytes - l8.tp_bytes).value() ==
              doctest::Approx(collective_bytes_sent(Collective::all_gather, bytes(262144.0), 8).value()));
    }

    TEST_CASE("peft: model FLOPs drop the frozen weight gradients and add the adapters'") {
    const ModelSpec m = peft_llama2_70b();
    JobSpec j = peft_mlperf_job();
    j.global_batch = 1;
    j.seq_len = 4096;
    JobSpec pre = j;
    pre.peft = Peft::none;
    // GEMM weights a layer: qkv 8192 x 10240 + proj 8192^2 + fc1 8192 x 57344 + fc2 28672 x 8192
    // = 855,638,016; x 80 = 68,451,041,280, + the head 8192 x 32000 = 68,713,185,280. Frozen
    // wgrad 2 x 4096 x that = 562,898,413,813,760; adapters 6 x 4096 x 80 x 557,056 =
    // 1,095,216,660,480: the difference 561,803,197,153,280.
    CHECK((model_flops(m, pre) - model_flops(m, j)).value() ==
          doctest::Approx(561803197153280.0).epsilon(1e-12));
}

TEST_CASE("peft: the adapters' own TP collectives under SP") {
        const ModelSpec m = peft_llama2_70b();
        const ClusterSpec c = test::dgx_a100();
        JobSpec j = peft_mlperf_job();
        j.stack.tp_comm_overlap = false;
        Plan p = test::plan(4, 2, 1);
        p.sp = true;
        const PlanLinks l = plan_links(c, p);
        // T 8192, S = 2 x 8192 x 8192 = 134,217,728 B, s = 2 x 8192 x 16 = 262,144 B, t 2.
        // proj (row): all-reduce s + all-gather S forward, all-gather S + all-reduce s backward;
        // sent: s + S/2 + S/2 + s = 134,742,016 B.
        j.lora_targets = lora_target::linear_proj;
        const LoraTimes row = lora_layer_times(m, c.gpu, j, p, l);
        CHECK(row.tp_bytes.value() == doctest::Approx(134742016.0).epsilon(1e-12));
        CHECK(row.tp_fwd.value() ==
              doctest::Approx((collective_time(Collective::all_reduce, Bytes{262144.0}, 2, l.tp) +
                               collective_time(Collective::all_gather, Bytes{134217728.0}, 2, l.tp))
                                  .value())
                  .epsilon(1e-12));
        // qkv (column), the norm's output gathered by TE: all-gather s forward, all-reduce s
        // backward: s/2 + s = 393,216 B. With userbuffers (tp_comm_overlap) the adapter gathers
        // its input itself, all-gather S forward and reduce-scatter S backward: + S.
        j.lora_targets = lora_target::linear_qkv;
        CHECK(lora_layer_times(m, c.gpu, j, p, l).tp_bytes.value() ==
              doctest::Approx(393216.0).epsilon(1e-12));
        j.stack.tp_comm_overlap = true;
        CHECK(lora_layer_times(m, c.gpu, j, p, l).tp_bytes.value() ==
              doctest::Approx(393216.0 + 134217728.0).epsilon(1e-12));
    }

    TEST_CASE("peft: a frozen column-parallel linear's input-gradient collective is exposed") {
        // TE v1.10 layernorm_linear.py backward: a frozen weight has no wgrad GEMM, so no input
        // re-gather and nothing to hide the data gradient's reduce-scatter behind (compute.cpp
        // add_tp). Llama 2 70B layer, T 8192, t 2, SP, no adapters (the base alone), bf16:
        // S = 2 x 8192 x 8192 = 134,217,728 B per collective; the fixture's GEMMs (ms) hide
        // every trained-case collective (< 1 ms), and it has no sync wait.
        const ModelSpec m = peft_llama2_70b();
        const ClusterSpec c = test::dgx_a100();
        JobSpec frozen = peft_mlperf_job();
        frozen.lora_targets = 0;
        frozen.stack.tp_comm_overlap = false;
        JobSpec trained = frozen;
        trained.peft = Peft::none;
        Plan p = test::plan(4, 2, 1);
        p.sp = true;
        const PlanLinks l = plan_links(c, p);
        const double S = 134217728.0;
        const double ag = collective_time(Collective::all_gather, Bytes{S}, 2, l.tp).value();
        const double rs = collective_time(Collective::reduce_scatter, Bytes{S}, 2, l.tp).value();
        // Trained: the row layers' (proj, fc2) output-gradient all-gathers alone are exposed;
        // frozen: + the column layers' (QKV, fc1) reduce-scatters.
        const LayerCost lt = layer_cost(m, c, trained, p, l, false);
        const LayerCost lf = layer_cost(m, c, frozen, p, l, false);
        CHECK(lt.tp_bwd.value() == doctest::Approx(2.0 * ag).epsilon(1e-12));
        CHECK(lf.tp_bwd.value() == doctest::Approx(2.0 * (ag + rs)).epsilon(1e-12));
        // Sent per GPU, S/2 a collective at t 2: trained forward 2 x (ag + rs), backward
        // 2 x (ag + ag + rs) = 5 S; frozen drops the 2 input re-gathers: 4 S = 536,870,912 B.
        CHECK(lt.tp_bytes.value() == doctest::Approx(5.0 * S).epsilon(1e-12));
        CHECK(lf.tp_bytes.value() == doctest::Approx(536870912.0).epsilon(1e-12));
        // Userbuffers overlap (no bulk SMs held in the fixture's stack): the same 2 rs more.
        frozen.stack.tp_comm_overlap = true;
        trained.stack.tp_comm_overlap = true;
        const double d = layer_cost(m, c, frozen, p, l, false).tp_bwd.value() -
                         layer_cost(m, c, trained, p, l, false).tp_bwd.value();
        CHECK(d == doctest::Approx(2.0 * rs).epsilon(1e-9));
    }

    TEST_CASE("peft: a LoRA estimate holds grads and optimizer states for the adapters alone") {
        const ModelSpec m = peft_llama2_70b();
        const ClusterSpec c = test::dgx_a100();
        JobSpec j = peft_mlperf_job();
        j.seq_len = 4096;
        const Plan p = test::plan(1, 8, 1);
        const Estimate e = estimate(m, c, j, p);
        // 80 x 557,056 / 8 = 5,570,560 adapter parameters a GPU: fp32 grads 22,282,240 B,
        // Adam's fp32 master + m + v 66,846,720 B (zero 0).
        CHECK(e.memory.grads.value() == doctest::Approx(22282240.0).epsilon(1e-12));
        CHECK(e.memory.optimizer.value() == doctest::Approx(66846720.0).epsilon(1e-12));
        JobSpec pre = j;
        pre.peft = Peft::none;
        const Estimate full = estimate(m, c, pre, p);
        // Weights: the frozen base as pre-training holds it, plus the adapters' 2 B each.
        CHECK(e.memory.weights.value() ==
              doctest::Approx(full.memory.weights.value() + 2.0 * 5570560.0).epsilon(1e-12));
        CHECK(e.iteration_time < full.iteration_time);
    }

    TEST_CASE("peft: --peft lora on explain, and its flags' bad values exit 2 naming the flag") {
        const std::string model = std::string(CLEAVE_TEST_DATA_DIR) + "/examples/llama-2-70b.toml";
        const std::vector<std::string> base = {"explain",
                                               model,
                                               "dgx-h100",
                                               "--gpus",
                                               "8",
                                               "--gbs",
                                               "8",
                                               "--seq",
                                               "8192",
                                               "--tp",
                                               "4",
                                               "--sp",
                                               "--format",
                                               "json"};
        std::vector<std::string> lora = base;
        lora.insert(lora.end(),
                    {"--peft",
                     "lora",
                     "--lora-dim",
                     "16",
                     "--lora-target-modules",
                     "linear_qkv,linear_proj"});
        const test::CliRun r = test::run_cleave(lora);
        REQUIRE(r.code == 0);
        const nlohmann::json j = nlohmann::json::parse(r.out);
        CHECK(j["peft"]["method"] == "lora");
        CHECK(j["peft"]["dim"] == 16);
        CHECK(j["peft"]["alpha"].get<double>() == 32.0);  // Bridge's default
        CHECK(j["peft"]["target_modules"] == "linear_qkv,linear_proj");
        CHECK(j["peft"]["trainable_params"].get<double>() == doctest::Approx(44564480.0));
        const test::CliRun plain = test::run_cleave(base);
        REQUIRE(plain.code == 0);
        CHECK(nlohmann::json::parse(plain.out).count("peft") == 0);
        const auto refused = [&base](std::vector<std::string> extra, const char* flag) {
            std::vector<std::string> a = base;
            a.insert(a.end(), {"--peft", "lora"});
            a.insert(a.end(), extra.begin(), extra.end());
            const test::CliRun x = test::run_cleave(a);
            CHECK(x.code == 2);
            CHECK(x.err.find(flag) != std::string::npos);
        };
        refused({"--lora-dim", "0"}, "--lora-dim");
        refused({"--lora-alpha", "-1"}, "--lora-alpha");
        refused({"--lora-target-modules", "linear_qkv,q_proj"}, "--lora-target-modules");
        refused({"--optimizer", "muon"}, "--peft lora");
        // Exports: Bridge's peft config for run_recipe.py --mode lora; Megatron-LM says it has
        // no PEFT flags.
        const std::vector<std::string> plan = {"plan", model, "dgx-h100", "--gpus", "8", "--gbs",
                                               "8", "--seq", "8192", "--peft", "lora",
                                               "--lora-dim", "16", "--lora-target-modules",
                                               "linear_qkv,linear_proj", "--top", "1"};
        std::vector<std::string> bridge = plan;
        bridge.insert(bridge.end(), {"--format", "bridge"});
        const test::CliRun b = test::run_cleave(bridge);
        REQUIRE(b.code == 0);
        CHECK(b.out.find("--mode lora") != std::string::npos);
        CHECK(b.out.find("peft.dim=16 ") != std::string::npos);
        CHECK(b.out.find("peft.alpha=32 ") != std::string::npos);
        CHECK(b.out.find("peft.target_modules=[linear_qkv,linear_proj]") != std::string::npos);
        CHECK(b.out.find("model.disable_parameter_transpose_cache=true") != std::string::npos);
        std::vector<std::string> megatron = plan;
        megatron.insert(megatron.end(), {"--format", "megatron"});
        const test::CliRun mg = test::run_cleave(megatron);
        REQUIRE(mg.code == 0);
        CHECK(mg.out.find("has no PEFT flags") != std::string::npos);
        // The table says what job it searched.
        const test::CliRun t = test::run_cleave(plan);
        REQUIRE(t.code == 0);
        CHECK(t.out.find("# peft: lora dim 16, alpha 32 (scale 2), targets "
                         "linear_qkv,linear_proj: 44.56M trainable") != std::string::npos);
        // DoRA: Bridge's alpha 64 by default, run_recipe.py --mode dora; 44,564,480 + 80 x
        // (10240 + 8192) magnitudes = 46,039,040 trainable.
        std::vector<std::string> dora = plan;
        dora[10] = "dora";
        dora.insert(dora.end(), {"--format", "bridge"});
        const test::CliRun d = test::run_cleave(dora);
        REQUIRE(d.code == 0);
        CHECK(d.out.find("--mode dora") != std::string::npos);
        CHECK(d.out.find("peft.alpha=64 ") != std::string::npos);
        std::vector<std::string> dj = base;
        dj.insert(dj.end(), {"--peft", "dora", "--lora-dim", "16", "--lora-target-modules",
                             "linear_qkv,linear_proj"});
        const test::CliRun dx = test::run_cleave(dj);
        REQUIRE(dx.code == 0);
        const nlohmann::json dd = nlohmann::json::parse(dx.out);
        CHECK(dd["peft"]["method"] == "dora");
        CHECK(dd["peft"]["trainable_params"].get<double>() == doctest::Approx(46039040.0));
        // Same layout, LoRA against DoRA: the rebuilt weights and scaled outputs cost time.
        CHECK(dd["iteration_time_s"].get<double>() > j["iteration_time_s"].get<double>());
    }

    TEST_CASE("peft: MLPerf's Llama 2 70B LoRA rows are LoRA jobs on the stacks they ran") {
        // Framework cells: NeMo in any case; a DeepSpeed cell; a bare container names none
        // (only an MLPerf row maps it, as NVIDIA's NeMo implementation in that container).
        CHECK(stack_for_framework("NVIDIA NEMO") == "megatron-core");
        CHECK(stack_for_framework("NGC Pytorch 24.09, NVIDIA Nemo 24.09") == "megatron-core");
        // HF accelerate + DeepSpeed on transformers' model code (the Juniper rows), not the
        // 2021 Megatron-LM + DeepSpeed stack.
        CHECK(stack_for_framework("NGC PyTorch Release 24.01 Deepspeed N1") == "deepspeed-zero3");
        CHECK(stack_for_framework("PyTorch NVIDIA Release 24.04").empty());
        std::ifstream in(std::string(CLEAVE_TEST_DATA_DIR) + "/tests/data/public_runs_mlperf.csv");
        REQUIRE(in.good());
        std::stringstream ss;
        ss << in.rdbuf();
        const auto cases = parse_public_runs(ss.str(), "public_runs_mlperf.csv");
        std::map<std::string, ClusterSpec> clusters;
        std::vector<std::pair<int64_t, double>> errors;
        int lora = 0;
        int misfits = 0;
        double signed_sum = 0.0;
        for (const auto& c : cases) {
            if (c.model_name.find("LoRA") == std::string::npos) {
                continue;
            }
            ++lora;
            CAPTURE(c.row_id);
            REQUIRE(c.expressible);  // every LoRA row stated
            if (c.row_id == 5109 || c.row_id == 5110) {
                // No config file for 16 or 32 GPUs: Dell's other rows' layout tp 4 cp 2 (64
                // GPUs, config_DGXH100_8x8x1xtp4pp1cp2.sh) is the one of theirs that divides 16
                // GPUs at the log's GA 4 (dp = 8 / (1 x 4) = 2, 2 x 4 x 2 = 16) and 32 at GA 2 (dp
                // 4); their tp 4 cp 1 and tp 2 cp 1 would need 8 and 4 GPUs.
                CHECK(c.plan.tp == 4);
                CHECK(c.plan.cp == 2);
                CHECK(c.plan.pp == 1);
                CHECK(c.plan.dp == (c.row_id == 5109 ? 2 : 4));
                CHECK(c.plan.sp);
                CHECK(c.job.compute == Dtype::fp8);
                CHECK(c.reason.find("layout not published") != std::string::npos);
            }
            CHECK(c.job.peft == Peft::lora);
            CHECK(c.job.lora_dim == 16);
            CHECK(c.job.lora_alpha == 32.0);
            CHECK(c.job.lora_targets == (lora_target::linear_qkv | lora_target::linear_proj));
            CHECK((c.stack == "megatron-core" || c.stack == "deepspeed-zero3"));
            if (!clusters.count(c.profile)) {
                clusters.emplace(c.profile, load_cluster(c.profile));
            }
            PublishedCase k = c;
            load_case_stack(k);  // as cleave published does
            const PublishedResult r = evaluate_published(k, clusters.at(c.profile));
            errors.emplace_back(c.row_id, r.error_pct);
            signed_sum += r.error_pct;
            misfits += r.fits ? 0 : 1;
        }
        CHECK(lora == 49);
        REQUIRE(errors.size() == 49);
        const ErrorSummary e = summarize_errors(errors);
        const double signed_mean = signed_sum / static_cast<double>(errors.size());
        MESSAGE("MLPerf LoRA rows: MAPE " << e.mape_pct << " %, signed " << signed_mean
                                          << " %, worst " << e.worst_pct << " % (row "
                                          << e.worst_row << "), " << misfits << " misfit");
        // Measured: 49 rows MAPE 9.30 %, signed -9.04 %. Juniper's two DeepSpeed rows (5088,
        // 5089) on the stack that ran them (deepspeed-zero3: transformers' code, flash-attn 2,
        // gathers prefetched both ways) are -40.8 / -24.4 %; on deepspeed-zero3-2021 (Megatron's
        // 2021 code, materialised attention, backward gathers stalled: not what ran) they were
        // -16.3 / +34.6 %, the 49 rows 9.00 %, -7.34 % (47 rows 9.02 %, -7.28 % before rows
        // 5109 / 5110 took their submitter's layout); before the launch gaps 9.54 %, -7.99 % with
        // the frozen column-parallel linears' input-gradient reduce-scatters exposed (compute.cpp
        // add_tp; 12.56 %, -11.09 % before; priced as pre-training: 17 rows, 38.2 %, +37.1 %).
        // Issue 48 asks 10 % and +-5 %; the H100 FP8 gap is the kernel issue's (docs/costmodel.md
        // section 9). Held against regressions.
        CHECK(e.mape_pct < 10.0);
        CHECK(signed_mean > -9.5);
        CHECK(signed_mean < 0.0);
        // Every LoRA layout fits at no headroom: the H200 tp 1 cp 2 rows (5116-5118, 5121) were
        // 2.7 GiB over while the frozen linears kept their inputs (memory.cpp).
        CHECK(misfits == 0);
    }

    TEST_CASE("published: a row with no layout takes its submitter's one layout that divides it") {
        // Three rows of one submission (same source_key, model, task). Row 3 has no layout; the
        // log's GA 4 at GBS 8, MBS 1 gives dp = 8 / (1 x 4) = 2, so tp x pp x cp = 16 / 2 = 8:
        // of the siblings' layouts, tp 4 cp 1 (4) and tp 2 cp 4 (8) -> only tp 2 pp 1 cp 4.
        const std::string head =
            "row_id,source_key,model,task,num_layers,hidden_size,num_attention_heads,vocab_size,"
            "seq_length,gpu_type,gpu_memory_gb,gpus_per_node,num_gpus,tp,pp,dp,cp,"
            "sequence_parallel,micro_batch_size,global_batch_size,precision,activation_recompute,"
            "framework,iteration_time_s,notes\n";
        const std::string a = "1,S,M,pretrain,32,4096,32,32000,4096,H100-SXM5,80,8,8,4,1,2,1,yes,1,"
                              "8,BF16,none,NVIDIA NeMo 24.09,1.0,\n";
        const std::string b = "2,S,M,pretrain,32,4096,32,32000,4096,H100-SXM5,80,8,16,2,1,2,4,yes,"
                              "1,8,BF16,none (default),NVIDIA NeMo 24.09,1.0,\n";
        const std::string c = "3,S,M,pretrain,32,4096,32,32000,4096,H100-SXM5,80,8,16,,,,,,,8,,,"
                              "NVIDIA NeMo 24.09,1.0,grad_accum(log)=4.0\n";
        const auto cases = parse_public_runs(head + a + b + c, "s.csv");
        REQUIRE(cases.size() == 3);
        REQUIRE(cases[2].expressible);
        CHECK(cases[2].plan.tp == 2);
        CHECK(cases[2].plan.cp == 4);
        CHECK(cases[2].plan.pp == 1);
        CHECK(cases[2].plan.dp == 2);
        CHECK(cases[2].plan.sp);
        CHECK(cases[2].reason.find("at GA 4 (the log) into dp 2, tp 2 pp 1 cp 4") !=
              std::string::npos);
        // At GA 2 (dp 4, model-parallel 4) only tp 4 cp 1 divides.
        std::string c2 = c;
        c2.replace(c2.find("=4.0"), 4, "=2.0");
        const auto two = parse_public_runs(head + a + b + c2, "s.csv");
        REQUIRE(two[2].expressible);
        CHECK(two[2].plan.tp == 4);
        CHECK(two[2].plan.cp == 1);
        CHECK(two[2].plan.dp == 4);
        // Siblings that disagree on a shared cell (precision) give nothing: not expressed.
        std::string b2 = b;
        b2.replace(b2.find("BF16"), 4, "FP8 ");
        const auto split = parse_public_runs(head + a + b2 + c, "s.csv");
        CHECK_FALSE(split[2].expressible);
        CHECK(split[2].reason.find("plan cannot be expressed") != std::string::npos);
        // No GA from the log: nothing to divide by.
        std::string c3 = c;
        c3.erase(c3.find("grad_accum"));
        c3 += "\n";
        CHECK_FALSE(parse_public_runs(head + a + b + c3, "s.csv")[2].expressible);
    }

}  // TEST_SUITE

}  // namespace cleave
