// Issue 17: activations saved for the backward are packed (16-bit on a bf16 GPU run) between a
// layer's forward and its backward. On the CPU backend with BackendOptions::emulate_packing a
// packed buffer holds NaN until it is unpacked (and then the values rounded to bf16), so a run
// whose weights stay finite read no saved tensor while it was packed.
#include "core/load.hpp"
#include "core/model.hpp"
#include "executor/registry.hpp"
#include "executor/run.hpp"
#include "tests/mpi_once.hpp"

#include <cmath>
#include <string>

#include <doctest/doctest.h>

using namespace cleave;
using namespace cleave::executor;

namespace {

void check_packed_run(const std::string& toml, Recompute recompute) {
    const ModelSpec m =
        load_model(std::string(CLEAVE_TEST_DATA_DIR) + "/tests/executor/data/" + toml);
    JobSpec j;
    j.gpus = 1;
    j.global_batch = 2;
    j.seq_len = m.seq_len;
    Plan p;
    p.mbs = 1;
    p.recompute = recompute;
    RunOptions ro;
    ro.iters = 2;
    ro.warmup = 0;
    auto plain = make_backend("cpu", {});
    const Measurement a = run_training(*plain, m, j, p, ro);
    BackendOptions o;
    o.emulate_packing = true;
    auto packing = make_backend("cpu", o);
    const Measurement b = run_training(*packing, m, j, p, ro);
    REQUIRE(b.losses.size() == 2);
    // The forward reads no packed tensor: the first loss is the same number.
    CHECK(b.losses[0] == a.losses[0]);
    // A read while packed would have spread NaN into the gradients, then every weight.
    CHECK(std::isfinite(b.weights_checksum));
    CHECK(std::isfinite(b.losses[1]));
    // The backward saw bf16-rounded activations, so the update differs, but little: Adam moves
    // each weight by at most lr per step (Kingma & Ba 2015, Sec. 2.1: |step| <= lr when
    // 1 - beta1 = 0.1 <= sqrt(1 - beta2) = 0.22), so two runs' weights differ by at most
    // 2 lr per step each, and the checksum of N weights by 2 x 2 lr N after 2 steps.
    CHECK(b.weights_checksum != a.weights_checksum);
    const double n = static_cast<double>(params_total(m));
    CHECK(std::fabs(b.weights_checksum - a.weights_checksum) <=
          4.0 * static_cast<double>(ro.lr) * n);
}

}  // namespace

TEST_SUITE("executor") {
    TEST_CASE("pack_saved: no saved activation is read while packed, for every recompute mode") {
        test::ensure_mpi();
        for (const Recompute r : {Recompute::none, Recompute::selective, Recompute::full}) {
            CAPTURE(static_cast<int>(r));
            check_packed_run("tiny_gpt.toml", r);
            check_packed_run("tiny_llama.toml", r);
            check_packed_run("tiny_moe.toml", r);
        }
    }
}
