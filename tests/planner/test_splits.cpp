// Layer maps the planner derives, plan flags the user fixes, and the rule table the search
// prunes with (core/plan_rules.cpp): every plan it prices passes check_plan.
#include "core/plan.hpp"
#include "planner/search.hpp"
#include "costmodel/splits.hpp"

#include <doctest/doctest.h>

using namespace cleave;

namespace {

// Llama 3 405B shape (Dubey et al. 2024, Table 3): 126 layers, hidden 16384, 128 heads, 8 KV
// heads, SwiGLU 53248, vocabulary 128256.
ModelSpec llama405b() {
    ModelSpec m;
    m.name = "llama-405b";
    m.layers = 126;
    m.hidden = 16384;
    m.heads = 128;
    m.kv_heads = 8;
    m.ffn_hidden = 53248;
    m.vocab = 128256;
    m.seq_len = 8192;
    m.mlp = MlpKind::swiglu;
    return m;
}

JobSpec job_of(int64_t gpus, int64_t gbs, int64_t seq) {
    JobSpec j;
    j.gpus = gpus;
    j.global_batch = gbs;
    j.seq_len = seq;
    return j;
}

// A 7-layer model on 8 GPUs: pp 2 and 4 need uneven maps; tp 1, 2, 4, 8 divide the heads.
ModelSpec seven() {
    ModelSpec m;
    m.name = "seven";
    m.layers = 7;
    m.hidden = 64;
    m.heads = 8;
    m.kv_heads = 8;
    m.ffn_hidden = 256;
    m.vocab = 512;
    m.seq_len = 16;
    return m;
}

ClusterSpec node8() {
    ClusterSpec c;
    c.name = "test";
    c.node.gpus_per_node = 8;
    return c;
}

int64_t broken_priced = 0;  // plans priced that check_plan rejects

Estimate checked_price(const ModelSpec& m, const ClusterSpec&, const JobSpec& j, const Plan& p) {
    if (!check_plan(m, j, p).empty()) {
        ++broken_priced;
    }
    Estimate e;
    e.fits = true;
    e.iteration_time = seconds(1.0 + 0.01 * static_cast<double>(p.pp + p.mbs + p.first_layers));
    e.memory_usable = gib(80.0);
    return e;
}

}  // namespace

TEST_SUITE("planner splits") {
    TEST_CASE("split_weights: the output layer in transformer layers") {
        // 405B at s 8192: G = 2 h (a d) + 2 h (a_kv d) + 3 h f
        //   = 2*16384*16384 + 2*16384*1024 + 3*16384*53248 = 3,187,671,040;
        // attention 4 s a d = 4*8192*16384 = 536,870,912; output 2 h V = 4,202,692,608;
        // 4,202,692,608 / (2*3,187,671,040 + 536,870,912) = 0.608.
        const SplitWeights w = split_weights(llama405b(), job_of(16384, 2048, 8192));
        CHECK(w.embedding == 0.0);
        CHECK(w.output == doctest::Approx(0.608).epsilon(0.002));
    }

    TEST_CASE("balanced_splits: the published uneven maps come out") {
        const ModelSpec m = llama405b();
        const JobSpec j = job_of(16384, 2048, 8192);
        const SplitWeights w = split_weights(m, j);
        // pp 16: 126 / 16 does not divide; ideal (126 + 0.61) / 16 = 7.91; middle 8 leaves 14
        // for the ends, 7 + 7 (load max(7, 8, 7.61) = 8). Megatron's (126 + 2) / 16 = 8 with one
        // less at each end is the same map.
        CHECK(balanced_splits(m, j, 16, 1, w) == std::vector<Split>{{7, 7}});
        // pp 8 x vpp 8 (Llama 3.1 405B): (126 + 2) / 8 = 16, ends 15 = 2*8 - 1.
        CHECK(balanced_splits(m, j, 8, 8, w) == std::vector<Split>{{15, 15}});
        // pp 2: 63 + 63 is even: ideal 63.3, the even split only.
        CHECK(balanced_splits(m, j, 2, 1, w) == std::vector<Split>{{0, 0}});
        // BLOOM 176B shape: 70 layers, hidden 14336, vocab 250880, pp 12. Its output layer is
        // 2 h V / (2 G + 4 s h) = 7.19e9 / (2 * 12 * 14336^2 + 4 * 2048 * 14336) = 1.42 layers,
        // so the least slowest stage is 6 / 6 / 4 (max(6, 6, 5.42) = 6, against 6.42 for 5 / 5);
        // Megatron's (70 + 2) / 12 = 6 with ends 5 (what its Megatron-DeepSpeed run used,
        // counting embedding and head as layers) comes second.
        ModelSpec bloom = m;
        bloom.layers = 70;
        bloom.hidden = 14336;
        bloom.heads = 112;
        bloom.kv_heads = 112;
        bloom.ffn_hidden = 4 * 14336;
        bloom.vocab = 250880;
        bloom.mlp = MlpKind::gelu;
        const JobSpec bj = job_of(384, 2048, 2048);
        CHECK(balanced_splits(bloom, bj, 12, 1, split_weights(bloom, bj)) ==
              (std::vector<Split>{{6, 4}, {5, 5}}));
        // 126 over 128 stages: no map gives every stage a layer.
        CHECK(balanced_splits(m, j, 128, 1, w).empty());
    }

    TEST_CASE("split_weights: dense and MoE layers weigh their own work") {
        // 8 layers, h 1024, 8 heads, GeLU 4096, s 2048, V 51200; MoE after 2 dense layers:
        // 8 experts of 1024, top 2. Attention GEMMs 4 h^2 = 4,194,304; dense G = 4,194,304 +
        // 2 x 1024 x 4096 = 12,582,912; MoE G = 4,194,304 + 2 x (2 x 1024 x 1024) + router
        // 1024 x 8 = 8,396,800; the attention term 4 s a (h / a) = 8,388,608.
        // Work: dense 2 G + 8,388,608 = 33,554,432; MoE 25,182,208; the mean layer (2 x mean G
        // + attention) = 2 x (2 x 12,582,912 + 6 x 8,396,800) / 8 + 8,388,608 = 27,275,264.
        ModelSpec m;
        m.name = "moe-mixed";
        m.layers = 8;
        m.hidden = 1024;
        m.heads = 8;
        m.kv_heads = 8;
        m.ffn_hidden = 4096;
        m.vocab = 51200;
        m.seq_len = 2048;
        m.moe.experts = 8;
        m.moe.top_k = 2;
        m.moe.expert_ffn_hidden = 1024;
        m.moe.first_dense_layers = 2;
        const JobSpec j = job_of(8, 8, 2048);
        const SplitWeights w = split_weights(m, j);
        REQUIRE(w.layer.size() == 8);
        CHECK(w.layer[0] == doctest::Approx(33554432.0 / 27275264.0));  // 1.2302
        CHECK(w.layer[1] == doctest::Approx(33554432.0 / 27275264.0));
        CHECK(w.layer[2] == doctest::Approx(25182208.0 / 27275264.0));  // 0.9233
        // Output 2 h V = 104,857,600 = 3.8444 mean layers.
        CHECK(w.output == doctest::Approx(104857600.0 / 27275264.0));
        // PP 2: 6 / 2 puts 2 x 1.2302 + 4 x 0.9233 = 6.154 on the first stage and 2 x 0.9233 +
        // 3.844 = 5.691 on the last; 5 / 3 would leave 6.614 on the last.
        const auto sp = balanced_splits(m, j, 2, 1, w);
        REQUIRE_FALSE(sp.empty());
        CHECK(sp.front() == Split{6, 2});
        // An all-MoE (or all-dense) model weighs every layer 1, as before.
        m.moe.first_dense_layers = 0;
        CHECK(split_weights(m, j).layer.empty());
    }

    TEST_CASE("search: every plan priced passes check_plan, rejections name their rule") {
        broken_priced = 0;
        SearchOptions o;
        o.top_k = 5;
        const JobSpec j = job_of(8, 16, 16);
        const SearchResult r = search_with(seven(), node8(), j, o, &checked_price);
        CHECK(r.candidates_evaluated > 0);
        CHECK(broken_priced == 0);
        // pp 2 and pp 4 are searched with uneven maps: 7 = 3 + 4 and 7 = 1 + 2 + 2 + 2 or so.
        bool uneven_seen = false;
        int64_t broken_listed = 0;
        SearchOptions all = o;
        all.top_k = 100000;
        for (const RankedPlan& rp : search_with(seven(), node8(), j, all, &checked_price).plans) {
            uneven_seen = uneven_seen || uneven_stages(7, rp.plan);
            broken_listed += plan_violations(seven(), j, rp.plan).empty() ? 0 : 1;
        }
        CHECK(broken_listed == 0);
        CHECK(uneven_seen);
        // Structural rejections carry an example the rule table rejects, naming the rule.
        for (RejectReason why : {RejectReason::batch,
                                 RejectReason::interleave,
                                 RejectReason::zero_pipeline,
                                 RejectReason::seq}) {
            const Rejection& rj = r.rejection(why);
            if (rj.count == 0) {
                continue;
            }
            REQUIRE(rj.has_example);
            const auto v = plan_violations(seven(), j, rj.example);
            REQUIRE_FALSE(v.empty());
            CHECK(std::string(rule_info(v[0].rule).name).size() > 0);
        }
        const auto zp =
            plan_violations(seven(), j, r.rejection(RejectReason::zero_pipeline).example);
        REQUIRE_FALSE(zp.empty());
        CHECK(zp[0].rule == Rule::zero_pipeline);
    }

    TEST_CASE("search: fixed plan flags are kept, the rest searched, nothing counted") {
        SearchOptions free;
        free.top_k = 100000;
        SearchOptions fixed = free;
        fixed.fixed.tp = 2;
        fixed.fixed.pp = 2;
        fixed.fixed.recompute = Recompute::none;
        const JobSpec j = job_of(8, 16, 16);
        const SearchResult a = search_with(seven(), node8(), j, free, &checked_price);
        const SearchResult b = search_with(seven(), node8(), j, fixed, &checked_price);
        REQUIRE_FALSE(b.plans.empty());
        int64_t expect = 0;
        for (const RankedPlan& rp : a.plans) {
            expect += rp.plan.tp == 2 && rp.plan.pp == 2 && rp.plan.recompute == Recompute::none;
        }
        CHECK(static_cast<int64_t>(b.plans.size()) == expect);
        for (const RankedPlan& rp : b.plans) {
            CHECK(rp.plan.tp == 2);
            CHECK(rp.plan.pp == 2);
            CHECK(rp.plan.recompute == Recompute::none);
        }
        CHECK(b.rejection(RejectReason::tp_split).count == 0);  // tp 3.. never tried
        CHECK(fixed_flags(fixed.fixed) == "--tp 2 --pp 2 --recompute none");
        // A fixed layer map: only 3 + 4 on pp 2.
        SearchOptions map = fixed;
        map.fixed.layers = true;
        map.fixed.first_layers = 3;
        map.fixed.last_layers = 4;
        const SearchResult c = search_with(seven(), node8(), j, map, &checked_price);
        REQUIRE_FALSE(c.plans.empty());
        for (const RankedPlan& rp : c.plans) {
            CHECK(stage_layers(7, rp.plan) == StageLayers{3, 0, 4});
        }
    }
}
