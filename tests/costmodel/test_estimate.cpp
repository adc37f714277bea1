#include "costmodel/estimate.hpp"
#include "costmodel/flops.hpp"
#include "costmodel/risks.hpp"
#include "tests/costmodel/fixtures.hpp"

#include <doctest/doctest.h>

using namespace cleave;

namespace {

// GPT-3 175B as in Korthikanti et al. 2022 Table 3: 64 GPUs, TP 8, PP 8, interleaved v=3,
// micro-batch 1, global batch 64, SP + selective recompute.
Plan kor_175b() {
    Plan p = test::plan(1, 8, 8);
    p.schedule = Schedule::interleaved;
    p.vpp = 3;
    p.sp = true;
    p.recompute = Recompute::selective;
    return p;
}

}  // namespace

TEST_SUITE("costmodel") {
    TEST_CASE("estimate: pure and the time breakdown adds up to the iteration") {
        const ModelSpec m = test::gpt3();
        const JobSpec j = test::job(64, 64);
        const Estimate a = estimate(m, test::dgx_a100(), j, kor_175b());
        const Estimate b = estimate(m, test::dgx_a100(), j, kor_175b());
        CHECK(a == b);
        const TimeBreakdown& t = a.time;
        const Seconds sum = t.compute + t.tp_comm + t.cp_comm + t.ep_comm + t.pp_comm + t.bubble +
                            t.dp_comm + t.optimizer;
        CHECK(sum.value() == doctest::Approx(a.iteration_time.value()).epsilon(1e-9));
        CHECK(a.microbatches == 64);
        // bubble (p-1)/(v m + p-1) = 7/199
        CHECK(a.bubble_ratio == doctest::Approx(7.0 / 199.0).epsilon(1e-12));
    }

    TEST_CASE("estimate: throughput and MFU and HFU follow from the iteration time") {
        const ModelSpec m = test::gpt3();
        const JobSpec j = test::job(64, 64);
        const Estimate e = estimate(m, test::dgx_a100(), j, kor_175b());
        const double t = e.iteration_time.value();
        // tokens/s = B s / t; MFU = model FLOPs / (t N peak)
        CHECK(e.tokens_per_s == doctest::Approx(64.0 * 2048 / t).epsilon(1e-12));
        CHECK(e.mfu ==
              doctest::Approx(model_flops(m, j).value() / (t * 64 * 312e12)).epsilon(1e-12));
        CHECK(e.tflops_per_gpu == doctest::Approx(e.mfu * 312).epsilon(1e-12));
        // HFU / MFU = (1 + s/3h + V/12Lh) / (1 + s/6h + V/12Lh)
        //           = (1 + 0.0555556 + 0.0036169) / (1 + 0.0277778 + 0.0036169) = 1.026938
        const double v = 51200.0 / (12.0 * 96 * 12288);
        CHECK(e.hfu / e.mfu ==
              doctest::Approx((1 + 2048.0 / (3 * 12288) + v) / (1 + 2048.0 / (6 * 12288) + v))
                  .epsilon(1e-12));
    }

    TEST_CASE("estimate: TP bytes per GPU per iteration with and without SP") {
        const ModelSpec m = test::gpt3();
        const JobSpec j = test::job(8, 1);
        Plan p = test::plan(1, 8, 1);
        p.recompute = Recompute::none;
        const Estimate e = estimate(m, test::dgx_a100(), j, p);
        // per layer 4 all-reduces of S = 2048 x 12288 x 2 B, each sending 2(n-1)/n S = 1.75 S;
        // 96 layers; the output layer adds one all-reduce of S (backward) and three of 2048 x 4 B.
        const double s = 2048.0 * 12288 * 2;
        const double want = 96 * 4 * 1.75 * s + 1.75 * s + 3 * 1.75 * 2048 * 4 + 1.75 * s;
        // (+ the embedding's forward all-reduce of S)
        CHECK(e.comm_bytes_per_gpu.tp.value() == doctest::Approx(want).epsilon(1e-12));
        CHECK(e.comm_bytes_per_gpu.pp.value() == 0.0);
        CHECK(e.comm_bytes_per_gpu.dp.value() == 0.0);
    }

    TEST_CASE("estimate: DP all-reduce bytes are 2(N-1)/N of the grads") {
        const ModelSpec m = test::seed13b();
        const JobSpec j = test::job(32, 128);
        Plan p = test::plan(4, 8, 1, 1);
        p.recompute = Recompute::full;
        const Estimate e = estimate(m, test::dgx_a100(), j, p);
        // fp32 grads of params_total/8 parameters, all-reduced over 4 ranks: x 2 x 3/4
        const double grads = 4.0 * static_cast<double>(params_total(m)) / 8;
        CHECK(e.comm_bytes_per_gpu.dp.value() == doctest::Approx(1.5 * grads).epsilon(1e-12));
    }

    TEST_CASE("risks: a sane plan raises none") {
        const Estimate e = estimate(test::gpt3(), test::dgx_a100(), test::job(64, 64), kor_175b());
        CHECK(e.fits);
        CHECK(e.risk_mask == 0u);
        CHECK(describe_risks(test::gpt3(), test::dgx_a100(), test::job(64, 64), kor_175b(), e)
                  .empty());
    }

    TEST_CASE("risks: TP across nodes and TP over PCIe") {
        const ModelSpec m = test::gpt3();
        Plan p = test::plan(1, 16, 1);
        p.recompute = Recompute::full;
        const Estimate e = estimate(m, test::dgx_a100(), test::job(16, 16), p);
        CHECK(e.has(RiskKind::tp_cross_node));
        CHECK_FALSE(e.has(RiskKind::tp_over_pcie));
        Plan q = test::plan(4, 2, 1);
        q.recompute = Recompute::full;
        q.zero = 3;
        const Estimate pcie = estimate(test::seed13b(), test::pcie_1gbe(), test::job(8, 8), q);
        CHECK(pcie.has(RiskKind::tp_over_pcie));
        CHECK_FALSE(pcie.has(RiskKind::tp_cross_node));
        const Estimate nv = estimate(test::seed13b(), test::dgx_a100(), test::job(8, 8), q);
        CHECK_FALSE(nv.has(RiskKind::tp_over_pcie));
    }

    TEST_CASE("risks: few micro-batches and large bubble, and the PP / DP communicator is a note") {
        const ModelSpec m = test::seed13b();
        // the seed's second try: 8 stages of 4 layers x 4-way DP, m = 16/(1 x 4) = 4 < p = 8
        Plan p = test::plan(4, 1, 8);
        const Estimate e = estimate(m, test::dgx_a100(), test::job(32, 16), p);
        CHECK(e.microbatches == 4);
        CHECK(e.bubble_ratio == doctest::Approx(7.0 / 11.0));
        CHECK(e.has(RiskKind::few_microbatches));
        CHECK(e.has(RiskKind::large_bubble));
        // cleave's own launchers split PP and DP groups: no risk on every PP x DP plan (issue
        // 27), but a note with the seed's deadlock advice.
        CHECK_FALSE(e.has(RiskKind::shared_communicator));
        const auto notes = plan_notes(p);
        REQUIRE(notes.size() == 1);
        CHECK(notes[0].find("pp=8 and dp=4") != std::string::npos);
        CHECK(notes[0].find("new_group()") != std::string::npos);
        // m = 64: bubble 7/71 = 9.9 %, no m < p
        const Estimate big = estimate(m, test::dgx_a100(), test::job(32, 256), p);
        CHECK_FALSE(big.has(RiskKind::few_microbatches));
        CHECK_FALSE(big.has(RiskKind::large_bubble));
        // no DP, or no PP: no note
        CHECK(plan_notes(test::plan(1, 1, 8)).empty());
        CHECK(plan_notes(test::plan(8, 1, 1)).empty());
        const auto risks = describe_risks(m, test::dgx_a100(), test::job(32, 16), p, e);
        REQUIRE(risks.size() == 2);
        CHECK(risks[0].kind == RiskKind::few_microbatches);
        CHECK(risks[1].kind == RiskKind::large_bubble);
    }

    TEST_CASE("risks: gigabit Ethernet makes the DP step slow enough to trip NCCL's watchdog") {
        const ModelSpec m = test::seed13b();
        Plan p = test::plan(4, 4, 2);
        p.recompute = Recompute::full;
        // DP members 4 ranks apart: 2 per node, 2 x 0.0148 GB/s; fp32 grads of ~1.6e9 params
        // per GPU (6.5 GB) all-reduced: 6.5e9 x 1.5 / 0.0297e9 ~ 330 s > 300 s
        const Estimate slow = estimate(m, test::pcie_1gbe(), test::job(32, 128), p);
        CHECK(slow.has(RiskKind::nccl_timeout));
        CHECK(slow.has(RiskKind::slow_network));
        CHECK(slow.longest_collective.value() > 300.0);
        const Estimate fast = estimate(m, test::dgx_a100(), test::job(32, 128), p);
        CHECK_FALSE(fast.has(RiskKind::nccl_timeout));
        CHECK_FALSE(fast.has(RiskKind::slow_network));
        const auto risks = describe_risks(m, test::pcie_1gbe(), test::job(32, 128), p, slow);
        CHECK(risks.front().kind == RiskKind::nccl_timeout);
        CHECK(risks.front().message.find("ethernet-1g") != std::string::npos);
    }

    TEST_CASE("risks: OOM names the stage and the excess") {
        const ModelSpec m = test::gpt3();
        const Estimate e = estimate(m, test::dgx_a100(), test::job(8, 8), test::plan(1, 8, 1));
        CHECK_FALSE(e.fits);
        const auto risks =
            describe_risks(m, test::dgx_a100(), test::job(8, 8), test::plan(1, 8, 1), e);
        REQUIRE_FALSE(risks.empty());
        CHECK(risks.front().kind == RiskKind::oom);
        CHECK(risks.front().message.find("stage 0 of 1") != std::string::npos);
    }
}
