// DP gradient buckets (issue 17): which ranges of the flat gradient buffer a layer's bucket
// covers, and that the bookkeeping reduces every element exactly once.
#include "executor/dp_buckets.hpp"
#include "executor/registry.hpp"
#include "tests/mpi_once.hpp"

#include <vector>

#include <doctest/doctest.h>

using namespace cleave;
using namespace cleave::executor;

TEST_SUITE("executor") {
    TEST_CASE("DpBuckets: take returns only what was not started, rest the complement") {
        DpBuckets b(100);
        CHECK(b.take({10, 20}) == std::vector<GradRange>{{10, 20}});
        CHECK(b.take({15, 30}) == std::vector<GradRange>{{20, 30}});  // 15..20 already started
        CHECK(b.take({12, 18}).empty());
        CHECK(b.rest() == std::vector<GradRange>{{0, 10}, {30, 100}});
        CHECK(b.take({40, 50}) == std::vector<GradRange>{{40, 50}});
        CHECK(b.rest() == std::vector<GradRange>{{0, 10}, {30, 40}, {50, 100}});
        // Everything: exactly the three holes, so every element is reduced once.
        CHECK(b.take({0, 100}) == std::vector<GradRange>{{0, 10}, {30, 40}, {50, 100}});
        CHECK(b.rest().empty());
        b.reset();
        CHECK(b.rest() == std::vector<GradRange>{{0, 100}});
    }

    TEST_CASE("layer_grad_ranges: a layer's non-replicated parameters merged and its replicated "
              "ones left out") {
        test::ensure_mpi();
        auto be = make_backend("cpu", {});
        Params p;
        const auto info = [](const char* name, int64_t rows, int64_t cols, bool replicated) {
            ParamInfo i;
            i.name = name;
            i.kind = replicated ? InitKind::gain : InitKind::weight;
            i.global_cols = cols;
            i.rows = rows;
            i.cols = cols;
            i.tp_replicated = replicated;
            return i;
        };
        // Registered: norm gain (replicated, 4), wq 2 x 3, bq 3, other layer's w 5, wo 3 x 2.
        // allocate() puts replicated tensors first: norm 0..4, then wq 4..10, bq 10..13,
        // other 13..18, wo 18..24.
        const int64_t norm = p.add(info("norm", 1, 4, true));
        const int64_t wq = p.add(info("wq", 2, 3, false));
        const int64_t bq = p.add(info("bq", 1, 3, false));
        (void)p.add(info("other", 1, 5, false));
        const int64_t wo = p.add(info("wo", 3, 2, false));
        p.allocate(*be, 1, 7);
        LayerHandles l;
        l.norm1_g = norm;
        l.wq = wq;
        l.bq = bq;
        l.wo = wo;
        // wq and bq are adjacent (4..13), wo is apart (18..24); the norm is not in a bucket.
        CHECK(layer_grad_ranges(p, l) == std::vector<GradRange>{{4, 13}, {18, 24}});
    }
}
