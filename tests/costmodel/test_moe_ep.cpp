// Expert parallelism on the real topology (issue 16 items 2-3): the all-to-all per link, the
// expert grid (etp x ep x edp), the dispatchers, capacity and imbalance. Every figure by hand.
#include "core/calibration.hpp"
#include "core/stack.hpp"
#include "costmodel/collectives.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/estimate.hpp"
#include "costmodel/memory.hpp"
#include "costmodel/risks.hpp"
#include "tests/cli_run.hpp"
#include "tests/costmodel/fixtures.hpp"

#include <cmath>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace cleave;

namespace {

/// 16 experts top-2, h 4096, expert f 14336, 8 layers (Mixtral-like, small).
ModelSpec moe16() {
    ModelSpec m = test::gpt3();
    m.name = "moe16";
    m.layers = 8;
    m.hidden = 4096;
    m.heads = 32;
    m.kv_heads = 8;
    m.ffn_hidden = 14336;
    m.mlp = MlpKind::swiglu;
    m.linear_bias = false;
    m.vocab = 32000;
    m.seq_len = 4096;
    m.moe.experts = 16;
    m.moe.top_k = 2;
    m.moe.expert_ffn_hidden = 14336;
    return m;
}

/// The A100 fixture as an NVL72 rack: 4-GPU hosts, 72 GPUs per NVLink domain.
ClusterSpec nvl72() {
    ClusterSpec c = test::dgx_a100();
    c.node.gpus_per_node = 4;
    c.node.nvlink_domain_gpus = 72;
    return c;
}

Plan ep_plan(int64_t dp, int64_t tp, int64_t ep, int64_t etp = 0) {
    Plan p = test::plan(dp, tp, 1);
    p.ep = ep;
    p.etp = etp;
    p.sp = tp > 1;
    return p;
}

/// moe16's job with fp8 (tensorwise) GEMMs.
JobSpec fp8_job() {
    JobSpec j = test::job(16, 64, 4096);
    j.compute = Dtype::fp8;
    j.fp8_recipe = Fp8Recipe::tensorwise;
    return j;
}

/// On an uncalibrated H100 (no overhead), EP 4 = 4 local experts of moe16; with 300 us per
/// local expert the MoE layer gains 4 x 300 = 1200 us: 400 forward, 800 backward, the all-to-all
/// unchanged.
void check_1200us_exposed(const JobSpec& j) {
    const ModelSpec m = moe16();
    ClusterSpec c = load_cluster_uncalibrated("dgx-h100");
    const Plan p = ep_plan(16, 1, 4);
    const LayerCost bare = layer_cost(m, c, j, p, plan_links(c, p), true);
    CHECK(bare.expert_overhead.value() == 0.0);
    c.node.quantised_expert_overhead = seconds(300e-6);
    const LayerCost q = layer_cost(m, c, j, p, plan_links(c, p), true);
    CHECK(q.fwd.value() - bare.fwd.value() == doctest::Approx(400e-6));
    CHECK(q.bwd.value() - bare.bwd.value() == doctest::Approx(800e-6));
    CHECK(q.expert_overhead.value() == doctest::Approx(1200e-6));
    CHECK(q.ep_fwd == bare.ep_fwd);
}

}  // namespace

TEST_SUITE("costmodel") {
    TEST_CASE("moe: EP 16 over two 8-GPU nodes sends 8/16 of its bytes through the NIC") {
        const ClusterSpec c = test::dgx_a100();
        // EP ranks sit etp = 1 apart: 8 of the 16 in this GPU's host.
        const AllToAllLinks l = all_to_all_links(c, 16, 1);
        CHECK(l.n == 16);
        CHECK(l.r == 8);
        // 16 MB dispatched: NVLink 16e6 * 7/16 = 7e6, NIC 16e6 * 8/16 = 8e6 bytes.
        // t = max(7e6 / 234.89e9 = 29.80 us, 8e6 / 24e9 = 333.33 us) + 10.8 us = 344.13 us.
        const AllToAllCost a = all_to_all_cost(l, bytes(16e6));
        CHECK(a.nvlink.value() == doctest::Approx(7e6));
        CHECK(a.nic.value() == doctest::Approx(8e6));
        CHECK(a.time.value() == doctest::Approx(344.133e-6).epsilon(1e-4));
        // r x NIC = 8 x 24 = 192 <= 234.89 GB/s NVLink: the NIC side binds.
        CHECK(a.nic / l.nic_bw > a.nvlink / l.nvlink_bw);
    }

    TEST_CASE("moe: EP 64 inside one NVL72 domain stays on NVLink") {
        const ClusterSpec c = nvl72();
        const AllToAllLinks l = all_to_all_links(c, 64, 1);
        CHECK(l.r == 64);
        // 64 MB: NVLink 64e6 * 63/64 = 63e6 bytes, NIC 0; t = 63e6 / 234.89e9 + 2.41 us
        // = 268.21 + 2.41 = 270.62 us.
        const AllToAllCost a = all_to_all_cost(l, bytes(64e6));
        CHECK(a.nic.value() == 0.0);
        CHECK(a.nvlink.value() == doctest::Approx(63e6));
        CHECK(a.time.value() == doctest::Approx(270.62e-6).epsilon(1e-4));
        // The same EP 64 on 8-GPU hosts: 56/64 through the NIC.
        const AllToAllCost dgx =
            all_to_all_cost(all_to_all_links(test::dgx_a100(), 64, 1), bytes(64e6));
        CHECK(dgx.nic.value() == doctest::Approx(56e6));
    }

    TEST_CASE("moe: a layer's EP bytes per link, alltoall vs deepep vs allgather") {
        const ModelSpec m = moe16();
        const ClusterSpec c = test::dgx_a100();
        JobSpec j = test::job(16, 64, 4096);
        const Plan p = ep_plan(16, 1, 16);
        // Dispatched per GPU: 4096 tokens x top-2 x 4096 x 2 B = 67,108,864 B (S).
        // Forward dispatch + combine, backward the same: 4 all-to-alls.
        // NIC: 4 x S x 8/16 = 134,217,728; NVLink: 4 x S x 7/16 = 117,440,512.
        const LayerCost a = layer_cost(m, c, j, p, plan_links(c, p), true);
        CHECK(a.ep_nic_bytes.value() == doctest::Approx(134217728.0));
        CHECK(a.ep_nvlink_bytes.value() == doctest::Approx(117440512.0));
        // One all-to-all: max(S 7/16 / 234.89e9, S/2 / 24e9) + 10.8 us = 1398.1 + 10.8 us;
        // forward 2 of them = 2.8178 ms.
        CHECK(a.ep_fwd.value() == doctest::Approx(2.0 * (33554432.0 / 24e9 + 10.8e-6)));
        // DeepEP: 2 domains, top-2: E[domains hit] = 2 (1 - 0.5^2) = 1.5, half of them remote:
        // 0.75 NIC copies per token vs 2 x 8/16 = 1: NIC bytes x 0.75 = 100,663,296.
        j.stack.moe_dispatcher = MoeDispatcher::deepep;
        const LayerCost dd = layer_cost(m, c, j, p, plan_links(c, p), true);
        CHECK(dd.ep_nic_bytes.value() == doctest::Approx(100663296.0));
        CHECK(dd.ep_fwd < a.ep_fwd);
        // Allgather: every token (not top-k copies) gathered over ep x etp = 16 ranks:
        // S_ag = 4096 x 4096 x 2 B x 16 = 536,870,912; sent (15/16) S_ag = 503,316,480 per
        // gather, 4 per layer (AG + RS forward, backward the same) = 2,013,265,920, all on the
        // network (the group spans 2 hosts).
        j.stack.moe_dispatcher = MoeDispatcher::allgather;
        const LayerCost ag = layer_cost(m, c, j, p, plan_links(c, p), true);
        CHECK(ag.ep_bytes.value() == doctest::Approx(2013265920.0));
        CHECK(ag.ep_nic_bytes.value() == doctest::Approx(2013265920.0));
    }

    TEST_CASE("moe: a2a_overlap hides the all-to-all behind the other micro-batch's compute") {
        const ModelSpec m = moe16();
        const ClusterSpec c = test::dgx_a100();
        JobSpec j = test::job(16, 64, 4096);
        const Plan p = ep_plan(16, 1, 16);
        const LayerCost bare = layer_cost(m, c, j, p, plan_links(c, p), true);
        j.stack.moe_a2a_overlap = true;
        const LayerCost hid = layer_cost(m, c, j, p, plan_links(c, p), true);
        // Exposed forward = max(0, 2 a2a - the layer's backward compute).
        CHECK(hid.ep_fwd.value() ==
              doctest::Approx(std::max(0.0, bare.ep_fwd.value() - bare.bwd.value())));
        CHECK(hid.ep_bwd.value() ==
              doctest::Approx(std::max(0.0, bare.ep_bwd.value() - bare.fwd.value())));
        CHECK(hid.ep_bytes == bare.ep_bytes);  // the bytes still move
    }

    TEST_CASE("moe: each EP all-to-all charges the rank-sync wait, 3 forward and 2 backward") {
        // A calibrated CPU profile's sync_wait (here 2 ms) is charged per all-to-all, as per TP
        // collective: forward 3 x 2 = 6 ms more (counts, dispatch, combine), backward 2 x 2 = 4 ms;
        // full recomputation repeats the forward's: backward 4 + 6 = 10 ms more.
        const ModelSpec m = moe16();
        ClusterSpec c = test::dgx_a100();
        const JobSpec j = test::job(16, 64, 4096);
        Plan p = ep_plan(16, 1, 16);
        const LayerCost bare = layer_cost(m, c, j, p, plan_links(c, p), true);
        c.node.sync_wait = seconds(2e-3);
        const LayerCost waited = layer_cost(m, c, j, p, plan_links(c, p), true);
        CHECK(waited.ep_fwd.value() - bare.ep_fwd.value() == doctest::Approx(6e-3));
        CHECK(waited.ep_bwd.value() - bare.ep_bwd.value() == doctest::Approx(4e-3));
        CHECK(waited.ep_bytes == bare.ep_bytes);
        p.recompute = Recompute::full;
        c.node.sync_wait = Seconds{};
        const LayerCost full_bare = layer_cost(m, c, j, p, plan_links(c, p), true);
        c.node.sync_wait = seconds(2e-3);
        const LayerCost full = layer_cost(m, c, j, p, plan_links(c, p), true);
        CHECK(full.ep_bwd.value() - full_bare.ep_bwd.value() == doctest::Approx(10e-3));
    }

    TEST_CASE("moe: the sync-wait share is charged by EP only where TP does not cut the layer") {
        // Fraction 0.1 on EP 16, TP 1: ep_fwd + 0.1 fwd, ep_bwd + 0.1 bwd (the layer's compute,
        // unchanged). With TP 2 the TP collectives carry it (add_tp) and EP adds nothing more.
        const ModelSpec m = moe16();
        ClusterSpec c = test::dgx_a100();
        const JobSpec j = test::job(16, 64, 4096);
        const Plan p = ep_plan(16, 1, 16);
        const LayerCost bare = layer_cost(m, c, j, p, plan_links(c, p), true);
        c.node.sync_wait_fraction = 0.1;
        const LayerCost waited = layer_cost(m, c, j, p, plan_links(c, p), true);
        CHECK(waited.fwd == bare.fwd);
        CHECK((waited.ep_fwd - bare.ep_fwd).value() ==
              doctest::Approx(0.1 * bare.fwd.value()).epsilon(1e-9));
        CHECK((waited.ep_bwd - bare.ep_bwd).value() ==
              doctest::Approx(0.1 * bare.bwd.value()).epsilon(1e-9));
        const Plan tp2 = ep_plan(8, 2, 8);  // 8 x 2 = 16 GPUs, experts over 8 of the DP ranks
        const ClusterSpec c0 = test::dgx_a100();
        const LayerCost t_bare = layer_cost(m, c0, j, tp2, plan_links(c0, tp2), true);
        const LayerCost t_wait = layer_cost(m, c, j, tp2, plan_links(c, tp2), true);
        CHECK(t_wait.ep_fwd == t_bare.ep_fwd);
        CHECK(t_wait.ep_bwd == t_bare.ep_bwd);
        CHECK((t_wait.tp_fwd - t_bare.tp_fwd).value() ==
              doctest::Approx(0.1 * t_bare.fwd.value()).epsilon(1e-9));
    }

    TEST_CASE("moe: quantised expert GEMMs pay the fixed cost per local expert, 1/3 fwd 2/3 bwd") {
        // moe16 on EP 16 has 16 / 16 = 1 local expert; EP 4 has 16 / 4 = 4. With an overhead of
        // 300 us per local expert per layer per micro-batch: EP 4 under fp8 adds 4 x 300 = 1200
        // us, forward 1200 / 3 = 400 us, backward 800 us; EP 16 adds 300 (100 + 200). BF16 expert
        // GEMMs add nothing. Full recomputation repeats the forward's share: +400 us in recompute.
        const ModelSpec m = moe16();
        ClusterSpec c = load_cluster_uncalibrated("dgx-h100");  // an fp8 GPU, no overlay
        const JobSpec j = fp8_job();
        check_1200us_exposed(j);
        c.node.quantised_expert_overhead = seconds(300e-6);
        Plan p = ep_plan(16, 1, 16);
        CHECK(layer_cost(m, c, j, p, plan_links(c, p), true).expert_overhead.value() ==
              doctest::Approx(300e-6));
        p = ep_plan(16, 1, 4);
        JobSpec b = j;
        b.compute = Dtype::bf16;
        CHECK(layer_cost(m, c, b, p, plan_links(c, p), true).expert_overhead.value() == 0.0);
        CHECK(layer_cost(m, c, j, p, plan_links(c, p), false).expert_overhead.value() == 0.0);
        p.recompute = Recompute::full;
        const LayerCost full = layer_cost(m, c, j, p, plan_links(c, p), true);
        CHECK(full.expert_overhead.value() == doctest::Approx(1600e-6));
    }

    TEST_CASE("moe: a2a overlap hides the all-to-all but not the per-expert fixed cost") {
        // Both micro-batches of the combined 1F1B are issued by one host thread: the 1200 us of
        // 4 local experts x 300 us stay exposed (400 fwd + 800 bwd) while the all-to-all hides.
        JobSpec j = fp8_job();
        j.stack.moe_a2a_overlap = true;
        check_1200us_exposed(j);
    }

    TEST_CASE("moe: the fixed per-expert cost is flagged from a quarter of the step") {
        // Qwen3-30B-A3B MXFP8 on 8 DGX B200 GPUs, EP 8 (16 local experts), mbs 1, 64
        // micro-batches, release 25.11: 48 layers x 64 x 16 x 405 us (the dgx-b200 overlay's
        // 25.11 value) = 19.91 s of a 28.2 s step, 71 %: flagged. In BF16 there is no such cost
        // and no flag. The stack's own release (26.04) takes the overlay's 26.02 entry, 265 us:
        // 48 x 64 x 16 x 265 us = 13.02 s.
        const std::string qwen =
            std::string(CLEAVE_TEST_DATA_DIR) + "/examples/hf/qwen3-30b-a3b.config.json";
        const test::CliRun r = test::run_cleave(
            {"explain", qwen,      "dgx-b200", "--gpus", "8",     "--gbs",    "512",
             "--seq",   "4096",    "--ep",     "8",      "--etp", "1",        "--mbs",
             "1",       "--dtype", "mxfp8",    "--zero", "1",     "--format", "json",
             "--release", "25.11"});
        REQUIRE(r.code == 0);
        const auto j = nlohmann::json::parse(r.out);
        CHECK(j["expert_overhead_s"].get<double>() == doctest::Approx(48.0 * 64 * 16 * 405e-6));
        const test::CliRun now = test::run_cleave(
            {"explain", qwen,      "dgx-b200", "--gpus", "8",     "--gbs",    "512",
             "--seq",   "4096",    "--ep",     "8",      "--etp", "1",        "--mbs",
             "1",       "--dtype", "mxfp8",    "--zero", "1",     "--format", "json"});
        REQUIRE(now.code == 0);
        CHECK(nlohmann::json::parse(now.out)["expert_overhead_s"].get<double>() ==
              doctest::Approx(48.0 * 64 * 16 * 265e-6));
        bool flagged = false;
        for (const auto& risk : j["risks"]) {
            flagged = flagged || risk["kind"] == "moe_fixed_cost";
        }
        CHECK(flagged);
        const test::CliRun b = test::run_cleave({"explain",
                                                 qwen,
                                                 "dgx-b200",
                                                 "--gpus",
                                                 "8",
                                                 "--gbs",
                                                 "512",
                                                 "--seq",
                                                 "4096",
                                                 "--ep",
                                                 "8",
                                                 "--etp",
                                                 "1",
                                                 "--mbs",
                                                 "1",
                                                 "--zero",
                                                 "1",
                                                 "--format",
                                                 "json"});
        REQUIRE(b.code == 0);
        const auto jb = nlohmann::json::parse(b.out);
        CHECK_FALSE(jb.contains("expert_overhead_s"));
        CHECK(b.out.find("moe_fixed_cost") == std::string::npos);
    }

    TEST_CASE("moe: explain and plan say where the prediction is known to be optimistic") {
        // GPT-OSS (attention sinks): published runs 23-55 % slower than predicted -> a caution.
        // Qwen3-30B-A3B in fp8 on dgx-h200 (no overlay sets the per-expert cost) -> a caution;
        // on dgx-h100 (overlay fitted to fp8-tensorwise rows) none under tensorwise, one under
        // delayed scaling (the value is a guess there); bf16 -> none.
        const std::string dir = std::string(CLEAVE_TEST_DATA_DIR) + "/examples/hf/";
        const auto explain =
            [&](const std::string& model, const char* hw, const char* dtype, const char* recipe) {
                std::vector<std::string> args = {"explain",
                                                 dir + model,
                                                 hw,
                                                 "--gpus",
                                                 "8",
                                                 "--gbs",
                                                 "64",
                                                 "--seq",
                                                 "4096",
                                                 "--ep",
                                                 "8",
                                                 "--dtype",
                                                 dtype,
                                                 "--zero",
                                                 "1",
                                                 "--format",
                                                 "json"};
                if (recipe != nullptr) {
                    args.insert(args.end(), {"--fp8-recipe", recipe});
                }
                const test::CliRun r = test::run_cleave(args);
                REQUIRE(r.code == 0);
                const auto j = nlohmann::json::parse(r.out);
                // Every Hopper plan carries the Hopper caution (test_explain checks it): the
                // ones this test is about are the others.
                nlohmann::json out = nlohmann::json::array();
                for (const auto& c : j.value("cautions", nlohmann::json::array())) {
                    if (c.get<std::string>().rfind("Hopper:", 0) != 0) {
                        out.push_back(c);
                    }
                }
                return out;
            };
        const auto has = [](const nlohmann::json& c, const char* text) {
            return c.size() == 1 && c[0].get<std::string>().find(text) != std::string::npos;
        };
        CHECK(has(explain("gpt-oss-20b.config.json", "dgx-h100", "bf16", nullptr),
                  "learnable sinks"));
        CHECK(has(explain("qwen3-30b-a3b.config.json", "dgx-h200", "fp8", "tensorwise"),
                  "not priced on this profile"));
        CHECK(explain("qwen3-30b-a3b.config.json", "dgx-h100", "fp8", "tensorwise").empty());
        CHECK(has(explain("qwen3-30b-a3b.config.json", "dgx-h100", "fp8", "delayed"),
                  "fitted to fp8-tensorwise runs; this job runs fp8-delayed"));
        CHECK(explain("qwen3-30b-a3b.config.json", "dgx-h200", "bf16", nullptr).empty());
        const test::CliRun p = test::run_cleave({"plan",
                                                 dir + "gpt-oss-20b.config.json",
                                                 "dgx-h100",
                                                 "--gpus",
                                                 "8",
                                                 "--gbs",
                                                 "64",
                                                 "--top",
                                                 "1"});
        REQUIRE(p.code == 0);
        CHECK(p.out.find("# caution: attention with learnable sinks") != std::string::npos);
    }

    TEST_CASE("moe: padded to capacity, every expert is full and the host runs ahead") {
        // moe16 (16 experts, top-2), one micro-batch of 4096 tokens per GPU, EP 4: 4 local
        // experts of 4096 x 2 / 4 = 2048 rows each. Capacity 1.25 padded: every expert 2560
        // rows, the rank 1.25 x the average; unpadded: the others at 2048, the rank at 1.
        const ModelSpec m = moe16();
        JobSpec j = fp8_job();
        const Plan p = ep_plan(16, 1, 4);
        j.moe_capacity = 1.25;
        CHECK(expert_gemms(m, j, p).avg_in.m == doctest::Approx(2048.0));
        CHECK(rank_load_ratio(m, j, p) == doctest::Approx(1.0));
        j.moe_pad = true;
        CHECK(expert_gemms(m, j, p).avg_in.m == doctest::Approx(2560.0));
        CHECK(expert_gemms(m, j, p).hot_in.m == doctest::Approx(2560.0));
        CHECK(rank_load_ratio(m, j, p) == doctest::Approx(1.25));
        // No host wait: 4 x 300 us (400 fwd, 800 bwd) hides behind a layer's GPU time; 4 x 1 s
        // exposes what outlasts it: 4/3 s - fwd GPU time + 8/3 s - bwd GPU time.
        ClusterSpec c = load_cluster_uncalibrated("dgx-h100");
        const LayerCost bare = layer_cost(m, c, j, p, plan_links(c, p), true);
        const Seconds gf = bare.fwd + bare.tp_fwd + bare.cp_fwd + bare.ep_fwd;
        const Seconds gb = bare.bwd + bare.recompute + bare.tp_bwd + bare.cp_bwd + bare.ep_bwd;
        REQUIRE(gf.value() > 400e-6);
        REQUIRE(gb.value() > 800e-6);
        c.node.quantised_expert_overhead = seconds(300e-6);
        CHECK(layer_cost(m, c, j, p, plan_links(c, p), true).expert_overhead.value() == 0.0);
        c.node.quantised_expert_overhead = seconds(1.0);
        CHECK(layer_cost(m, c, j, p, plan_links(c, p), true).expert_overhead.value() ==
              doctest::Approx(4.0 / 3.0 - gf.value() + 8.0 / 3.0 - gb.value()));
    }

    TEST_CASE("moe: expert GEMMs split by etp, not tp (parallel folding)") {
        const ModelSpec m = moe16();
        const JobSpec j = test::job(16, 64, 4096);
        // tp 2, ep 8, etp unset (= tp 2): 2 local experts; rows per expert =
        // 4096 tokens / tp 2 x top-2 x etp 2 / 2 local = 4096; N = 2 x 14336 / 2 = 14336.
        const ExpertGemms a = expert_gemms(m, j, ep_plan(8, 2, 8));
        CHECK(a.avg_in.m == doctest::Approx(4096.0));
        CHECK(a.avg_in.n == doctest::Approx(14336.0));
        CHECK(a.others == doctest::Approx(1.0));
        // etp 1: rows 4096 / 2 x 2 x 1 / 2 = 2048; N = 2 x 14336 = 28672 (whole expert).
        const ExpertGemms b = expert_gemms(m, j, ep_plan(8, 2, 8, 1));
        CHECK(b.avg_in.m == doctest::Approx(2048.0));
        CHECK(b.avg_in.n == doctest::Approx(28672.0));
        // Same FLOPs per GPU either way: 4096 x 14336 = 2048 x 28672.
        CHECK(gemm_flops(a.avg_in).value() == doctest::Approx(gemm_flops(b.avg_in).value()));
        // Expert DP: tp 2 x dp 8 = 16 ranks over etp x ep: 16 / (2 x 8) = 1; 16 / (1 x 8) = 2.
        CHECK(expert_dp(ep_plan(8, 2, 8)) == 1);
        CHECK(expert_dp(ep_plan(8, 2, 8, 1)) == 2);
        // The expert grid's links: EP stride etp, expert DP stride etp x ep.
        const PlanLinks l = plan_links(test::dgx_a100(), ep_plan(8, 2, 8, 1));
        CHECK(l.ep_a2a.n == 8);
        CHECK(l.ep_a2a.r == 8);  // stride 1: all 8 in one host
        CHECK(plan_links(test::dgx_a100(), ep_plan(8, 2, 8)).ep_a2a.r ==
              4);  // stride 2: 4 per host
    }

    TEST_CASE("moe: an MoE layer's MLP block has no dense-TP collectives, its dispatcher moves") {
        const ModelSpec m = moe16();
        const ClusterSpec c = test::dgx_a100();
        const JobSpec j = test::job(16, 64, 4096);
        // tp 2 + SP, etp 1, ep 8: only the attention block's all-gather + reduce-scatter:
        // half the dense layer's TP bytes; the experts' tokens move by the EP all-to-all alone.
        const Plan p = ep_plan(8, 2, 8, 1);
        const LayerCost dense = layer_cost(m, c, j, p, plan_links(c, p), false);
        const LayerCost moe = layer_cost(m, c, j, p, plan_links(c, p), true);
        CHECK(moe.tp_bytes.value() == doctest::Approx(dense.tp_bytes.value() / 2.0));
        // Dispatched per GPU: 4096 / tp 2 tokens x 2 x 4096 x 2 B = 33,554,432 B; EP 8 in
        // one host: 4 all-to-alls x 7/8 of it = 117,440,512 B, all NVLink.
        CHECK(moe.ep_bytes.value() == doctest::Approx(117440512.0));
        CHECK(moe.ep_nic_bytes.value() == 0.0);
        // etp = tp 2: the received copies are all-gathered over ETP as well: per dispatch
        // S x etp = 67,108,864 gathered, 1/2 of it sent: + 4 x 33,554,432 = 134,217,728 more.
        const Plan q = ep_plan(8, 2, 4);
        const LayerCost folded = layer_cost(m, c, j, q, plan_links(c, q), true);
        // EP 4 with stride 2 inside one host: 4 x S x 3/4 = 100,663,296, + ETP 134,217,728.
        CHECK(folded.ep_bytes.value() == doctest::Approx(100663296.0 + 134217728.0));
    }

    TEST_CASE("moe: expert GEMM efficiency by what runs at once, never above the HBM roofline") {
        ClusterSpec c = test::dgx_a100();
        // Efficiency 0.4 at 1 GFLOP rising log-linearly to 0.8 at 1 TFLOP.
        c.gpu.gemm_efficiency = {{flop(1e9), 0.4}, {flop(1e12), 0.8}};
        JobSpec j = test::job(8, 64, 4096);
        const GemmShape g{1024.0, 1024.0, 1024.0, 1.0};  // 2 x 1024^3 = 2.147 GFLOP
        const Flops f = gemm_flops(g);
        // TE multi-stream (4 streams, 16 local experts): lookup at 4 f = 8.590 GFLOP:
        // eff = 0.4 + 0.4 ln(8.590) / ln(1000) = 0.4 + 0.4 x 2.1506 / 6.9078 = 0.52453;
        // t = 2.147e9 / (312e12 x 0.52453) = 13.12 us (HBM: 6.29 MB / 2039 GB/s = 3.1 us).
        j.stack.moe_grouped_gemm_streams = 4;
        CHECK(expert_gemm_time(c.gpu, j, g, f * 16.0, 16.0).value() ==
              doctest::Approx(2.147483648e9 / (312e12 * 0.52453)).epsilon(1e-3));
        // A fused grouped kernel: lookup at the group's 34.36 GFLOP:
        // eff = 0.4 + 0.4 x ln(34.36) / 6.9078 = 0.4 + 0.4 x 3.5369 / 6.9078 = 0.60481.
        j.stack.moe_grouped_gemm_streams = 0;
        CHECK(expert_gemm_time(c.gpu, j, g, f * 16.0, 16.0).value() ==
              doctest::Approx(2.147483648e9 / (312e12 * 0.60481)).epsilon(1e-3));
        // A loop: at its own 2.147 GFLOP: 0.4 + 0.4 x 0.76427 / 6.9078 = 0.44426.
        j.stack.moe_grouped_gemm = false;
        CHECK(expert_gemm_time(c.gpu, j, g, f * 16.0, 16.0).value() ==
              doctest::Approx(2.147483648e9 / (312e12 * 0.44426)).epsilon(1e-3));
        // 16 rows through a 4096 x 4096 expert: (16 x 4096 + 4096^2 + 16 x 4096) x 2 B
        // = 33,816,576 B / 2039e9 B/s = 16.585 us > the 4.30 us of its 0.537 GFLOP at 0.4.
        const GemmShape thin{16.0, 4096.0, 4096.0, 1.0};
        CHECK(expert_gemm_time(c.gpu, j, thin, gemm_flops(thin), 1.0).value() ==
              doctest::Approx(33816576.0 / 2039e9).epsilon(1e-6));
    }

    TEST_CASE("moe: imbalance and capacity set the busiest expert's load") {
        JobSpec j = test::job(16, 64, 4096);
        const ModelSpec m = moe16();
        const Plan p = ep_plan(16, 1, 8);  // 2 local experts
        CHECK(expert_load_ratio(j) == 1.0);
        CHECK(rank_load_ratio(m, j, p) == 1.0);
        j.moe_imbalance = 2.0;
        // Busiest expert 2x; its rank: (2 + 1 x 1) / 2 local = 1.5.
        CHECK(expert_load_ratio(j) == 2.0);
        CHECK(rank_load_ratio(m, j, p) == doctest::Approx(1.5));
        j.moe_capacity = 1.25;  // dropped beyond 1.25 x average: (1.25 + 1) / 2 = 1.125
        CHECK(expert_load_ratio(j) == 1.25);
        CHECK(rank_load_ratio(m, j, p) == doctest::Approx(1.125));
        // The hot expert's GEMM has 1.25 x the rows: 4096 x 2 / 2 x 1.25 = 5120.
        const ExpertGemms e = expert_gemms(m, j, p);
        CHECK(e.hot_in.m == doctest::Approx(5120.0));
        CHECK(e.avg_in.m == doctest::Approx(4096.0));
        // A2A bytes scale by the rank's load: NIC 4 x S x 1.125 x 4/8 with S = 67,108,864
        // (EP 8 inside one host: no NIC); NVLink 4 x S x 1.125 x 7/8 = 264,241,152.
        const ClusterSpec c = test::dgx_a100();
        const LayerCost lc = layer_cost(m, c, j, p, plan_links(c, p), true);
        CHECK(lc.ep_nic_bytes.value() == 0.0);
        CHECK(lc.ep_nvlink_bytes.value() == doctest::Approx(264241152.0));
    }

    TEST_CASE("moe: dispatch buffers in activation memory") {
        const ModelSpec m = moe16();
        JobSpec j = test::job(16, 64, 4096);
        const Plan p = ep_plan(16, 1, 8);
        // copies = 4096 x 2 = 8192 routed rows; etp 1, balanced: rows at the experts 8192.
        // Expert outputs kept by unpermute: 2 B x 4096 x 8192 = 67,108,864; probs + indices
        // 12 B x 8192 = 98,304. Total 67,207,168.
        CHECK(moe_dispatch_buffer_bytes(m, j, p).value() == doctest::Approx(67207168.0));
        // Imbalance 2 -> rank load 1.5: rows 12288: (12288 - 8192) x 8192 B + 12288 x 8192 B
        // + inner 3 x 2 B x 4096 x 2 x 14336 = 704,643,072 x (1.5 - 1) + 98,304
        // = 33,554,432 + 100,663,296 + 352,321,536 + 98,304 = 486,637,568.
        j.moe_imbalance = 2.0;
        CHECK(moe_dispatch_buffer_bytes(m, j, p).value() == doctest::Approx(486637568.0));
        // Probabilities applied inside the experts (Megatron-Core >= 0.13): the combine keeps
        // no expert outputs, 12288 x 8192 B = 100,663,296 fewer: 385,974,272.
        j.stack.moe_probs_in_experts = true;
        CHECK(moe_dispatch_buffer_bytes(m, j, p).value() == doctest::Approx(385974272.0));
        // Balanced again: only the probs and indices, 98,304.
        j.moe_imbalance = 1.0;
        CHECK(moe_dispatch_buffer_bytes(m, j, p).value() == doctest::Approx(98304.0));
    }

    TEST_CASE("moe: risks name the EP all-to-all leaving the NVLink domain and imbalance") {
        const ModelSpec m = moe16();
        const ClusterSpec c = test::dgx_a100();
        JobSpec j = test::job(16, 64, 4096);
        const Estimate cross = estimate(m, c, j, ep_plan(16, 1, 16));
        CHECK(cross.has(RiskKind::ep_cross_domain));
        CHECK(cross.comm_bytes_per_gpu.ep_nic.value() > 0.0);
        CHECK_FALSE(estimate(m, c, j, ep_plan(16, 1, 8)).has(RiskKind::ep_cross_domain));
        CHECK_FALSE(cross.has(RiskKind::moe_imbalance));
        j.moe_imbalance = 1.6;
        CHECK(estimate(m, c, j, ep_plan(16, 1, 8)).has(RiskKind::moe_imbalance));
        j.moe_capacity = 1.25;
        CHECK_FALSE(estimate(m, c, j, ep_plan(16, 1, 8)).has(RiskKind::moe_imbalance));
        const std::vector<Risk> r = describe_risks(m, c, j, ep_plan(16, 1, 16), cross);
        bool named = false;
        for (const Risk& k : r) {
            named = named || (k.kind == RiskKind::ep_cross_domain &&
                              k.message.find("8 of 16 EP ranks") != std::string::npos);
        }
        CHECK(named);
    }

    TEST_CASE("moe: expert states sharded over etp x ep, reduced over expert DP") {
        const ModelSpec m = moe16();
        const ClusterSpec c = test::dgx_a100();
        const JobSpec j = test::job(16, 64, 4096);
        // tp 2 x dp 8; ep 8. etp 2 (default) shards each expert over 2: 16 experts / 8 / 2;
        // etp 1 keeps whole experts: twice the expert weights per GPU. Expert params per layer
        // 16 x 3 x 4096 x 14336 = 2,818,572,288; 8 layers: 22,548,578,304.
        // Weights (bf16, 2 B) per GPU: etp 2: 22.55e9 / 16 x 2 = 2.8186e9 B of expert weights;
        // etp 1: / 8 x 2 = 5.6371e9 B. The difference is 2.8186e9 B.
        const Estimate a = estimate(m, c, j, ep_plan(8, 2, 8));
        const Estimate b = estimate(m, c, j, ep_plan(8, 2, 8, 1));
        CHECK((b.memory.weights - a.memory.weights).value() ==
              doctest::Approx(22548578304.0 / 16.0 * 2.0).epsilon(1e-6));
    }

    TEST_CASE("moe: explain shows the EP bytes per link and a bad --moe-imbalance exits 2") {
        const std::vector<std::string> base = {"explain",
                                               std::string(CLEAVE_TEST_DATA_DIR) +
                                                   "/examples/mixtral-8x7b.toml",
                                               "dgx-h100",
                                               "--gpus",
                                               "16",
                                               "--gbs",
                                               "64",
                                               "--seq",
                                               "4096",
                                               "--dp",
                                               "16",
                                               "--ep",
                                               "8",
                                               "--format",
                                               "json"};
        const test::CliRun ok = test::run_cleave(base);
        REQUIRE(ok.code == 0);
        const nlohmann::json j = nlohmann::json::parse(ok.out);
        const nlohmann::json& b = j["comm_bytes_per_gpu"];
        // EP 8 inside one DGX H100: every byte on NVLink.
        CHECK(b["ep_nic"].get<double>() == 0.0);
        CHECK(b["ep_nvlink"].get<double>() == doctest::Approx(b["ep"].get<double>()));
        CHECK(j["plan"]["etp"] == 1);  // tp 1: etp = tp = 1
        std::vector<std::string> bad = base;
        bad.insert(bad.end(), {"--moe-imbalance", "0.5"});
        const test::CliRun r = test::run_cleave(bad);
        CHECK(r.code == 2);
        CHECK(r.err.find("--moe-imbalance") != std::string::npos);
        std::vector<std::string> skew = base;
        skew.insert(skew.end(), {"--moe-imbalance", "2"});
        const test::CliRun s2 = test::run_cleave(skew);
        REQUIRE(s2.code == 0);
        CHECK(s2.out.find("moe_imbalance") != std::string::npos);  // the risk is named
        // The busiest rank: (2 + 0) / 1 local expert = 2 x the all-to-all bytes.
        CHECK(nlohmann::json::parse(s2.out)["comm_bytes_per_gpu"]["ep"].get<double>() ==
              doctest::Approx(2.0 * b["ep"].get<double>()));
        std::vector<std::string> pad = base;
        pad.insert(pad.end(), {"--moe-pad"});
        const test::CliRun np = test::run_cleave(pad);
        CHECK(np.code == 2);
        CHECK(np.err.find("--moe-pad") != std::string::npos);
        CHECK(np.err.find("--moe-capacity") != std::string::npos);
        // Padded at capacity 1.5: every expert at 1.5 x the average, so 1.5 x the bytes.
        pad.insert(pad.end(), {"--moe-capacity", "1.5"});
        const test::CliRun p15 = test::run_cleave(pad);
        REQUIRE(p15.code == 0);
        CHECK(nlohmann::json::parse(p15.out)["comm_bytes_per_gpu"]["ep"].get<double>() ==
              doctest::Approx(1.5 * b["ep"].get<double>()));
    }
}
