#include "simulator/simulate.hpp"

#include <doctest/doctest.h>

using namespace cleave;

namespace {

// GPT, 8 layers, h = 4096, ffn 4h: 12 h^2 + 13 h = 201,379,840 parameters per layer.
ModelSpec gpt_8_layers() {
    ModelSpec m;
    m.name = "gpt-8l";
    m.layers = 8;
    m.hidden = 4096;
    m.heads = 32;
    m.kv_heads = 32;
    m.ffn_hidden = 16384;
    m.vocab = 51200;
    m.seq_len = 2048;
    return m;
}

StageCost stage(double fwd, double bwd) {
    StageCost c;
    c.layers = 2;
    c.fwd = seconds(fwd);
    c.bwd = seconds(bwd);
    c.fwd_comm = seconds(0.4);
    c.dp_grad_sync = seconds(2.0);  // exposed part only: not used when dp_reduce is set
    c.dp_reduce = seconds(6.0);
    c.optimizer = seconds(1.0);
    return c;
}

}  // namespace

TEST_SUITE("simulator") {
    TEST_CASE("adapter: splits stage costs into chunks, edges on their chunks, DP into buckets") {
        const ModelSpec model = gpt_8_layers();
        JobSpec job;
        job.gpus = 8;
        job.global_batch = 8;
        job.seq_len = 2048;
        Plan plan;
        plan.pp = 4;
        plan.tp = 2;
        plan.vpp = 2;
        plan.schedule = Schedule::interleaved;
        Estimate est;
        est.stage = {stage(5.0, 10.0), stage(4.0, 8.0), stage(7.0, 13.0)};
        est.pp_p2p = seconds(0.25);
        const SimInput in = make_sim_input(model, ClusterSpec{}, job, plan, est);
        CHECK(in.schedule == SimSchedule::interleaved);
        CHECK(in.microbatches == 8);  // 8 / (mbs 1 * dp 1)
        REQUIRE(in.ranks.size() == 4);
        // A layer costs 4/2 = 2 s forward, 4 s backward (middle stage). Rank 0's 1 s forward and
        // 2 s backward beyond its layers (embedding) go on chunk 0; rank 3's 3 s and 5 s
        // (output layer + loss) on chunk 1.
        CHECK(in.ranks[0].chunks[0].fwd.value() == 3.0);
        CHECK(in.ranks[0].chunks[1].fwd.value() == 2.0);
        CHECK(in.ranks[0].chunks[0].bwd.value() == 6.0);
        CHECK(in.ranks[0].chunks[1].bwd.value() == 4.0);
        CHECK(in.ranks[1].chunks[0].fwd.value() == 2.0);
        CHECK(in.ranks[1].chunks[1].bwd.value() == 4.0);
        CHECK(in.ranks[3].chunks[0].fwd.value() == 2.0);
        CHECK(in.ranks[3].chunks[1].fwd.value() == 5.0);
        CHECK(in.ranks[3].chunks[1].bwd.value() == 9.0);
        CHECK(in.ranks[2].chunks[0].fwd_comm.value() == 0.2);
        CHECK(in.ranks[2].p2p_next.value() == 0.25);
        CHECK(in.ranks[2].optimizer.value() == 1.0);
        // Rank 1 holds 2 layers = 402,759,680 parameters, 201,379,840 per GPU at tp 2,
        // 100,689,920 per chunk: ceil(100.7M / 40M) = 3 buckets per chunk, 6 in all, each
        // 6 s / 6 = 1 s. Buckets fill in backward order: chunk 1 first, its first bucket
        // ready after a third of the chunk's last backward.
        const auto& b = in.ranks[1].dp_buckets;
        REQUIRE(b.size() == 6);
        CHECK(b[0].chunk == 1);
        CHECK(b[0].ready_fraction == doctest::Approx(1.0 / 3.0));
        CHECK(b[2].ready_fraction == 1.0);
        CHECK(b[3].chunk == 0);
        CHECK(b[0].time.value() == doctest::Approx(1.0));
        // The one-call form is make_sim_input + simulate.
        const auto r = simulate(model, ClusterSpec{}, job, plan, est);
        CHECK(r == simulate(in));
        CHECK(r.iteration_time.value() > 0.0);
    }

    TEST_CASE("adapter: 1F1B keeps one chunk, without dp_reduce the exposed dp_grad_sync is used") {
        const ModelSpec model = gpt_8_layers();
        JobSpec job;
        job.gpus = 2;
        job.global_batch = 4;
        job.seq_len = 2048;
        Plan plan;
        plan.pp = 2;
        plan.vpp = 2;  // ignored unless the schedule is interleaved
        Estimate est;
        est.stage = {stage(5.0, 10.0), stage(5.0, 10.0), stage(7.0, 13.0)};
        est.stage[0].dp_reduce = seconds(0.0);
        const SimInput in = make_sim_input(model, ClusterSpec{}, job, plan, est);
        CHECK(in.schedule == SimSchedule::one_f_one_b);
        REQUIRE(in.ranks[0].chunks.size() == 1);
        // pp = 2: no middle stage to price a layer, so the whole stage is one chunk.
        CHECK(in.ranks[1].chunks[0].fwd.value() == 7.0);
        double dp0 = 0.0;
        for (const auto& bucket : in.ranks[0].dp_buckets) {
            dp0 += bucket.time.value();
        }
        CHECK(dp0 == doctest::Approx(2.0));
    }
}
