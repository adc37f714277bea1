#include "costmodel/collectives.hpp"
#include "costmodel/compute.hpp"
#include "tests/costmodel/fixtures.hpp"

#include <tuple>
#include <utility>

#include <doctest/doctest.h>

using namespace cleave;

TEST_SUITE("costmodel") {
    TEST_CASE("collectives: busbw factors follow nccl-tests PERFORMANCE.md") {
        // all-reduce 2(n-1)/n: n=8 -> 14/8 = 1.75; n=2 -> 1
        CHECK(busbw_factor(Collective::all_reduce, 8) == doctest::Approx(1.75).epsilon(1e-12));
        CHECK(busbw_factor(Collective::all_reduce, 2) == doctest::Approx(1.0).epsilon(1e-12));
        // all-gather / reduce-scatter / all-to-all (n-1)/n: n=8 -> 0.875
        CHECK(busbw_factor(Collective::all_gather, 8) == doctest::Approx(0.875).epsilon(1e-12));
        CHECK(busbw_factor(Collective::reduce_scatter, 4) == doctest::Approx(0.75).epsilon(1e-12));
        CHECK(busbw_factor(Collective::all_to_all, 16) ==
              doctest::Approx(15.0 / 16).epsilon(1e-12));
        CHECK(busbw_factor(Collective::send_recv, 2) == 1.0);
        CHECK(busbw_factor(Collective::all_reduce, 1) == 0.0);
        // factor grows towards 2 (all-reduce) and 1 (all-gather) with n
        CHECK(busbw_factor(Collective::all_reduce, 1024) < 2.0);
        CHECK(busbw_factor(Collective::all_reduce, 1024) > busbw_factor(Collective::all_reduce, 8));
    }

    TEST_CASE("collectives: node.sync_wait is charged once per TP collective of a layer") {
        // w = 100 us; a layer's TP collectives (compute.cpp add_tp): forward 2 all-reduces
        // (SP: 2 all-gathers + 2 reduce-scatters), backward 2 (SP: 6); full recompute repeats
        // the forward's in the backward. So tp_fwd grows by 2w = 200 us (SP 4w = 400 us),
        // tp_bwd by 2w (SP 6w = 600 us; full recompute 2w + 2w = 400 us).
        const ClusterSpec base = test::dgx_a100();
        ClusterSpec jittery = base;
        jittery.node.sync_wait = seconds(100e-6);
        const ModelSpec m = test::gpt3();
        const JobSpec j = test::job(64, 512);
        const auto delta = [&](const Plan& p) {
            const LayerCost a = layer_cost(m, base, j, p, plan_links(base, p), false);
            const LayerCost b = layer_cost(m, jittery, j, p, plan_links(jittery, p), false);
            CHECK(b.fwd == a.fwd);  // only the collectives move
            return std::pair{(b.tp_fwd - a.tp_fwd).value(), (b.tp_bwd - a.tp_bwd).value()};
        };
        Plan p = test::plan(8, 8, 1);
        CHECK(plan_links(jittery, p).tp.sync_wait.value() == 100e-6);
        auto [f, b] = delta(p);
        CHECK(f == doctest::Approx(200e-6).epsilon(1e-9));
        CHECK(b == doctest::Approx(200e-6).epsilon(1e-9));
        p.sp = true;
        std::tie(f, b) = delta(p);
        CHECK(f == doctest::Approx(400e-6).epsilon(1e-9));
        CHECK(b == doctest::Approx(600e-6).epsilon(1e-9));
        p.sp = false;
        p.recompute = Recompute::full;
        std::tie(f, b) = delta(p);
        CHECK(f == doctest::Approx(200e-6).epsilon(1e-9));
        CHECK(b == doctest::Approx(400e-6).epsilon(1e-9));
        // TP = 1: no collectives, no wait.
        std::tie(f, b) = delta(test::plan(64, 1, 1));
        CHECK(f == 0.0);
        CHECK(b == 0.0);
    }

    TEST_CASE("collectives: node.sync_wait_fraction is charged on the compute TP cuts") {
        // Fraction 0.05: the layer's own compute (LayerCost fwd / bwd, unchanged) times 0.05 is
        // added to its TP time: tp_fwd + 0.05 fwd, tp_bwd + 0.05 bwd; full recompute repeats
        // the forward's in the backward: tp_bwd + 0.05 (bwd + fwd). TP = 1: nothing.
        const ClusterSpec base = test::dgx_a100();
        ClusterSpec jittery = base;
        jittery.node.sync_wait_fraction = 0.05;
        const ModelSpec m = test::gpt3();
        const JobSpec j = test::job(64, 512);
        Plan p = test::plan(8, 8, 1);
        CHECK(plan_links(jittery, p).tp.sync_wait_fraction == 0.05);
        CHECK(plan_links(jittery, test::plan(64, 1, 1)).tp.sync_wait_fraction == 0.0);
        for (const Recompute r : {Recompute::none, Recompute::full}) {
            p.recompute = r;
            const LayerCost a = layer_cost(m, base, j, p, plan_links(base, p), false);
            const LayerCost b = layer_cost(m, jittery, j, p, plan_links(jittery, p), false);
            CHECK(b.fwd == a.fwd);
            CHECK(b.bwd == a.bwd);
            const double redo = r == Recompute::full ? 1.0 : 0.0;
            CHECK((b.tp_fwd - a.tp_fwd).value() ==
                  doctest::Approx(0.05 * a.fwd.value()).epsilon(1e-9));
            CHECK((b.tp_bwd - a.tp_bwd).value() ==
                  doctest::Approx(0.05 * (a.bwd.value() + redo * a.fwd.value())).epsilon(1e-9));
        }
        const Plan one = test::plan(64, 1, 1);
        const LayerCost a = layer_cost(m, base, j, one, plan_links(base, one), false);
        const LayerCost b = layer_cost(m, jittery, j, one, plan_links(jittery, one), false);
        CHECK(b.tp_fwd == a.tp_fwd);
        CHECK(b.tp_bwd == a.tp_bwd);
    }

    TEST_CASE("collectives: a node's own bandwidth for one collective replaces intra_bw") {
        ClusterSpec c = test::dgx_a100();
        c.node.intra_bw = gbps(10.0);
        c.node.intra_latency = Seconds{};
        c.node.collective_bw.reduce_scatter = gbps(2.5);
        const GroupLink in = group_link(c, 2, 1);  // 2 ranks inside a node
        CHECK(in.op_busbw.reduce_scatter.value() == 2.5e9);
        // 1 GB on 2 ranks, factor (n-1)/n = 0.5: reduce-scatter 0.5e9 / 2.5e9 = 0.2 s,
        // all-gather at intra_bw 0.5e9 / 1e10 = 0.05 s; all-reduce factor 1: 0.1 s.
        CHECK(collective_time(Collective::reduce_scatter, bytes(1e9), 2, in).value() ==
              doctest::Approx(0.2).epsilon(1e-12));
        CHECK(collective_time(Collective::all_gather, bytes(1e9), 2, in).value() ==
              doctest::Approx(0.05).epsilon(1e-12));
        CHECK(collective_time(Collective::all_reduce, bytes(1e9), 2, in).value() ==
              doctest::Approx(0.1).epsilon(1e-12));
        // A group across nodes runs at the network's bandwidth, whatever the node's values.
        const GroupLink out = group_link(c, 16, 1);
        CHECK(out.crosses_nodes());
        CHECK(out.op_busbw.reduce_scatter.value() == 0.0);
    }

    TEST_CASE("collectives: TP=8 inside a DGX node is NVLink and TP=16 crosses nodes") {
        const ClusterSpec c = test::dgx_a100();
        const GroupLink tp8 = group_link(c, 8, 1);
        CHECK(tp8.kind == LinkKind::nvlink);
        CHECK_FALSE(tp8.crosses_nodes());
        CHECK(tp8.busbw.value() == doctest::Approx(234.89e9));
        const GroupLink tp16 = group_link(c, 16, 1);
        CHECK(tp16.kind == LinkKind::network);
        CHECK(tp16.nodes == 2);
        CHECK(tp16.members_per_node == 8);
        // 8 GPUs per node, each with its NIC: min(234.89, 8 x 24) = 192 GB/s
        CHECK(tp16.busbw.value() == doctest::Approx(192e9));
    }

    TEST_CASE("collectives: DP across nodes gets one NIC per member per node") {
        const ClusterSpec c = test::dgx_a100();
        // tp=8: DP members are 8 ranks apart -> one per node -> 24 GB/s
        const PlanLinks l = plan_links(c, test::plan(4, 8, 1));
        CHECK(l.dp.kind == LinkKind::network);
        CHECK(l.dp.members_per_node == 1);
        CHECK(l.dp.nodes == 4);
        CHECK(l.dp.busbw.value() == doctest::Approx(24e9));
        // tp=2, dp=16: 4 members per node -> min(234.89, 4 x 24) = 96 GB/s
        const PlanLinks l2 = plan_links(c, test::plan(16, 2, 1));
        CHECK(l2.dp.members_per_node == 4);
        CHECK(l2.dp.busbw.value() == doctest::Approx(96e9));
        // tp=2, dp=4 fits in one node (stride 2 x 4 = 8)
        CHECK(plan_links(c, test::plan(4, 2, 1)).dp.kind == LinkKind::nvlink);
        // pp=2 behind tp=8: the boundary crosses nodes on one NIC
        const PlanLinks l3 = plan_links(c, test::plan(1, 8, 2));
        CHECK(l3.pp.crosses_nodes());
        CHECK(l3.pp.busbw.value() == doctest::Approx(24e9));
    }

    TEST_CASE("collectives: a PCIe node maps intra-node groups to PCIe") {
        const GroupLink g = group_link(test::pcie_1gbe(), 2, 1);
        CHECK(g.kind == LinkKind::pcie);
        CHECK(g.busbw.value() == doctest::Approx(12e9));
    }

    TEST_CASE("collectives: alpha-beta time of a ring all-reduce") {
        const ClusterSpec c = test::dgx_a100();
        const GroupLink l = group_link(c, 8, 1);
        // 1 GB over 8 NVLink ranks: 14 steps x 2.41 us + 1e9 x 1.75 / 234.89e9 s
        const double want = 14 * 2.41e-6 + 1e9 * 1.75 / 234.89e9;
        CHECK(collective_time(Collective::all_reduce, bytes(1e9), 8, l).value() ==
              doctest::Approx(want).epsilon(1e-12));
        // all-gather of the same array: 7 steps, factor 7/8
        const double ag = 7 * 2.41e-6 + 1e9 * 0.875 / 234.89e9;
        CHECK(collective_time(Collective::all_gather, bytes(1e9), 8, l).value() ==
              doctest::Approx(ag).epsilon(1e-12));
        CHECK(collective_bytes_sent(Collective::all_reduce, bytes(1e9), 8).value() ==
              doctest::Approx(1.75e9));
        // algbw = S / t, busbw = algbw x factor
        const Bandwidths bw = bandwidths(Collective::all_reduce, bytes(1e9), 8, seconds(0.01));
        CHECK(bw.algbw.value() == doctest::Approx(1e11));
        CHECK(bw.busbw.value() == doctest::Approx(1.75e11));
    }

    TEST_CASE("collectives: a CP ring across nodes waits for one NIC") {
        // Ring attention passes K/V between neighbours (send/recv): the step is paced by the pair
        // that crosses nodes, one GPU's NIC (24 GB/s), whatever the CP ranks per node. TP 1, CP 16
        // on 8-GPU nodes: 8 CP ranks per node, still 24 GB/s (the ring model would give 192).
        Plan p;
        p.cp = 16;
        p.dp = 1;
        const PlanLinks l = plan_links(test::dgx_a100(), p);
        CHECK(l.cp.crosses_nodes());
        CHECK(l.cp.busbw.value() == doctest::Approx(24e9));
        // CP 8 inside a node stays on NVSwitch
        p.cp = 8;
        CHECK(plan_links(test::dgx_a100(), p).cp.busbw.value() == doctest::Approx(234.89e9));
    }

    TEST_CASE("collectives: time is monotonic in bytes") {
        const GroupLink l = group_link(test::dgx_a100(), 8, 1);
        Seconds prev;
        for (double b = 1e3; b < 1e11; b *= 10) {
            const Seconds t = collective_time(Collective::all_reduce, bytes(b), 8, l);
            CHECK(t > prev);
            prev = t;
        }
    }
}

TEST_SUITE("costmodel") {
    TEST_CASE("collectives: TE userbuffers cost the GEMMs they hide behind (split, SM margin)") {
        // GPT-3 175B, tp 8 with SP and --tp-comm-overlap, mbs 1, s 2048: every TP GEMM has
        // M = 2048 rows. The network is made free (1e12 GB/s, no latency, no wait), so tp_fwd /
        // tp_bwd hold only what the overlap costs the GEMMs (compute.cpp userbuffers_extra).
        ClusterSpec c = test::dgx_a100();
        c.node.intra_bw = gbps(1e12);
        c.node.intra_latency = Seconds{};
        const ModelSpec m = test::gpt3();
        JobSpec j = test::job(64, 512);
        j.stack.tp_comm_overlap = true;
        j.stack.tp_overlap_row_fprop = UbMethod::pipeline;
        j.stack.tp_overlap_row_fprop_quantised = UbMethod::ring_exchange;
        j.stack.tp_overlap_sm_fraction = 0.2;
        j.stack.tp_overlap_pipeline_splits = 4;
        j.stack.tp_overlap_bulk_sm_fraction = 0.1;
        Plan p = test::plan(8, 8, 1);
        p.sp = true;
        // Flat curve (0.8 at every size): the chunks run as fast as the whole GEMM, so only the
        // SMs the "pipeline" communicator keeps cost anything: 1 / (1 - 0.2) - 1 = 0.25 of the
        // row-parallel forward GEMMs.
        //   peak x 0.8 = 312e12 x 0.8 = 249.6e12 FLOP/s
        //   proj 2 x 2048 x 12288 x 1536 = 77,309,411,328 FLOP -> 309.73 us
        //   fc2  2 x 2048 x 12288 x 6144 = 309,237,645,312    -> 1238.93 us
        // forward: 0.25 x (309.73 + 1238.93) = 387.17 us; backward: the "ring_exchange" dgrads
        // cost nothing on a flat curve, and "bulk" holds its SMs only while its (free)
        // collectives run: 0.
        const LayerCost a = layer_cost(m, c, j, p, plan_links(c, p), false);
        CHECK(a.tp_fwd.value() == doctest::Approx(387.17e-6).epsilon(1e-4));
        CHECK(a.tp_bwd.value() == doctest::Approx(0.0).epsilon(1e-9));
        // Without the overlap the free network costs nothing at all, and the GEMMs are unchanged.
        JobSpec off = j;
        off.stack.tp_comm_overlap = false;
        const LayerCost b = layer_cost(m, c, off, p, plan_links(c, p), false);
        CHECK(b.tp_fwd.value() == doctest::Approx(0.0).epsilon(1e-9));
        CHECK(b.fwd == a.fwd);
        // Quantised GEMMs take the stack's quantised method: ring_exchange here (no SMs; the
        // A100 has no fp8, so the GEMMs run bf16 at the same times): 0; pipeline: 387.17 us again.
        JobSpec q = j;
        q.compute = Dtype::fp8;
        CHECK(layer_cost(m, c, q, p, plan_links(c, p), false).tp_fwd.value() ==
              doctest::Approx(0.0).epsilon(1e-9));
        q.stack.tp_overlap_row_fprop_quantised = UbMethod::pipeline;
        CHECK(layer_cost(m, c, q, p, plan_links(c, p), false).tp_fwd.value() ==
              doctest::Approx(387.17e-6).epsilon(1e-4));

        // "bulk": at 234.89 GB/s (no latency) the column-parallel layers' all-gather and
        // reduce-scatter of T h = 2048 x 12288 x 2 B = 50,331,648 B over 8 ranks each take
        // 50,331,648 x 7/8 / 234.89e9 = 187.50 us, shorter than the GEMMs they hide behind
        // (qkv 929.20 us, fc1 1238.93 us): 0.1 x (187.50 + 187.50) x 2 blocks = 75.00 us more
        // backward than with a bulk share of 0.
        ClusterSpec slow = c;
        slow.node.intra_bw = gbps(234.89);
        JobSpec nob = j;
        nob.stack.tp_overlap_bulk_sm_fraction = 0.0;
        const Seconds with = layer_cost(m, slow, j, p, plan_links(slow, p), false).tp_bwd;
        const Seconds without = layer_cost(m, slow, nob, p, plan_links(slow, p), false).tp_bwd;
        CHECK((with - without).value() == doctest::Approx(75.00e-6).epsilon(1e-3));

        // A curve that falls at small sizes: 0.4 at F/8 = 38,654,705,664 FLOP, 0.8 at
        // F = 309,237,645,312 (fc1 and fc2), linear in ln(size) between. The MLP alone
        // (LayerShape::ffn): t = F / 249.6e12 = 1238.93 us each.
        //   fc1 forward, ring_exchange in 8 chunks of F/8 at 0.4: 2t, extra t;
        //   fc2 forward, pipeline in 4 chunks of F/4 (1/3 of the way in ln: 0.4 + 0.4/3 =
        //   0.5333) on 0.8 of the SMs: t x (0.8 / 0.5333) / 0.8 = 1.875 t, extra 0.875 t;
        //   fc2 dgrad, ring_exchange: extra t; fc1 bulk on the free network: 0.
        // tp_fwd = 1.875 t = 2322.99 us, tp_bwd = t = 1238.93 us.
        c.gpu.gemm_efficiency = {{flop(38654705664.0), 0.4}, {flop(309237645312.0), 0.8}};
        const LayerCost f = layer_cost(m, c, j, p, plan_links(c, p), false, LayerShape::ffn);
        CHECK(f.tp_fwd.value() == doctest::Approx(2322.99e-6).epsilon(1e-4));
        CHECK(f.tp_bwd.value() == doctest::Approx(1238.93e-6).epsilon(1e-4));
        // Full recompute runs the forward (and its overlap) again in the backward.
        p.recompute = Recompute::full;
        const LayerCost r = layer_cost(m, c, j, p, plan_links(c, p), false, LayerShape::ffn);
        CHECK(r.tp_bwd.value() == doctest::Approx((1238.93 + 2322.99) * 1e-6).epsilon(1e-4));
    }
}
