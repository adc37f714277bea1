// ProfilingBackend (cleave run --kernel-profile): it forwards every call unchanged and counts
// what it times.
#include "core/load.hpp"
#include "executor/profiling_backend.hpp"
#include "executor/registry.hpp"
#include "executor/run.hpp"
#include "tests/mpi_once.hpp"

#include <algorithm>
#include <vector>

#include <doctest/doctest.h>

using namespace cleave;
using namespace cleave::executor;

namespace {

const KernelStat* find(const std::vector<KernelStat>& stats, const std::string& name) {
    const auto it = std::find_if(
        stats.begin(), stats.end(), [&](const KernelStat& s) { return s.name == name; });
    return it == stats.end() ? nullptr : &*it;
}

}  // namespace

TEST_SUITE("executor") {
    TEST_CASE(
        "ProfilingBackend: counts calls, GEMM FLOPs, shapes and collectives; reset drops them") {
        test::ensure_mpi();
        auto inner = make_backend("cpu", {});
        ProfilingBackend be(*inner);
        CHECK(be.name() == "cpu");
        Buffer a(be, 4 * 6);  // m x k = 4 x 6
        Buffer b(be, 6 * 5);  // k x n = 6 x 5
        Buffer c(be, 4 * 5);
        be.fill(a, 1.0f);
        be.fill(b, 2.0f);
        be.gemm(Trans::no, Trans::no, 4, 5, 6, 1.0f, a, b, 0.0f, c);
        be.gemm(Trans::no, Trans::no, 4, 5, 6, 1.0f, a, b, 0.0f, c);
        be.axpy(1.0f, c, c);
        std::vector<float> out(20);
        be.download(out, c);
        // Each element: 6 products of 1 * 2 = 12, doubled by the axpy: the calls went through.
        CHECK(out[0] == 24.0f);
        CHECK(out[19] == 24.0f);

        const auto stats = be.stats();
        const KernelStat* g = find(stats, "gemm NN 4x5x6");
        REQUIRE(g != nullptr);
        CHECK(g->calls == 2);
        CHECK(g->flop == 2.0 * (2.0 * 4 * 5 * 6));  // two calls of 2 m n k = 240
        CHECK(g->m == 4);
        CHECK(g->n == 5);
        CHECK(g->k == 6);
        CHECK(g->total_s > 0.0);
        const KernelStat* f = find(stats, "fill");
        REQUIRE(f != nullptr);
        CHECK(f->calls == 2);
        CHECK(f->flop == 0.0);
        CHECK(find(stats, "axpy")->calls == 1);
        CHECK(stats.size() == 3);  // download and alloc are not kernels
        for (size_t i = 1; i < stats.size(); ++i) {
            CHECK(stats[i - 1].total_s >= stats[i].total_s);  // most time first
        }
        // Collectives are timed too, named by operation and bytes, and marked as communication.
        const Group world = be.create_group(0, 0, "world");
        be.all_reduce(world, c, ReduceOp::sum);
        const std::vector<KernelStat> after = be.stats();       // find() points into it
        const KernelStat* ar = find(after, "all_reduce 80 B");  // 20 floats
        REQUIRE(ar != nullptr);
        CHECK(ar->calls == 1);
        CHECK(ar->comm);
        CHECK_FALSE(g->comm);
        be.reset();
        CHECK(be.stats().empty());
    }

    TEST_CASE("ProfilingBackend: a training run through it is the same run") {
        test::ensure_mpi();
        const ModelSpec m =
            load_model(std::string(CLEAVE_TEST_DATA_DIR) + "/tests/calibrate/data/tiny-gpt.toml");
        JobSpec j;
        j.gpus = 1;
        j.global_batch = 2;
        j.seq_len = 32;
        Plan p;
        p.mbs = 1;
        RunOptions ro;
        ro.iters = 1;
        ro.warmup = 0;
        auto plain = make_backend("cpu", {});
        const Measurement a = run_training(*plain, m, j, p, ro);
        auto inner = make_backend("cpu", {});
        ProfilingBackend be(*inner);
        const Measurement b = run_training(be, m, j, p, ro);
        CHECK(a.loss == b.loss);
        CHECK(a.weights_checksum == b.weights_checksum);
        const auto stats = be.stats();
        // Two micro-batches of one sequence, 2 layers: one GeLU forward per layer and micro-batch.
        const KernelStat* gelu = find(stats, "gelu_fwd");
        REQUIRE(gelu != nullptr);
        CHECK(gelu->calls == 4);
        CHECK(find(stats, "adam") != nullptr);
    }
}
