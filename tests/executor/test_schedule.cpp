// Pipeline schedules and rank layout, checked without MPI: every rank's step list covers each
// (micro-batch, chunk) once forward and once backward, and the steps of all ranks, played with
// non-blocking sends and blocking receives, never deadlock.
#include "core/schedule.hpp"
#include "costmodel/pipeline.hpp"
#include "executor/schedule.hpp"

#include <map>
#include <set>
#include <string>
#include <tuple>

#include <doctest/doctest.h>

using namespace cleave;
using namespace cleave::executor;

namespace {

// Plays all ranks' steps; a step runs once its input exists (forward: the previous virtual
// stage's forward; backward: the next virtual stage's backward and its own forward). Returns
// false on a deadlock (no rank can make progress while steps remain).
bool plays_without_deadlock(Schedule s, int64_t pp, int64_t vpp, int64_t m) {
    std::vector<std::vector<Step>> steps;
    for (int64_t r = 0; r < pp; ++r) {
        steps.push_back(pipeline_steps(s, pp, vpp, r, m));
    }
    std::vector<size_t> next(static_cast<size_t>(pp), 0);
    std::set<std::tuple<bool, int64_t, int64_t>> done;  // (forward, mb, virtual stage)
    const int64_t stages = pp * vpp;
    for (bool progress = true; progress;) {
        progress = false;
        for (int64_t r = 0; r < pp; ++r) {
            auto& i = next[static_cast<size_t>(r)];
            if (i == steps[static_cast<size_t>(r)].size()) {
                continue;
            }
            const Step& st = steps[static_cast<size_t>(r)][i];
            const int64_t vs = st.chunk * pp + r;
            const bool ready =
                st.forward
                    ? (vs == 0 || done.count({true, st.microbatch, vs - 1}) == 1)
                    : (done.count({true, st.microbatch, vs}) == 1 &&
                       (vs == stages - 1 || done.count({false, st.microbatch, vs + 1}) == 1));
            if (ready) {
                done.insert({st.forward, st.microbatch, vs});
                ++i;
                progress = true;
            }
        }
    }
    return static_cast<int64_t>(done.size()) == 2 * m * stages;
}

void check_cover(Schedule s, int64_t pp, int64_t vpp, int64_t m) {
    for (int64_t r = 0; r < pp; ++r) {
        std::map<std::tuple<bool, int64_t, int64_t>, int> seen;
        for (const Step& st : pipeline_steps(s, pp, vpp, r, m)) {
            ++seen[{st.forward, st.microbatch, st.chunk}];
        }
        CHECK(static_cast<int64_t>(seen.size()) == 2 * m * vpp);
        for (const auto& [k, n] : seen) {
            CHECK(n == 1);
        }
    }
}

// Issue 17: the CUDA backend's pipeline transfers, played on one hardware queue per rank (CUDA_
// DEVICE_MAX_CONNECTIONS=1, which Megatron sets). cleave run issues, per step i: the wait for
// step i's posted receive, the post of step i+1's receive (step 0's is posted first), the
// compute, the send. The queue dispatches in issue order; an entry that cannot start holds every
// entry behind it: a wait until its receive is done, a receive or a send until the previous one
// on its channel (its stream) is done. Compute always finishes. A transfer is done once both its
// send and its receive run (NCCL's rendezvous, the worst case: messages above NCCL's buffer).
// Returns "" when everything completes and every channel delivers the tags its receiver expects.
struct QueueEntry {
    enum Kind { post, wait, compute, send } kind = compute;

    int64_t src = 0, dst = 0, k = 0;  // transfer: the k-th message on channel src -> dst
    int64_t tag = 0;
};

std::vector<QueueEntry> issue_order(Schedule s, int64_t pp, int64_t vpp, int64_t r, int64_t m) {
    const std::vector<Step> steps = pipeline_steps(s, pp, vpp, r, m);
    const int64_t stages = pp * vpp;
    std::map<std::pair<int64_t, int64_t>, int64_t> sent, posted;
    std::vector<QueueEntry> q;
    std::vector<QueueEntry> post_of(steps.size());
    const auto post = [&](size_t i) {
        const StepRecv rv = step_recv(steps[i], pp, vpp, r);
        if (rv.needed) {
            const int64_t tag =
                (steps[i].microbatch * stages + rv.stage) * 2 + (rv.gradient ? 1 : 0);
            post_of[i] = {QueueEntry::post, rv.peer, r, posted[{rv.peer, r}]++, tag};
            q.push_back(post_of[i]);
        }
    };
    post(0);
    for (size_t i = 0; i < steps.size(); ++i) {
        const Step& st = steps[i];
        if (step_recv(st, pp, vpp, r).needed) {
            QueueEntry w = post_of[i];
            w.kind = QueueEntry::wait;
            q.push_back(w);
        }
        if (i + 1 < steps.size()) {
            post(i + 1);
        }
        q.push_back({});
        const int64_t vs = st.chunk * pp + r;
        if (st.forward ? vs < stages - 1 : vs > 0) {
            const int64_t to_vs = st.forward ? vs + 1 : vs - 1;
            const int64_t dst = to_vs % pp;
            const int64_t tag = (st.microbatch * stages + to_vs) * 2 + (st.forward ? 0 : 1);
            q.push_back({QueueEntry::send, r, dst, sent[{r, dst}]++, tag});
        }
    }
    return q;
}

std::string play_one_queue(Schedule s, int64_t pp, int64_t vpp, int64_t m) {
    using Key = std::tuple<int64_t, int64_t, int64_t>;
    std::vector<std::vector<QueueEntry>> q;
    for (int64_t r = 0; r < pp; ++r) {
        q.push_back(issue_order(s, pp, vpp, r, m));
    }
    std::map<Key, int64_t> send_tag, recv_tag;  // running transfers, by (src, dst, k)
    std::set<Key> done;
    const auto prev_done = [&](const QueueEntry& e) {
        return e.k == 0 || done.count({e.src, e.dst, e.k - 1}) == 1;
    };
    std::vector<size_t> head(static_cast<size_t>(pp), 0);
    for (bool progress = true; progress;) {
        progress = false;
        for (size_t r = 0; r < q.size(); ++r) {
            while (head[r] < q[r].size()) {
                const QueueEntry& e = q[r][head[r]];
                const Key key{e.src, e.dst, e.k};
                const bool go = e.kind == QueueEntry::compute ||
                                (e.kind == QueueEntry::wait ? done.count(key) == 1 : prev_done(e));
                if (!go) {
                    break;
                }
                if (e.kind == QueueEntry::send) {
                    send_tag[key] = e.tag;
                } else if (e.kind == QueueEntry::post) {
                    recv_tag[key] = e.tag;
                }
                if (send_tag.count(key) == 1 && recv_tag.count(key) == 1 &&
                    done.insert(key).second) {
                    if (send_tag[key] != recv_tag[key]) {
                        return "tag mismatch";
                    }
                }
                ++head[r];
                progress = true;
            }
        }
    }
    for (size_t r = 0; r < q.size(); ++r) {
        if (head[r] < q[r].size()) {
            return "deadlock: rank " + std::to_string(r) + " held at entry " +
                   std::to_string(head[r]);
        }
    }
    return "";
}

}  // namespace

TEST_SUITE("executor") {
    TEST_CASE("rank_coords: TP innermost, then DP, then PP") {
        Plan p;
        p.tp = 2;
        p.dp = 3;
        p.pp = 2;
        // world 7 = (pp 1 * dp 3 + dp 0) * tp 2 + tp 1
        CHECK(rank_coords(p, 7) == RankCoords{1, 0, 1});
        CHECK(rank_coords(p, 4) == RankCoords{0, 2, 0});
        for (int64_t w = 0; w < 12; ++w) {
            CHECK(world_rank_of(p, rank_coords(p, w)) == w);
        }
    }

    TEST_CASE("pipeline_steps: 1f1b warm-up is pp - rank - 1 forwards") {
        // pp = 4, m = 6, rank 1: warm-up 2 (F0 F1), then F2 B0 F3 B1 F4 B2 F5 B3, then B4 B5.
        const auto st = pipeline_steps(Schedule::one_f_one_b, 4, 1, 1, 6);
        const std::vector<std::pair<bool, int64_t>> want = {{true, 0},
                                                            {true, 1},
                                                            {true, 2},
                                                            {false, 0},
                                                            {true, 3},
                                                            {false, 1},
                                                            {true, 4},
                                                            {false, 2},
                                                            {true, 5},
                                                            {false, 3},
                                                            {false, 4},
                                                            {false, 5}};
        REQUIRE(st.size() == want.size());
        for (size_t i = 0; i < st.size(); ++i) {
            CHECK(st[i].forward == want[i].first);
            CHECK(st[i].microbatch == want[i].second);
        }
    }

    TEST_CASE("pipeline_steps: gpipe runs every forward before any backward") {
        const auto st = pipeline_steps(Schedule::gpipe, 4, 1, 3, 4);
        REQUIRE(st.size() == 8);
        for (size_t i = 0; i < 4; ++i) {
            CHECK(st[i].forward);
            CHECK_FALSE(st[i + 4].forward);
        }
    }

    TEST_CASE("pipeline_steps: interleaved follows Megatron's chunk order") {
        // pp = 2, vpp = 2, m = 4, rank 0: warm-up (2-0-1)*2 + (2-1)*2 = 4 forwards:
        // k = 0..3 -> (mb 0, c0) (mb 1, c0) (mb 0, c1) (mb 1, c1).
        const auto st = pipeline_steps(Schedule::interleaved, 2, 2, 0, 4);
        CHECK(st[0] == Step{true, 0, 0});
        CHECK(st[1] == Step{true, 1, 0});
        CHECK(st[2] == Step{true, 0, 1});
        CHECK(st[3] == Step{true, 1, 1});
        CHECK(st[4] == Step{true, 2, 0});
        CHECK(st[5] == Step{false, 0, 1});  // first backward: last chunk, mb 0
    }

    TEST_CASE("pipeline_steps: every schedule covers each step once and cannot deadlock") {
        for (const int64_t pp : {1, 2, 3, 4}) {
            for (const int64_t m : {1, 2, 4, 8}) {
                CAPTURE(pp);
                CAPTURE(m);
                check_cover(Schedule::gpipe, pp, 1, m);
                check_cover(Schedule::one_f_one_b, pp, 1, m);
                CHECK(plays_without_deadlock(Schedule::gpipe, pp, 1, m));
                CHECK(plays_without_deadlock(Schedule::one_f_one_b, pp, 1, m));
                if (pp > 1 && m % pp == 0) {
                    for (const int64_t vpp : {2, 3}) {
                        CAPTURE(vpp);
                        check_cover(Schedule::interleaved, pp, vpp, m);
                        CHECK(plays_without_deadlock(Schedule::interleaved, pp, vpp, m));
                    }
                }
            }
        }
    }
}

TEST_SUITE("executor") {
    TEST_CASE("step_recv: what each step receives and from whom") {
        // pp 2, vpp 2, rank 1: chunk 0 = virtual stage 1, chunk 1 = virtual stage 3 (the last).
        const StepRecv f0 = step_recv(Step{true, 5, 0}, 2, 2, 1);
        CHECK(f0.needed);
        CHECK_FALSE(f0.gradient);
        CHECK(f0.peer == 0);  // virtual stage 0 runs on rank 0
        CHECK(f0.stage == 1);
        CHECK_FALSE(step_recv(Step{false, 5, 1}, 2, 2, 1).needed);  // last stage's backward
        const StepRecv b0 = step_recv(Step{false, 5, 0}, 2, 2, 1);
        CHECK(b0.gradient);
        CHECK(b0.peer == 0);  // virtual stage 2 runs on rank 0
        // Rank 0, chunk 0 = virtual stage 0: its forward receives nothing; chunk 1 (stage 2)
        // receives stage 1's activation from rank 1.
        CHECK_FALSE(step_recv(Step{true, 0, 0}, 2, 2, 0).needed);
        CHECK(step_recv(Step{true, 0, 1}, 2, 2, 0).peer == 1);
    }

    TEST_CASE("posted receives one step early: no deadlock on one hardware queue") {
        for (const int64_t pp : {2, 3, 4}) {
            for (const int64_t m : {1, 2, 3, 4, 8}) {
                CAPTURE(pp);
                CAPTURE(m);
                CHECK(play_one_queue(Schedule::gpipe, pp, 1, m) == "");
                CHECK(play_one_queue(Schedule::one_f_one_b, pp, 1, m) == "");
                if (m % pp == 0) {
                    for (const int64_t vpp : {2, 3}) {
                        CAPTURE(vpp);
                        CHECK(play_one_queue(Schedule::interleaved, pp, vpp, m) == "");
                    }
                }
            }
        }
    }
}

TEST_SUITE("one schedule") {
    TEST_CASE("executor steps hold what the cost model prices") {
        // The executor's steps come from the one schedule; the forwards it holds whose backward
        // has not run peak at the cost model's in-flight count x vpp.
        using cleave::Schedule;
        for (Schedule s : {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved}) {
            const int64_t v = s == Schedule::interleaved ? 2 : 1;
            for (int64_t m : {4, 6, 9}) {
                for (int64_t r = 0; r < 4; ++r) {
                    int64_t held = 0;
                    int64_t peak = 0;
                    for (const auto& st : cleave::executor::pipeline_steps(s, 4, v, r, m)) {
                        held += st.forward ? 1 : -1;
                        peak = std::max(peak, held);
                    }
                    cleave::Plan p;
                    p.pp = 4;
                    p.vpp = v;
                    p.schedule = s;
                    CAPTURE(m);
                    CAPTURE(r);
                    CHECK(static_cast<double>(peak) ==
                          doctest::Approx(cleave::inflight_microbatches(p, m, r) *
                                          static_cast<double>(v)));
                }
            }
        }
    }
}
