// Enumeration, pruning, ordering and determinism of the search, priced by small test doubles so
// the counts do not move when the cost model's formulas do.
#include "core/errors.hpp"
#include "planner/search.hpp"

#include <doctest/doctest.h>

using namespace cleave;

namespace {

// A tiny dense model on one 4-GPU node: layers 4, heads = kv_heads 2, ffn 16; job: 4 GPUs,
// global batch 4, seq 4.
ModelSpec tiny_model() {
    ModelSpec m;
    m.name = "tiny";
    m.layers = 4;
    m.hidden = 16;
    m.heads = 2;
    m.kv_heads = 2;
    m.ffn_hidden = 16;
    m.vocab = 64;
    m.seq_len = 4;
    return m;
}

ClusterSpec node_of(int64_t gpus_per_node) {
    ClusterSpec c;
    c.name = "test";
    c.node.gpus_per_node = gpus_per_node;
    return c;
}

JobSpec tiny_job() {
    JobSpec j;
    j.gpus = 4;
    j.global_batch = 4;
    j.seq_len = 4;
    return j;
}

// Everything fits; time falls with dp and rises with pp, mbs and recomputation; memory is the
// reverse. Distinct enough that most plans differ, equal enough that ties happen (sp, zero).
Estimate fake_price(const ModelSpec&, const ClusterSpec&, const JobSpec&, const Plan& p) {
    Estimate e;
    e.fits = true;
    const double rc =
        p.recompute == Recompute::full ? 0.3 : (p.recompute == Recompute::selective ? 0.1 : 0.0);
    e.iteration_time = seconds(1.0 / static_cast<double>(p.dp) + 0.05 * static_cast<double>(p.pp) +
                               0.01 * static_cast<double>(p.mbs) + rc);
    e.memory.total = gib(10.0 * static_cast<double>(p.mbs) / static_cast<double>(p.tp * p.pp) - rc);
    e.memory_usable = gib(78.0);
    e.tokens_per_s = 16.0 / e.iteration_time.value();
    return e;
}

// Pure DP (tp = pp = cp = 1) needs 208 GiB; everything else fits.
Estimate dp_too_big(const ModelSpec& m, const ClusterSpec& c, const JobSpec& j, const Plan& p) {
    Estimate e = fake_price(m, c, j, p);
    if (p.tp == 1 && p.pp == 1 && p.cp == 1) {
        e.fits = false;
        e.memory.total = gib(208.0);
    }
    return e;
}

int64_t count_of(const SearchResult& r, RejectReason why) {
    return r.rejection(why).count;
}

}  // namespace

TEST_SUITE("planner") {
    TEST_CASE("search: enumeration count of a small case worked by hand") {
        // (tp, pp, cp) with tp*pp*cp | 4: 10 splits. tp=4 breaks heads=2 (tp_split), cp=4 needs
        // 2*cp=8 | seq=4 (seq). Priced plans per split = mbs x schedules x recompute(4: none,
        // selective with the default list, selective with the searched list [mlp], full) x sp x
        // zero:
        //   (1,1,1) dp4: mbs{1}          x1 x4 x1 x4 = 16
        //   (1,1,2) dp2: mbs{1,2}        x1 x4 x1 x4 = 32
        // Schedules at pp 2: 1f1b, gpipe, interleaved vpp 2 (2 layers per stage, 1 per chunk) and
        // vpp 3 (2 = 3 - 1 layers per stage: the embedding's and the loss's chunk hold none,
        // Megatron's account-for-embedding/loss split (4 + 2) / 2 = 3 = 3 chunks of 1); one
        // layer map per (pp, vpp), the even one.
        //   (1,2,1) dp2: mbs1 m2: 4 sched, mbs2 m1: 2 (interleaved needs pp|m) -> 6 x4 x1 x2 = 48
        //   (1,2,2) dp1 cp2: mbs{1,2,4} m{4,2,1}: 4+4+2 = 10 x4 x1 x2 = 80
        //   (1,4,1) dp1: mbs{1,2,4} x 2 sched (no vpp: 4*2 > 4 + 2) x4 x1 x1 = 24
        //   (2,1,1) dp2: mbs{1,2} x4 x2 (sp: tp*cp=2 | 4) x4 = 64
        //   (2,1,2) dp1 cp2: mbs{1,2,4} x4 x2 (tp*cp=4 | 4) x4 = 96
        //   (2,2,1) dp1: 4+4+2 = 10 x4 x2 x1 (dp*cp=1: ZeRO has nothing to shard) = 80
        // total 440.
        const SearchResult r =
            search_with(tiny_model(), node_of(4), tiny_job(), SearchOptions{}, &fake_price);
        CHECK(r.candidates_evaluated == 440);
        CHECK(r.feasible == 440);
        CHECK(count_of(r, RejectReason::tp_split) == 1);
        CHECK(count_of(r, RejectReason::seq) == 1);
        // interleaved vpp 2 and 3 with m=1 < pp=2: (1,2,1) mbs2, (1,2,2) mbs4, (2,2,1) mbs4
        CHECK(count_of(r, RejectReason::interleave) == 6);
        // ZeRO-2 and -3 with pp > 1 where dp*cp > 1, two per (mbs, schedule, recompute):
        // (1,2,1): 6 x 4 x 2 = 48; (1,2,2): 10 x 4 x 2 = 80
        CHECK(count_of(r, RejectReason::zero_pipeline) == 128);
        CHECK(count_of(r, RejectReason::memory) == 0);
        CHECK(r.plans.size() == 10);
        CHECK(r.gpu_counts_searched == std::vector<int64_t>{4});
    }

    TEST_CASE("search: the first example of a structural rejection names the constraint") {
        const ModelSpec m = tiny_model();
        const SearchOptions o;
        const SearchResult r = search_with(m, node_of(4), tiny_job(), o, &fake_price);
        const Rejection& tp = r.rejection(RejectReason::tp_split);
        REQUIRE(tp.has_example);
        CHECK(tp.example.tp == 4);
        CHECK(describe_rejection(m, tiny_job(), o, RejectReason::tp_split, tp) ==
              "dp1 tp4 pp1 cp1 ep1 vpp1 mbs1 1f1b none sp0 zero0: tp=4 does not divide heads=2; "
              "tp=4 does not divide kv_heads=2");
        const Rejection& seq = r.rejection(RejectReason::seq);
        REQUIRE(seq.has_example);
        CHECK(seq.example.cp == 4);
        CHECK(describe_rejection(m, tiny_job(), o, RejectReason::seq, seq)
                  .find("2*cp=8 does not divide seq=4") != std::string::npos);
        CHECK(describe_rejection(
                  m, tiny_job(), o, RejectReason::memory, r.rejection(RejectReason::memory))
                  .empty());
    }

    TEST_CASE("search: memory rejections keep the best rejected plan and its miss") {
        const ModelSpec m = tiny_model();
        const SearchOptions o;
        const SearchResult r = search_with(m, node_of(4), tiny_job(), o, &dp_too_big);
        // pure DP: (1,1,1) 16 plans; cp-only split (1,1,2) is not pure DP but has tp=pp=1,cp=2.
        CHECK(count_of(r, RejectReason::memory) == 16);
        CHECK(r.feasible == 424);
        const Rejection& mem = r.rejection(RejectReason::memory);
        REQUIRE(mem.priced);
        // fastest rejected: dp4 mbs1 no recompute, zero0 (zero1..3 tie on time; key order)
        CHECK(to_string(mem.example) == "dp4 tp1 pp1 cp1 ep1 vpp1 mbs1 1f1b none sp0 zero0");
        CHECK(describe_rejection(m, tiny_job(), o, RejectReason::memory, mem) ==
              "pure DP (dp4 tp1 pp1 cp1 ep1 vpp1 mbs1 1f1b none sp0 zero0): needs 208.0 GiB per "
              "GPU, has 78.0");
        for (const RankedPlan& p : r.plans) {
            CHECK(p.estimate.fits);
            CHECK_FALSE((p.plan.tp == 1 && p.plan.pp == 1 && p.plan.cp == 1));
        }
    }

    TEST_CASE("search: top plans are sorted by the objective, ties by simplicity then plan key") {
        SearchOptions o;
        o.top_k = 50;
        const SearchResult t = search_with(tiny_model(), node_of(4), tiny_job(), o, &fake_price);
        REQUIRE(t.plans.size() == 50);
        // fastest: dp4 (1/4) + pp1 0.05 + mbs1 0.01 = 0.31 s, zero 0..3 tie -> key order
        CHECK(to_string(t.plans[0].plan) == "dp4 tp1 pp1 cp1 ep1 vpp1 mbs1 1f1b none sp0 zero0");
        CHECK(to_string(t.plans[1].plan) == "dp4 tp1 pp1 cp1 ep1 vpp1 mbs1 1f1b none sp0 zero1");
        for (std::size_t i = 1; i < t.plans.size(); ++i) {
            CHECK(ranks_before(t.plans[i - 1], t.plans[i], Objective::time));
            CHECK(t.plans[i - 1].estimate.iteration_time <= t.plans[i].estimate.iteration_time);
            if (t.plans[i - 1].estimate.iteration_time == t.plans[i].estimate.iteration_time) {
                // Fewer parallel dimensions in use first (tp, pp, cp, ep above 1), then the key.
                const auto dims = [](const Plan& p) {
                    return (p.tp > 1) + (p.pp > 1) + (p.cp > 1) + (p.ep > 1);
                };
                const int da = dims(t.plans[i - 1].plan);
                const int db = dims(t.plans[i].plan);
                CHECK(da <= db);
                if (da == db) {
                    CHECK(to_string(t.plans[i - 1].plan) < to_string(t.plans[i].plan));
                }
            }
        }
        o.objective = Objective::memory;
        const SearchResult m = search_with(tiny_model(), node_of(4), tiny_job(), o, &fake_price);
        for (std::size_t i = 1; i < m.plans.size(); ++i) {
            CHECK(m.plans[i - 1].estimate.memory.total <= m.plans[i].estimate.memory.total);
        }
        // least memory: 10*mbs/(tp*pp) - 0.3 (full recompute) is lowest at mbs1, tp*pp=4
        CHECK(m.plans[0].plan.tp * m.plans[0].plan.pp == 4);
        CHECK(m.plans[0].plan.recompute == Recompute::full);
    }

    TEST_CASE("search: the top-k heap keeps exactly the k best of the full list") {
        SearchOptions all;
        all.top_k = 1000;
        SearchOptions few;
        few.top_k = 7;
        const auto a = search_with(tiny_model(), node_of(4), tiny_job(), all, &fake_price);
        const auto f = search_with(tiny_model(), node_of(4), tiny_job(), few, &fake_price);
        REQUIRE(a.plans.size() == 440);
        REQUIRE(f.plans.size() == 7);
        for (std::size_t i = 0; i < 7; ++i) {
            CHECK(f.plans[i] == a.plans[i]);
        }
    }

    TEST_CASE("search: two runs give the same result") {
        const auto a =
            search_with(tiny_model(), node_of(4), tiny_job(), SearchOptions{}, &dp_too_big);
        const auto b =
            search_with(tiny_model(), node_of(4), tiny_job(), SearchOptions{}, &dp_too_big);
        CHECK(a.plans == b.plans);
        CHECK(a.rejected == b.rejected);
        CHECK(a.candidates_evaluated == b.candidates_evaluated);
    }

    TEST_CASE("search: TP across nodes is rejected by default and priced when allowed") {
        // 2 GPUs per node: tp=2 tiles a node, tp=4 does not. Heads 4 so that tp=4 divides them.
        ModelSpec wide = tiny_model();
        wide.heads = 4;
        wide.kv_heads = 4;
        SearchOptions o;
        CHECK_FALSE(o.allow_tp_cross_node);
        const auto denied = search_with(wide, node_of(2), tiny_job(), o, &fake_price);
        CHECK(count_of(denied, RejectReason::tp_cross_node) == 1);  // (4,1,1)
        CHECK(count_of(denied, RejectReason::tp_split) == 0);
        // (4,1,1) dp1: mbs{1,2,4} x 4 rc x 2 sp (tp*cp=4 | 4) x 1 zero = 24 plans more
        o.allow_tp_cross_node = true;
        const auto allowed = search_with(wide, node_of(2), tiny_job(), o, &fake_price);
        CHECK(count_of(allowed, RejectReason::tp_cross_node) == 0);
        CHECK(allowed.candidates_evaluated - denied.candidates_evaluated == 24);
        // on 4-GPU nodes tp=4 stays inside: nothing to reject
        o.allow_tp_cross_node = false;
        const auto inside = search_with(wide, node_of(4), tiny_job(), o, &fake_price);
        CHECK(count_of(inside, RejectReason::tp_cross_node) == 0);
        CHECK(inside.candidates_evaluated == allowed.candidates_evaluated);
    }

    TEST_CASE("search: limits and heuristics are counted, never silent") {
        SearchOptions o;
        o.max_pp = 2;
        const auto r = search_with(tiny_model(), node_of(4), tiny_job(), o, &fake_price);
        CHECK(count_of(r, RejectReason::limit) == 1);  // (1,4,1)
        CHECK(r.candidates_evaluated == 440 - 24);
        SearchOptions h;
        h.heuristics = true;
        const auto hr = search_with(tiny_model(), node_of(4), tiny_job(), h, &fake_price);
        // cp>1 at seq 4 < 8192: (1,1,2), (1,2,2), (2,1,2); gpipe: once per pp>1 (split, mbs):
        // (1,2,1) 2 + (1,4,1) 3 + (2,2,1) 3 = 8
        CHECK(count_of(hr, RejectReason::heuristic) == 3 + 8);
    }

    TEST_CASE("search: objective gpus finds the fewest GPUs reaching the target") {
        SearchOptions o;
        o.objective = Objective::gpus;
        o.top_k = 3;
        // tokens/s = 16 / t; t = 1/dp + 0.05 pp + 0.01 mbs + rc. One GPU: t >= 1.06 -> 15.1.
        // Two GPUs, dp2 mbs1: t = 0.56 -> 28.6 tokens/s. Target 20 needs 2 GPUs.
        o.target_tokens_per_s = 20.0;
        const auto r = search_with(tiny_model(), node_of(4), tiny_job(), o, &fake_price);
        REQUIRE_FALSE(r.plans.empty());
        CHECK(plan_gpus(r.plans[0].plan) == 2);
        CHECK(r.plans[0].plan.dp == 2);
        CHECK(r.gpu_counts_searched == std::vector<int64_t>{1, 2});
        for (const auto& p : r.plans) {
            CHECK(p.estimate.tokens_per_s >= 20.0);
        }
        const Rejection& miss = r.rejection(RejectReason::target);
        REQUIRE(miss.priced);
        // closest below the target: 2 GPUs, dp2 mbs1 full recompute, t = 0.5+0.05+0.01+0.3 = 0.86 s
        CHECK(miss.gpus == 2);
        CHECK(miss.example.recompute == Recompute::full);
        CHECK(miss.estimate.tokens_per_s == doctest::Approx(16.0 / 0.86).epsilon(1e-12));
        o.target_tokens_per_s = 0.0;
        CHECK_THROWS_AS((void)search_with(tiny_model(), node_of(4), tiny_job(), o, &fake_price),
                        ConfigError);
    }

    TEST_CASE("search: plan_key writes the same bytes as to_string") {
        Plan p;
        p.dp = 128;
        p.tp = 8;
        p.pp = 12;
        p.cp = 2;
        p.ep = 4;
        p.vpp = 3;
        p.mbs = 16;
        p.schedule = Schedule::interleaved;
        p.recompute = Recompute::selective;
        p.sp = true;
        p.zero = 1;
        std::array<char, 128> buf{};
        const std::size_t n = plan_key(p, buf);
        CHECK(std::string(buf.data(), n) == to_string(p));
        CHECK(plan_label(Plan{}) == "pure DP (dp1 tp1 pp1 cp1 ep1 vpp1 mbs1 1f1b none sp0 zero0)");
    }
}

TEST_SUITE("planner") {
    TEST_CASE("search: expert TP is a dimension (1 and tp), and --etp fixes it") {
        // The tiny model with 2 experts top-1 on 4 GPUs. Splits with tp = 2: (2,1,1) dp 2 and
        // (2,1,2) dp 1 cp 2, (2,2,1) dp 1. EP candidates divide the GPUs and experts, ep * etp
        // dividing tp*cp*dp = 4, 2, 2 ranks of a stage. With etp = tp (0) ep can be 1 or 2 only
        // where ep*2 | ranks; etp = 1 adds ep 1 and 2 on every tp = 2 split.
        ModelSpec m = tiny_model();
        m.moe.experts = 2;
        m.moe.top_k = 1;
        m.moe.expert_ffn_hidden = 16;
        SearchOptions o;
        o.top_k = 100000;
        const SearchResult r = search_with(m, node_of(4), tiny_job(), o, &fake_price);
        int64_t etp1 = 0;
        int64_t etp_tp = 0;
        for (const RankedPlan& rp : r.plans) {
            if (rp.plan.tp > 1 && rp.plan.etp == 1) {
                ++etp1;
                CHECK(expert_dp(rp.plan) * rp.plan.ep == rp.plan.tp * rp.plan.cp * rp.plan.dp);
            }
            etp_tp += rp.plan.tp > 1 && rp.plan.etp == 0 ? 1 : 0;
            CHECK((rp.plan.tp > 1 || rp.plan.etp == 0));  // etp 1 = tp 1: not enumerated twice
        }
        CHECK(etp1 > 0);
        CHECK(etp_tp > 0);
        // (2,1,1) dp 2, mbs 1 or 2 ... the tp = 2 plans with etp = 1 outnumber those with etp = tp:
        // etp = tp allows ep = 1 everywhere and ep = 2 only on (2,1,1) (2*2 | 4); etp = 1 allows
        // ep = 1 and 2 on all three splits.
        CHECK(etp1 > etp_tp);
        o.fixed.etp = 1;
        const SearchResult f = search_with(m, node_of(4), tiny_job(), o, &fake_price);
        for (const RankedPlan& rp : f.plans) {
            CHECK(rp.plan.etp == 1);
        }
        CHECK(!f.plans.empty());
    }
}
