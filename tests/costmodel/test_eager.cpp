// torchtitan's eager block and op-level SAC's recompute in time (costmodel/eager.hpp): the bytes
// each eager chain moves beyond the fused kernels, repeat_kv's copies, the matmuls SAC runs again,
// and what torch.compile changes in a layer's price. Values worked by hand in the comments.
#include "core/load.hpp"
#include "core/stack.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/eager.hpp"
#include "tests/costmodel/fixtures.hpp"

#include <doctest/doctest.h>

using namespace cleave;

namespace {

/// One micro-batch of 1 x 1024 tokens on one GPU (tp 1, no SP), bf16, under `stack`.
JobSpec job_on(const std::string& stack, bool compiled) {
    JobSpec j;
    j.gpus = 1;
    j.global_batch = 1;
    j.seq_len = 1024;
    j.stack = load_stack(stack);
    j.stack.torch_compile = compiled;
    return j;
}

Plan one() {
    Plan p;
    p.mbs = 1;
    return p;
}

}  // namespace

TEST_SUITE("costmodel") {
    TEST_CASE("eager: torchtitan's uncompiled chains beyond the fused kernels, by hand") {
        const ModelSpec m = test::gqa_1024();
        const EagerTraffic e =
            eager_traffic(m, job_on("torchtitan-fsdp2", false), one(), true, true, false);
        // 1024 tokens, a = 2. repeat_kv: 2a (kv + q) = 4 x 1,280 per token = 5,242,880 B each way.
        // Norms: 2 x 1,048,576 elements, forward (4a + 28) - 2a = 32 B extra: 67,108,864;
        //   backward (8a + 68) - 3a = 78 B: 163,577,856.
        // RoPE: (q + kv) 1,280 x 1024 = 1,310,720 elements, 16 B extra each way: 20,971,520.
        // SwiGLU: f 4,096 x 1024 = 4,194,304 elements, 2a = 4 B forward (16,777,216), 4a = 8 B
        //   backward (33,554,432).
        CHECK(e.fwd_bytes == doctest::Approx(5242880.0 + 67108864.0 + 20971520.0 + 16777216.0));
        CHECK(e.bwd_bytes == doctest::Approx(5242880.0 + 163577856.0 + 20971520.0 + 33554432.0));
        // Launches beyond the fused: repeat 2 / 2, norms 2 x 7 / 2 x 12, RoPE 4 / 4, SwiGLU 1 / 2.
        CHECK(e.fwd_launches == 21.0);
        CHECK(e.bwd_launches == 32.0);

        // Compiled: only repeat_kv's copies stay (SDPA's expanded inputs are materialised).
        const EagerTraffic c =
            eager_traffic(m, job_on("torchtitan-fsdp2", true), one(), true, true, false);
        CHECK(c.fwd_bytes == doctest::Approx(5242880.0));
        CHECK(c.bwd_bytes == doctest::Approx(5242880.0));
        CHECK(c.fwd_launches == 2.0);
        // Megatron's fused kernels: nothing.
        const EagerTraffic mg =
            eager_traffic(m, job_on("megatron-core", false), one(), true, true, false);
        CHECK(mg.fwd_bytes == 0.0);
        CHECK(mg.bwd_launches == 0.0);
        // An MoE layer's routed FFN: its norm is eager, the experts' activation is not derived.
        const EagerTraffic moe =
            eager_traffic(m, job_on("torchtitan-fsdp2", false), one(), false, true, true);
        CHECK(moe.fwd_bytes == doctest::Approx(67108864.0 / 2.0));
    }

    TEST_CASE("eager: HF transformers' Llama under deepspeed-zero3, by hand") {
        const ModelSpec m = test::gqa_1024();
        const JobSpec hf = job_on("deepspeed-zero3", false);
        CHECK(hf.stack.model_code == ModelCode::hf_transformers);
        CHECK(eager_chains(hf));
        const EagerTraffic e = eager_traffic(m, hf, one(), true, true, false);
        // 1024 tokens, a = 2. No repeat_kv (flash-attn 2 takes the kv heads as they are).
        // Norms as torchtitan's: 67,108,864 forward, 163,577,856 backward.
        // RoPE by rotate_half: (q + kv) 1,310,720 elements, (10 - 2) a = 16 B forward:
        //   20,971,520; (8 - 2) a = 12 B backward: 15,728,640.
        // SwiGLU as torchtitan's: 16,777,216 forward, 33,554,432 backward.
        CHECK(e.fwd_bytes == doctest::Approx(67108864.0 + 20971520.0 + 16777216.0));
        CHECK(e.bwd_bytes == doctest::Approx(163577856.0 + 15728640.0 + 33554432.0));
        // Launches beyond the fused: norms 2 x 7 / 2 x 12, RoPE 2 x 4 / 2 x 3, SwiGLU 1 / 2.
        CHECK(e.fwd_launches == 23.0);
        CHECK(e.bwd_launches == 32.0);
        // The 2021 DeepSpeed stack ran Megatron-LM's model code: nothing.
        const JobSpec old = job_on("deepspeed-zero3-2021", false);
        CHECK_FALSE(eager_chains(old));
        CHECK(eager_traffic(m, old, one(), true, true, false).fwd_bytes == 0.0);
    }

    TEST_CASE("eager: op-level SAC runs the 2nd, 4th and 6th matmul again") {
        // small_gqa: wq 1,048,576, wk = wv 262,144, wo 1,048,576, w1 = w3 = w2 4,194,304: all
        // 15,204,352; again wk + wo + w3 = 5,505,024: 0.362068.
        CHECK(op_sac_recomputed_linear_share(test::gqa_1024()) == doctest::Approx(5505024.0 / 15204352.0));
        // Llama 3 8B: wk 4,194,304 + wo 16,777,216 + w3 58,720,256 = 79,691,776 of 218,103,808.
        ModelSpec l = test::gqa_1024();
        l.hidden = 4096;
        l.heads = 32;
        l.kv_heads = 8;
        l.ffn_hidden = 14336;
        CHECK(op_sac_recomputed_linear_share(l) == doctest::Approx(79691776.0 / 218103808.0));
        // GeLU (6 matmuls): k, o and w2 again. h = q = 1024, kv 256, f 4096: wk 262,144 + wo
        // 1,048,576 + w2 4,194,304 = 5,505,024 of 1,048,576 x 2 + 262,144 x 2 + 4,194,304 x 2.
        ModelSpec g = test::gqa_1024();
        g.mlp = MlpKind::gelu;
        CHECK(op_sac_recomputed_linear_share(g) == doctest::Approx(5505024.0 / 11010048.0));
    }

    TEST_CASE("eager: a layer's price under torchtitan, eager against compiled") {
        const ModelSpec m = test::gqa_1024();
        ClusterSpec c = test::dgx_a100();
        Plan p = one();
        p.recompute = Recompute::selective;
        const JobSpec eager = job_on("torchtitan-fsdp2", false);
        const JobSpec compiled = job_on("torchtitan-fsdp2", true);
        const LayerTraffic te = layer_traffic(m, eager, p, false);
        const LayerTraffic tc = layer_traffic(m, compiled, p, false);
        // The eager chains land in the elementwise class: 110,100,480 - 5,242,880 forward more.
        CHECK((te.fwd_by_class.elementwise - tc.fwd_by_class.elementwise).value() ==
              doctest::Approx(110100480.0 - 5242880.0));
        CHECK(te.eager_bwd.value() == doctest::Approx(223346688.0));
        CHECK(te.fwd_launches.elementwise - tc.fwd_launches.elementwise == 19.0);
        const PlanLinks links = plan_links(c, p);
        const LayerCost le = layer_cost(m, c, eager, p, links, false);
        const LayerCost lc = layer_cost(m, c, compiled, p, links, false);
        // Same GEMMs and attention; eager's forward is longer by the extra bytes at the A100's
        // 2039 GB/s x 0.8 (or its launches' floor): 104,857,600 B / 1,631.2 GB/s = 64.3 us.
        CHECK(le.gemm.value() == doctest::Approx(lc.gemm.value()));
        CHECK((le.fwd - lc.fwd).value() == doctest::Approx(104857600.0 / (2039e9 * 0.8)).epsilon(0.02));
        // SAC's recompute: compiled the matmuls alone (36.2 % of the forward GEMMs here), eager
        // those and the whole forward's memory-bound kernels again.
        CHECK(le.recompute.value() > lc.recompute.value());
        CHECK((le.recompute - lc.recompute).value() ==
              doctest::Approx(memory_time(c.gpu, norm_timed(te.fwd_by_class, te.norm_fwd_factor),
                                          te.fwd_launches)
                                  .value()));
    }
}
