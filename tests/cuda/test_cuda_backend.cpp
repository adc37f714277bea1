// The CUDA backend against the CPU reference: identity, memory, copies, GEMM, element-wise ops,
// embeddings and communication on a group of one. Inputs are small integers, so every result is
// exact and the comparison is exact.
#include "executor/cuda/cuda_backend.hpp"
#include "executor/registry.hpp"
#include "tests/cuda/cuda_fixture.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <doctest/doctest.h>

using namespace cleave;
using namespace cleave::executor;
using namespace cleave::executor::test;

namespace cleave::executor::test {

// test_cuda needs one device.
bool devices_usable(std::string& why) {
    const CudaProbe probe = probe_cuda_devices();
    why = probe.message;
    return probe.device_count > 0;
}

}  // namespace cleave::executor::test

// Cases that need no device; they are excluded where a device is usable (cuda_main.cpp).
TEST_SUITE("cuda-nodevice") {

    TEST_CASE("cuda module: without a device, --backend cuda loads the module and fails clearly") {
        // Through the registry, as `cleave run --backend cuda` does: the module is found in the
        // build tree and dlopen()ed; the backend then finds no device.
        ensure_mpi();
        CHECK_THROWS_WITH_AS((void)make_backend("cuda", {}),
                             doctest::Contains("no CUDA device: cudaGetDeviceCount returned"),
                             BackendError);
    }
}

TEST_SUITE("cuda") {

    TEST_CASE("cuda backend: identity and device binding") {
        Fixture f;
        CHECK(f.gpu().name() == "cuda");
        CHECK(f.gpu().device_count() == probe_cuda_devices().device_count);
        CHECK_FALSE(f.gpu().device_name().empty());
        CHECK(f.gpu().world_size() == 1);
        CHECK(f.gpu().world_rank() == 0);
    }

    TEST_CASE("cuda backend: allocations are zero-filled and tracked, peak is a high-water mark") {
        Fixture f;
        Backend& be = f.gpu();
        const int64_t base = be.bytes_in_use();
        View a = be.alloc(1000);
        View b = be.alloc(24);
        CHECK(be.bytes_in_use() == base + 1024 * 4);
        CHECK(be.peak_bytes() >= base + 1024 * 4);
        std::vector<float> host(1000, 1.0f);
        be.download(host, a);
        CHECK(std::all_of(host.begin(), host.end(), [](float x) { return x == 0.0f; }));
        be.free(a);
        CHECK(be.bytes_in_use() == base + 24 * 4);
        CHECK(be.peak_bytes() >= base + 1024 * 4);
        be.reset_peak();
        CHECK(be.peak_bytes() >= base + 24 * 4);
        be.free(b);
        be.free(View{});  // ignored
        CHECK(be.bytes_in_use() == base);
        CHECK(be.alloc(0).data == nullptr);
    }

    TEST_CASE("cuda backend: upload, download, copy and fill round-trip exactly") {
        Fixture f;
        const Pair x = f.tensor(ints(777, 1));
        const Pair y = f.zeros(777);
        f.both([&](Backend& be, Side s) { be.copy(y(s), x(s)); });
        f.expect_equal(y, "copy");
        const Pair z = f.tensor(ints(333, 2));
        f.both([&](Backend& be, Side s) {
            be.fill(z(s).slice(10, 100), -2.5f);
            be.fill(z(s).slice(200, 50), 0.0f);
        });
        f.expect_equal(z, "fill");
        const auto [c, g] = f.read(z);
        CHECK(g[10] == -2.5f);
        CHECK(g[109] == -2.5f);
        CHECK(g[200] == 0.0f);
    }

    TEST_CASE("cuda backend: gemm matches the CPU for every transpose combination") {
        Fixture f;
        const int64_t m = 5;
        const int64_t n = 7;
        const int64_t k = 3;
        const Pair a = f.tensor(ints(m * k, 3));
        const Pair b = f.tensor(ints(k * n, 4));
        for (const Trans ta : {Trans::no, Trans::yes}) {
            for (const Trans tb : {Trans::no, Trans::yes}) {
                CAPTURE(static_cast<int>(ta));
                CAPTURE(static_cast<int>(tb));
                // beta = 0 must overwrite even a NaN in C.
                const Pair c =
                    f.tensor(std::vector<float>(m * n, std::numeric_limits<float>::quiet_NaN()));
                f.both([&](Backend& be, Side s) {
                    be.gemm(ta, tb, m, n, k, 2.0f, a(s), b(s), 0.0f, c(s));
                });
                f.expect_equal(c, "gemm beta=0");
                const Pair d = f.tensor(ints(m * n, 5));
                f.both([&](Backend& be, Side s) {
                    be.gemm(ta, tb, m, n, k, 1.0f, a(s), b(s), 0.5f, d(s));
                });
                f.expect_equal(d, "gemm beta=0.5");
            }
        }
        // A worked value: [1 2; 3 4] * [5; 6] = [17; 39].
        const Pair p = f.tensor({1, 2, 3, 4});
        const Pair q = f.tensor({5, 6});
        const Pair r = f.zeros(2);
        f.gpu().gemm(
            Trans::no, Trans::no, 2, 1, 2, 1.0f, p(Side::gpu), q(Side::gpu), 0.0f, r(Side::gpu));
        std::vector<float> out(2);
        f.gpu().download(out, r(Side::gpu));
        CHECK(out == std::vector<float>{17, 39});
    }

    TEST_CASE("cuda backend: axpy, scale, add_bias and bias_grad match exactly") {
        Fixture f;
        const int64_t rows = 9;
        const int64_t cols = 300;  // more columns than one thread block
        const Pair x = f.tensor(ints(rows * cols, 6));
        const Pair y = f.tensor(ints(rows * cols, 7));
        const Pair bias = f.tensor(ints(cols, 8));
        const Pair dbias = f.tensor(ints(cols, 9));
        f.both([&](Backend& be, Side s) {
            be.axpy(-0.5f, x(s), y(s));
            be.scale(x(s), 0.25f);
            be.add_bias(y(s), rows, cols, bias(s));
            be.bias_grad(x(s), rows, cols, dbias(s));
        });
        f.expect_equal(x, "scale");
        f.expect_equal(y, "axpy + add_bias");
        f.expect_equal(dbias, "bias_grad");
    }

    TEST_CASE("cuda backend: vocab-parallel embedding forward and backward match exactly") {
        Fixture f;
        const int64_t rows = 6;  // this rank holds vocabulary rows [4, 10)
        const int64_t cols = 5;
        const std::vector<int32_t> ids{4, 9, 2, 7, 7, 10, 4, 5};  // 2 and 10 are elsewhere
        const auto n = static_cast<int64_t>(ids.size());
        const Pair table = f.tensor(ints(rows * cols, 10));
        const Pair out = f.tensor(ints(n * cols, 11));
        const Pair acc = f.tensor(ints(n * cols, 12));
        const Pair dtable = f.tensor(ints(rows * cols, 13));
        const Pair dy = f.tensor(ints(n * cols, 14));
        f.both([&](Backend& be, Side s) {
            be.embedding_fwd(ids, table(s), 4, rows, cols, out(s), false);
            be.embedding_fwd(ids, table(s), 4, rows, cols, acc(s), true);
            be.embedding_bwd(ids, dy(s), 4, rows, cols, dtable(s));  // ids 7 and 4 repeat
        });
        f.expect_equal(out, "embedding_fwd");
        f.expect_equal(acc, "embedding_fwd accumulate");
        f.expect_equal(dtable, "embedding_bwd");
        const auto [c, g] = f.read(out);
        CHECK(g[2 * cols] == 0.0f);  // id 2 is not in this slice
    }

    TEST_CASE("cuda backend: collectives on a group of one leave data as the CPU does") {
        Fixture f;
        Group g[2];
        f.both(
            [&](Backend& be, Side s) { g[static_cast<int>(s)] = be.create_group(0, 0, "solo"); });
        CHECK(f.gpu().group_size(g[1]) == 1);
        CHECK(f.gpu().group_rank(g[1]) == 0);
        const Pair x = f.tensor(ints(100, 15));
        const Pair gathered = f.zeros(100);
        const Pair scattered = f.zeros(100);
        f.both([&](Backend& be, Side s) {
            const Group grp = g[static_cast<int>(s)];
            be.all_reduce(grp, x(s), ReduceOp::sum);
            be.all_reduce(grp, x(s), ReduceOp::max);
            be.broadcast(grp, x(s), 0);
            be.all_gather(grp, x(s), gathered(s));
            be.reduce_scatter(grp, x(s), scattered(s));
            be.synchronize();
        });
        f.expect_equal(x, "all_reduce/broadcast");
        f.expect_equal(gathered, "all_gather");
        f.expect_equal(scattered, "reduce_scatter");
    }

    TEST_CASE("cuda backend: all_to_all_v on a group of one and gather_rows match the CPU") {
        // Issue 16: the MoE dispatch's building blocks. The all-to-all to oneself is a copy of
        // the first send_counts[0] elements; gather_rows picks rows 3, 0, 3, 1 of a 4 x 5 matrix.
        Fixture f;
        Group g[2];
        f.both([&](Backend& be, Side s) { g[static_cast<int>(s)] = be.create_group(0, 0, "ep"); });
        const Pair x = f.tensor(ints(20, 21));
        const Pair got = f.zeros(20);
        const Pair rows = f.zeros(20);
        const std::vector<int64_t> counts = {15};
        const std::vector<int64_t> pick = {3, 0, 3, 1};
        f.both([&](Backend& be, Side s) {
            be.all_to_all_v(g[static_cast<int>(s)], x(s), counts, got(s), counts);
            be.gather_rows(x(s), 5, pick, rows(s));
            be.synchronize();
        });
        f.expect_equal(got, "all_to_all_v");
        f.expect_equal(rows, "gather_rows");
        const auto [x_cpu, x_gpu] = f.read(x);
        const auto [r_cpu, r_gpu] = f.read(rows);
        CHECK(r_gpu[0] == x_cpu[15]);  // row 3 first
        CHECK(r_gpu[5] == x_cpu[0]);
    }

    TEST_CASE("cuda backend: send to itself is staged, matched by tag, and checked") {
        Fixture f;
        Backend& be = f.gpu();
        const Group g = be.create_group(0, 0, "pp");
        Buffer a(be, 16);
        Buffer b(be, 16);
        const std::vector<float> va = ints(16, 16);
        const std::vector<float> vb = ints(16, 17);
        be.upload(a, va);
        be.upload(b, vb);
        be.send(g, a, 0, 3);
        be.send(g, b, 0, 4);
        be.fill(a, 0.0f);  // the sends were staged: changing a must not change the message
        Buffer r(be, 16);
        std::vector<float> got(16);
        be.recv(g, r, 0, 4);
        be.download(got, r);
        CHECK(got == vb);
        be.recv(g, r, 0, 3);
        be.download(got, r);
        CHECK(got == va);
        CHECK_THROWS_AS(be.recv(g, r, 0, 5), BackendError);
        be.synchronize();
        const double t0 = be.clock_s();
        CHECK(be.clock_s() >= t0);
    }

}  // TEST_SUITE
