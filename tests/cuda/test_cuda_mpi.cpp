// The CUDA backend across ranks (run under mpirun, one GPU per rank): NCCL collectives against
// the CPU backend's MPI collectives on the same data, point-to-point traffic in the pattern that
// deadlocks on a single communicator (every rank sends before it receives, messages larger than
// NCCL's buffers), and the timeout (both neighbours wait for a message nobody sends). Inputs are
// small integers, so sums are exact. Skipped when there are fewer devices than ranks (NCCL does
// not put two ranks of one communicator on one GPU).
#include "executor/cpu/cpu_backend.hpp"
#include "executor/cuda/cuda_backend.hpp"
#include "tests/cuda/cuda_fixture.hpp"

#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <mpi.h>

using namespace cleave;
using namespace cleave::executor;
using namespace cleave::executor::test;

namespace {

int world_size() {
    ensure_mpi();
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

std::vector<float> download(Backend& be, View v) {
    std::vector<float> out(static_cast<size_t>(v.size));
    be.download(out, v);
    return out;
}

}  // namespace

namespace cleave::executor::test {

// Needs at least 2 ranks and one GPU per rank (NCCL does not put two ranks of one communicator
// on one GPU).
bool devices_usable(std::string& why) {
    const int ranks = world_size();
    const CudaProbe probe = probe_cuda_devices();
    if (probe.device_count >= ranks && ranks >= 2) {
        return true;
    }
    why = "needs at least 2 ranks and one GPU per rank (" + std::to_string(ranks) + " ranks; " +
          probe.message + ")";
    return false;
}

}  // namespace cleave::executor::test

TEST_SUITE("cuda") {

    TEST_CASE("cuda mpi: collectives on per-group communicators match MPI on the CPU") {
        Fixture f;
        const int rank = f.gpu().world_rank();
        Group g[2];
        Group pairs[2];
        f.both([&](Backend& be, Side s) {
            g[static_cast<int>(s)] = be.create_group(0, rank, "world");
            pairs[static_cast<int>(s)] = be.create_group(rank / 2, rank, "pairs");
        });
        const int n = f.gpu().group_size(g[1]);
        const Pair x = f.tensor(ints(1000, 100 + rank));
        const Pair y = f.tensor(ints(1000, 200 + rank));
        const Pair z = f.tensor(ints(64, 300 + rank));
        const Pair gathered = f.zeros(64 * n);
        const Pair big = f.tensor(ints(1000 * n, 400 + rank));
        const Pair part = f.zeros(1000);
        f.both([&](Backend& be, Side s) {
            const Group w = g[static_cast<int>(s)];
            be.all_reduce(w, x(s), ReduceOp::sum);
            be.all_reduce(pairs[static_cast<int>(s)], y(s), ReduceOp::max);
            be.all_gather(w, z(s), gathered(s));
            be.reduce_scatter(w, big(s), part(s));
            be.broadcast(w, z(s), n - 1);
            be.synchronize();
        });
        f.expect_equal(x, "all_reduce sum");
        f.expect_equal(y, "all_reduce max on pairs");
        f.expect_equal(gathered, "all_gather");
        f.expect_equal(part, "reduce_scatter");
        f.expect_equal(z, "broadcast");
    }

    TEST_CASE("cuda mpi: all_to_all_v with uneven counts matches MPI_Alltoallv on the CPU") {
        // Issue 16: rank r sends 10 (2r + p + 1) elements to rank p (so p receives from r what
        // it expects, 10 (2r + p + 1)); grouped ncclSend / ncclRecv against MPI_Ialltoallv.
        Fixture f;
        const int rank = f.gpu().world_rank();
        Group g[2];
        f.both(
            [&](Backend& be, Side s) { g[static_cast<int>(s)] = be.create_group(0, rank, "ep"); });
        const int n = f.gpu().group_size(g[1]);
        std::vector<int64_t> sent(static_cast<size_t>(n));
        std::vector<int64_t> received(static_cast<size_t>(n));
        int64_t out = 0;
        int64_t in = 0;
        for (int p = 0; p < n; ++p) {
            sent[static_cast<size_t>(p)] = 10 * (2 * rank + p + 1);
            received[static_cast<size_t>(p)] = 10 * (2 * p + rank + 1);
            out += sent[static_cast<size_t>(p)];
            in += received[static_cast<size_t>(p)];
        }
        const Pair x = f.tensor(ints(out, 900 + rank));
        const Pair y = f.zeros(in);
        f.both([&](Backend& be, Side s) {
            be.all_to_all_v(g[static_cast<int>(s)], x(s), sent, y(s), received);
            be.synchronize();
        });
        f.expect_equal(y, "all_to_all_v");
    }

    TEST_CASE("cuda mpi: overlapped bucket all-reduces on a dp group equal all_reduce") {
        // Issue 17: three buckets started on the "dp" group's second communicator and stream,
        // with a GEMM and a send/recv issued between them, then one wait; the sums must equal
        // the CPU's MPI all-reduce of the same data.
        Fixture f;
        const int rank = f.gpu().world_rank();
        Group g[2];
        f.both(
            [&](Backend& be, Side s) { g[static_cast<int>(s)] = be.create_group(0, rank, "dp"); });
        const Pair grads = f.tensor(ints(3000, 700 + rank));
        const Pair a = f.tensor(ints(64 * 64, 800 + rank));
        const Pair c = f.zeros(64 * 64);
        f.both([&](Backend& be, Side s) {
            const Group dp = g[static_cast<int>(s)];
            be.all_reduce_start(dp, grads(s).slice(2000, 1000));
            be.gemm(Trans::no, Trans::no, 64, 64, 64, 1.0f, a(s), a(s), 0.0f, c(s));
            be.all_reduce_start(dp, grads(s).slice(0, 1500));
            be.all_reduce_start(dp, grads(s).slice(1500, 500));
            (void)be.all_reduce_wait();
        });
        f.expect_equal(grads, "bucketed all_reduce");
        f.expect_equal(c, "gemm between buckets");
    }

    TEST_CASE("cuda mpi: every rank sends to both ring neighbours before receiving") {
        ensure_mpi();
        auto be = make_cuda_backend({30.0});
        const int rank = be->world_rank();
        const Group g = be->create_group(0, rank, "pp");
        const int n = be->group_size(g);
        const int next = (rank + 1) % n;
        const int prev = (rank + n - 1) % n;
        const int64_t count = int64_t{4} << 20;  // 16 MiB: far beyond NCCL's staging buffers
        Buffer a(*be, count);
        Buffer b(*be, count);
        be->upload(a, ints(count, 500 + rank));
        be->upload(b, ints(count, 600 + rank));
        be->send(g, a, next, 1);  // "activation" forward
        be->send(g, b, prev, 2);  // "gradient" backward
        be->send(g, b, next, 3);  // a second message on the same channel
        be->fill(a, 0.0f);        // staged: must not change what was sent
        Buffer from_prev(*be, count);
        Buffer from_next(*be, count);
        Buffer from_prev2(*be, count);
        be->recv(g, from_prev, prev, 1);
        be->recv(g, from_next, next, 2);
        be->recv(g, from_prev2, prev, 3);
        be->synchronize();
        CHECK(download(*be, from_prev) == ints(count, 500 + prev));
        CHECK(download(*be, from_next) == ints(count, 600 + next));
        CHECK(download(*be, from_prev2) == ints(count, 600 + prev));
    }

    TEST_CASE("cuda mpi: a receive nobody sends to times out, names the operation, aborts NCCL") {
        ensure_mpi();
        auto be = make_cuda_backend({1.0});
        const int rank = be->world_rank();
        const Group g = be->create_group(0, rank, "pp");
        const int prev = (rank + be->group_size(g) - 1) % be->group_size(g);
        Buffer x(*be, 16);
        CHECK_THROWS_WITH_AS(
            be->recv(g, x, prev, 7), doctest::Contains("recv on group 'pp'"), CommTimeout);
        CHECK_THROWS_AS(be->all_reduce(g, x, ReduceOp::sum), BackendError);  // aborted
    }

    TEST_CASE("cuda mpi: posted receives complete on the device, whatever the host issues") {
        // Issue 17: both neighbours' receives posted before any send (as the pipeline posts the
        // next step's receive before it computes), then the sends, a GEMM, and the waits: the
        // compute stream waits on the device; data must arrive intact (16 MiB, above NCCL's
        // buffers, so each transfer needs its receive running).
        ensure_mpi();
        auto be = make_cuda_backend({30.0});
        const int rank = be->world_rank();
        const Group g = be->create_group(0, rank, "pp");
        const int n = be->group_size(g);
        const int next = (rank + 1) % n;
        const int prev = (rank + n - 1) % n;
        const int64_t count = int64_t{4} << 20;
        Buffer from_prev(*be, count);
        Buffer from_next(*be, count);
        const PendingRecv rp = be->recv_start(g, from_prev, prev, 1);
        const PendingRecv rn = be->recv_start(g, from_next, next, 2);
        Buffer a(*be, count);
        Buffer b(*be, count);
        be->upload(a, ints(count, 500 + rank));
        be->upload(b, ints(count, 600 + rank));
        be->send(g, a, next, 1);
        be->send(g, b, prev, 2);
        Buffer m(*be, 64 * 64);
        Buffer c(*be, 64 * 64);
        be->upload(m, ints(64 * 64, 7));
        be->gemm(Trans::no, Trans::no, 64, 64, 64, 1.0f, m, m, 0.0f, c);
        be->recv_wait(rp);
        be->recv_wait(rn);
        be->axpy(1.0f, from_prev, from_prev);  // compute after the wait sees the data: x 2
        be->synchronize();
        std::vector<float> want = ints(count, 500 + prev);
        for (float& x : want) {
            x *= 2.0f;
        }
        CHECK(download(*be, from_prev) == want);
        CHECK(download(*be, from_next) == ints(count, 600 + next));
    }

    TEST_CASE("cuda mpi: a posted receive's wrong tag or missing message shows at the host wait") {
        ensure_mpi();
        {
            auto be = make_cuda_backend({30.0});
            const int rank = be->world_rank();
            const Group g = be->create_group(0, rank, "pp");
            const int n = be->group_size(g);
            Buffer x(*be, 16);
            Buffer y(*be, 16);
            const PendingRecv r = be->recv_start(g, y, (rank + n - 1) % n, 5);
            be->send(g, x, (rank + 1) % n, 6);
            be->recv_wait(r);  // no host wait: nothing to report yet
            CHECK_THROWS_WITH_AS(be->synchronize(), doctest::Contains("has tag 6"), BackendError);
        }
        auto be = make_cuda_backend({1.0});
        const int rank = be->world_rank();
        const Group g = be->create_group(0, rank, "pp");
        const int prev = (rank + be->group_size(g) - 1) % be->group_size(g);
        Buffer x(*be, 16);
        be->recv_wait(be->recv_start(g, x, prev, 9));
        const std::string named =
            "waiting for a posted recv: from rank " + std::to_string(prev) + " tag 9";
        CHECK_THROWS_WITH_AS(be->synchronize(), doctest::Contains(named.c_str()), CommTimeout);
    }

}  // TEST_SUITE
