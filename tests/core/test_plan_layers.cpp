// The plan's layer map, Megatron's layout notation and the one rule table (core/plan.hpp).
#include "core/errors.hpp"
#include "core/plan.hpp"
#include "core/schedule.hpp"

#include <doctest/doctest.h>

using namespace cleave;

namespace {

ModelSpec model_of(int64_t layers) {
    ModelSpec m;
    m.layers = layers;
    m.hidden = 64;
    m.heads = 8;
    m.kv_heads = 8;
    m.ffn_hidden = 256;
    m.vocab = 128;
    return m;
}

JobSpec job_of(int64_t gpus, int64_t gbs) {
    JobSpec j;
    j.gpus = gpus;
    j.global_batch = gbs;
    j.seq_len = 16;
    return j;
}

Plan pipeline(int64_t pp, int64_t vpp, int64_t first, int64_t last) {
    Plan p;
    p.pp = pp;
    p.vpp = vpp;
    p.schedule = vpp > 1 ? Schedule::interleaved : Schedule::one_f_one_b;
    p.first_layers = first;
    p.last_layers = last;
    return p;
}

}  // namespace

TEST_SUITE("plan layers") {
    TEST_CASE("stage_layers: set ends, the rest shared evenly") {
        // Llama 3 405B, 126 layers on pp 16 with 7 on the first and last: (126-14)/14 = 8.
        CHECK(stage_layers(126, pipeline(16, 1, 7, 7)) == StageLayers{7, 8, 7});
        // Only the first set: (7 - 3) / 1 = 4 on the last of pp 2.
        CHECK(stage_layers(7, pipeline(2, 1, 3, 0)) == StageLayers{3, 0, 4});
        // Even: 96 / 8 = 12.
        CHECK(stage_layers(96, pipeline(8, 1, 0, 0)) == StageLayers{12, 12, 12});
        CHECK(layers_on_stage(126, pipeline(16, 1, 7, 7), 15) == 7);
        CHECK(layers_on_stage(126, pipeline(16, 1, 7, 7), 9) == 8);
        CHECK(uneven_stages(126, pipeline(16, 1, 7, 7)));
        CHECK_FALSE(uneven_stages(96, pipeline(8, 1, 0, 0)));
    }

    TEST_CASE("chunk_layers: the embedding's and the loss's chunk one short") {
        // 126 layers, pp 8, vpp 8, 15 / 16 / 15: stage 0 chunk 0 holds 15 - 7*2 = 1, the
        // others 2; the last stage's last chunk 1.
        const Plan p = pipeline(8, 8, 15, 15);
        CHECK(chunk_layers(126, p, 0, 0) == 1);
        CHECK(chunk_layers(126, p, 0, 1) == 2);
        CHECK(chunk_layers(126, p, 7, 7) == 1);
        CHECK(chunk_layers(126, p, 7, 0) == 2);
        CHECK(chunk_layers(126, p, 3, 5) == 2);
        // Virtual stage 1 (stage 1, chunk 0) starts after stage 0 chunk 0's single layer;
        // stage 0 chunk 1 (virtual stage 8) after 1 + 7*2 = 15 layers.
        CHECK(chunk_first_layer(126, p, 1, 0) == 1);
        CHECK(chunk_first_layer(126, p, 0, 1) == 15);
        // The last chunk of the last stage starts at 126 - 1 = 125.
        CHECK(chunk_first_layer(126, p, 7, 7) == 125);
    }

    TEST_CASE("chunk_first_layer: the closed form equals the running sum over virtual stages") {
        // The reference: layers run in virtual-stage order c * pp + s, so chunk c of stage s
        // starts after every chunk before it in that order.
        const auto reference = [](int64_t layers, const Plan& p, int64_t s, int64_t c) {
            int64_t first = 0;
            for (int64_t cc = 0; cc <= c; ++cc) {
                for (int64_t ss = 0; ss < p.pp && (cc < c || ss < s); ++ss) {
                    first += chunk_layers(layers, p, ss, cc);
                }
            }
            return first;
        };
        int64_t checked = 0;
        for (const int64_t layers : {7, 24, 61, 96, 126}) {
            for (const int64_t pp : {1, 2, 3, 4, 8, 16}) {
                for (const int64_t vpp : {1, 2, 3, 4}) {
                    for (const int64_t ends : {0, 1, 3}) {
                        Plan p;
                        p.pp = pp;
                        p.vpp = vpp;
                        p.first_layers = pp > 1 ? ends : 0;
                        p.last_layers = pp > 1 ? ends : 0;
                        for (int64_t s = 0; s < pp; ++s) {
                            for (int64_t c = 0; c < vpp; ++c) {
                                CAPTURE(layers);
                                CAPTURE(pp);
                                CAPTURE(vpp);
                                CAPTURE(ends);
                                CAPTURE(s);
                                CAPTURE(c);
                                REQUIRE(chunk_first_layer(layers, p, s, c) == reference(layers, p, s, c));
                                ++checked;
                            }
                        }
                    }
                }
            }
        }
        CHECK(checked == 5 * (1 + 2 + 3 + 4 + 8 + 16) * (1 + 2 + 3 + 4) * 3);
    }

    TEST_CASE("layout: Megatron notation in and out") {
        const Plan p = pipeline(16, 1, 7, 7);
        CHECK(to_layout(126, p) ==
              "Et*7|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*7L");
        Plan q;
        q.pp = 16;
        apply_layout("Et*7|(t*8|)*14t*7L", 126, q);
        CHECK(q.first_layers == 7);
        CHECK(q.last_layers == 7);
        CHECK(q.vpp == 1);
        // pp 8 x vpp 8: 64 virtual stages, E and L in the first and last.
        Plan r;
        r.pp = 8;
        apply_layout("Et|(tt|)*62tL", 126, r);
        CHECK(r.vpp == 8);
        CHECK(r.first_layers == 15);
        CHECK(r.last_layers == 15);
        // Round trip.
        Plan back;
        back.pp = 8;
        apply_layout(to_layout(126, r), 126, back);
        CHECK(back.first_layers == 15);
        CHECK(back.vpp == 8);
        // Even maps come back as the default (0, 0).
        Plan even;
        even.pp = 2;
        apply_layout("Ett|ttL", 4, even);
        CHECK(even.first_layers == 0);
        CHECK(even.last_layers == 0);
        Plan bad;
        bad.pp = 2;
        CHECK_THROWS_AS(apply_layout("Ett|tt", 4, bad), ConfigError);      // no L
        CHECK_THROWS_AS(apply_layout("Ett|tmL", 4, bad), ConfigError);     // MTP not modelled
        CHECK_THROWS_AS(apply_layout("Et|t|tL", 3, bad), ConfigError);     // 3 not a multiple of 2
        CHECK_THROWS_AS(apply_layout("Ett|tttL", 4, bad), ConfigError);    // 5 layers, not 4
        CHECK_THROWS_AS(apply_layout("E(tt|)*ttL", 4, bad), ConfigError);  // '*' without count
    }

    TEST_CASE("rule table: every rule named, each rejection names its rule") {
        for (std::size_t i = 0; i < rule_count; ++i) {
            CHECK(std::string(rule_info(static_cast<Rule>(i)).name).size() > 2);
            CHECK(std::string(rule_info(static_cast<Rule>(i)).reason).size() > 10);
        }
        CHECK(std::string(rule_info(Rule::stage_split).name) == "stage_split");
        CHECK(std::string(rule_info(Rule::cp_seq).name) == "cp_seq");
        const ModelSpec m = model_of(7);
        // 7 layers on pp 2, no map: stage_split.
        Plan p = pipeline(2, 1, 0, 0);
        p.dp = 1;
        auto v = plan_violations(m, job_of(2, 4), p);
        REQUIRE(v.size() == 1);
        CHECK(v[0].rule == Rule::stage_split);
        // 3 + 4: accepted.
        p.first_layers = 3;
        CHECK(plan_violations(m, job_of(2, 4), p).empty());
        // tp 3: three heads rules break, each named.
        p.tp = 3;
        v = plan_violations(m, job_of(6, 4), p);
        REQUIRE(v.size() == 3);
        CHECK(v[0].rule == Rule::tp_heads);
        CHECK(v[1].rule == Rule::tp_kv_heads);
        CHECK(v[2].rule == Rule::tp_ffn);
        CHECK(v[0].message == "tp=3 does not divide heads=8");
        // vpp 2 over 3 / 4 layers: chunks 1 + 2 and 2 + 2, accepted; vpp 3: 1 + 1 + 1 and
        // 2 + 1 + 1, accepted (a layout runs it); vpp 5 over 3 layers leaves two chunks of
        // stage 0 empty, only the embedding's may be: vpp_chunks. gbs 4 on dp 1, mbs 1: m = 4.
        Plan q = pipeline(2, 2, 3, 0);
        CHECK(plan_violations(m, job_of(2, 4), q).empty());
        q.vpp = 3;
        CHECK(plan_violations(m, job_of(2, 4), q).empty());
        q.vpp = 5;
        v = plan_violations(m, job_of(2, 4), q);
        REQUIRE(v.size() == 1);
        CHECK(v[0].rule == Rule::vpp_chunks);
    }
}

TEST_SUITE("one schedule") {
    TEST_CASE("expert grid: etp x ep folds over tp x cp x dp") {
        // 8 experts, 4 layers, 16 GPUs as tp 2 x dp 8. etp unset = tp 2: ep 8 needs ep | dp*cp = 8
        // (2 x 8 = 16 = tp*dp), edp = 16 / 16 = 1; ep 16 breaks (16 does not divide 8).
        ModelSpec m = model_of(4);
        m.moe.experts = 16;
        m.moe.top_k = 2;
        m.moe.expert_ffn_hidden = 128;
        Plan p;
        p.tp = 2;
        p.dp = 8;
        p.ep = 8;
        CHECK(expert_tp(p) == 2);
        CHECK(expert_dp(p) == 1);
        CHECK(plan_violations(m, job_of(16, 16), p).empty());
        p.ep = 16;
        auto v = plan_violations(m, job_of(16, 16), p);
        REQUIRE(v.size() == 1);
        CHECK(v[0].rule == Rule::ep_dp);
        CHECK(v[0].message == "ep=16 does not divide dp*cp=8");
        // etp 1 (Megatron-Bridge's Qwen3 / DeepSeek recipes): ep 16 x etp 1 = 16 = tp*dp, edp 1.
        p.etp = 1;
        CHECK(expert_dp(p) == 1);
        CHECK(plan_violations(m, job_of(16, 16), p).empty());
        CHECK(to_string(p).ends_with(" etp1"));
        // ep 4 x etp 1: edp = 16 / 4 = 4.
        p.ep = 4;
        CHECK(expert_dp(p) == 4);
        // ep 16 x etp 2 = 32 does not divide 16.
        p.ep = 16;
        p.etp = 2;
        v = plan_violations(m, job_of(16, 16), p);
        REQUIRE(v.size() == 1);
        CHECK(v[0].message == "ep=16 x etp=2 does not divide tp*cp*dp=16");
    }

    TEST_CASE("peak in flight: closed form equals the op order's peak") {
        // Forwards whose backward has not run, at their most, walking each rank's ops.
        for (SimSchedule s : {SimSchedule::gpipe,
                              SimSchedule::one_f_one_b,
                              SimSchedule::interleaved,
                              SimSchedule::zb_h1}) {
            for (int64_t p : {1, 2, 4}) {
                for (int64_t v : {1, 2, 3}) {
                    if (v > 1 && s != SimSchedule::interleaved) {
                        continue;
                    }
                    // m not a multiple of p too: Megatron's groups of N (interleave_group).
                    for (int64_t m : {p, p + 1, 2 * p, 2 * p + 1, 3 * p}) {
                        for (int64_t r = 0; r < p; ++r) {
                            std::vector<SimOp> ops;
                            append_rank_ops(s, p, v, m, r, ops);
                            int64_t held = 0;
                            int64_t peak = 0;
                            for (const SimOp& op : ops) {
                                held += op.kind == OpKind::forward    ? 1
                                        : op.kind == OpKind::backward ? -1
                                                                      : 0;
                                peak = std::max(peak, held);
                            }
                            CHECK(peak == peak_inflight_chunks(s, p, v, m, r));
                        }
                    }
                }
            }
        }
    }

    TEST_CASE("interleaved micro-batch groups: m not a multiple of p") {
        // p 8: m 16 -> groups of 8; m 12 -> 12 % 8 = 4 < 8, 12 % 9..11 < 8, so 12; m 20 -> 10.
        CHECK(interleave_group(8, 16) == 8);
        CHECK(interleave_group(8, 12) == 12);
        CHECK(interleave_group(8, 20) == 10);
        // p 2, v 2, m 3: one group of 3; the table runs chunk 0 for mb 0..2, then chunk 1.
        // Rank 1 warms up min(0 + 1 * 3, 6) = 3 forwards: (0,0) (1,0) (2,0).
        std::vector<SimOp> ops;
        append_rank_ops(SimSchedule::interleaved, 2, 2, 3, 1, ops);
        REQUIRE(ops.size() == 12);
        CHECK(ops[0] == SimOp{0, 0, OpKind::forward});
        CHECK(ops[2] == SimOp{2, 0, OpKind::forward});
        CHECK(ops[3] == SimOp{0, 1, OpKind::forward});
        CHECK(ops[4] == SimOp{0, 1, OpKind::backward});  // backward walks chunks in reverse
        CHECK(warmup_forwards(SimSchedule::interleaved, 2, 2, 3, 1) == 3);
    }

    TEST_CASE("interleaved m == p follows Megatron-Core today") {
        // p 4, v 2, m 4: rank 0 warms up min(2*3 + 4, 8) = 8 (every forward), rank 3
        // min(0 + 4, 8) = 4, so it holds 5 chunks at its peak, not 8.
        CHECK(warmup_forwards(SimSchedule::interleaved, 4, 2, 4, 0) == 8);
        CHECK(warmup_forwards(SimSchedule::interleaved, 4, 2, 4, 3) == 4);
        CHECK(peak_inflight_chunks(SimSchedule::interleaved, 4, 2, 4, 3) == 5);
    }
}
