// Quantised training (costmodel/precision.hpp) and NVLink domains (costmodel/collectives.hpp) on
// the shipped Hopper and Blackwell profiles, against values worked by hand in the comments.
#include "core/calibration.hpp"
#include "core/load.hpp"
#include "costmodel/collectives.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/precision.hpp"
#include "tests/costmodel/fixtures.hpp"

#include <doctest/doctest.h>

using namespace cleave;

namespace {

JobSpec job_of(Dtype d, Fp8Recipe r = Fp8Recipe::delayed) {
    JobSpec j;
    j.compute = d;
    j.weights = Dtype::bf16;
    j.fp8_recipe = r;
    return j;
}

}  // namespace

TEST_SUITE("costmodel") {
    TEST_CASE("precision: an FP8 GEMM on H100 runs at the profile's FP8 curve plus its cast") {
        const ClusterSpec h100 = load_cluster("dgx-h100");
        // 8192^3: 2 x 8192^3 = 1.0995e12 FLOP = 1099.5 GFLOP, a point of
        // [gpu.gemm_efficiency_fp8] (0.652, S08 1290.1 / 1979) and of the BF16 curve (0.738),
        // which the sustained tensor clock caps at 1300 / 1830 = 0.710383 (issue 25).
        const GemmShape g{8192, 8192, 8192, 1};
        const double f = 2.0 * 8192.0 * 8192.0 * 8192.0;
        // FP8: 1.0995e12 / (1979e12 x 0.652) = 0.852 ms; BF16: / (989e12 x 0.710383) = 1.565 ms.
        CHECK(gemm_time(h100.gpu, Dtype::fp8, g).value() ==
              doctest::Approx(f / (1979e12 * 0.652)).scale(0));
        CHECK(gemm_time(h100.gpu, Dtype::fp8, g).value() ==
              doctest::Approx(0.852e-3).epsilon(1e-3).scale(0));
        CHECK(gemm_time(h100.gpu, Dtype::bf16, g).value() ==
              doctest::Approx(f / (989e12 * (1300.0 / 1830.0))).scale(0));
        // Cast of the input (m x k = 67.1M elements), delayed scaling on Hopper: read 2 B, write
        // the FP8 copy 1 B and its transpose 1 B = 4 B/element -> 268.4 MB at 3350 GB/s x 0.866
        // (hbm_efficiency) = 92.5 us. Per-tensor current scaling reads twice: 6 B -> 138.8 us.
        CHECK(quantise_bytes_per_element(h100.gpu, job_of(Dtype::fp8)) == doctest::Approx(4.0));
        const LayerGemms one{g, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
        const QuantiseBytes q = layer_quantise_bytes(h100.gpu, job_of(Dtype::fp8), one);
        CHECK(q.fwd.value() == doctest::Approx(4.0 * 8192.0 * 8192.0));
        const Seconds cast = memory_time(h100.gpu, KernelClass::elementwise, q.fwd);
        CHECK(cast.value() == doctest::Approx(92.53e-6).epsilon(1e-3).scale(0));
        const JobSpec cs = job_of(Dtype::fp8, Fp8Recipe::tensorwise);
        CHECK(memory_time(
                  h100.gpu, KernelClass::elementwise, layer_quantise_bytes(h100.gpu, cs, one).fwd)
                  .value() == doctest::Approx(138.8e-6).epsilon(1e-3).scale(0));
        // The FP8 GEMM with its cast: 0.852 + 0.0925 = 0.945 ms, still 1.59x faster than BF16.
        const Seconds fp8_total = gemm_time(h100.gpu, Dtype::fp8, g) + cast;
        CHECK(fp8_total.value() == doctest::Approx(0.9446e-3).epsilon(1e-3).scale(0));
    }

    TEST_CASE("precision: bytes per quantised element follow each recipe and GPU") {
        const GpuSpec h100 = load_cluster("dgx-h100").gpu;
        const GpuSpec b200 = load_cluster("dgx-b200").gpu;
        CHECK_FALSE(native_fp8_layouts(h100));
        CHECK(native_fp8_layouts(b200));
        // B200 per-tensor current scaling: 2 + 2 (amax pass) + 1 (one copy serves both layouts)
        CHECK(quantise_bytes_per_element(b200, job_of(Dtype::fp8, Fp8Recipe::tensorwise)) ==
              doctest::Approx(5.0));
        // blockwise FP8 (1x128 blocks, fp32 scales): 2 + 2 x (1 + 4/128) = 4.0625
        CHECK(quantise_bytes_per_element(h100, job_of(Dtype::fp8, Fp8Recipe::blockwise)) ==
              doctest::Approx(4.0625));
        // MXFP8: 2 + 2 x (1 + 1/32) = 4.0625; NVFP4: 2 + 2 + 2 x (0.5 + 1/16) = 5.125
        CHECK(quantise_bytes_per_element(b200, job_of(Dtype::mxfp8)) == doctest::Approx(4.0625));
        CHECK(quantise_bytes_per_element(b200, job_of(Dtype::nvfp4)) == doctest::Approx(5.125));
        CHECK(quantise_bytes_per_element(b200, job_of(Dtype::bf16)) == 0.0);
        // Weight copies: H100 delayed 2 x 1 = 2 B/param; with FP8 primary weights
        // (--fp8-param-gather) only the transpose, 1 B; MXFP8 2 x (1 + 1/32) = 2.0625.
        CHECK(weight_copy_bytes_per_param(h100, job_of(Dtype::fp8)) == doctest::Approx(2.0));
        JobSpec pg = job_of(Dtype::fp8);
        pg.weights = Dtype::fp8;
        CHECK(weight_copy_bytes_per_param(h100, pg) == doctest::Approx(1.0));
        CHECK(weight_copy_bytes_per_param(b200, job_of(Dtype::mxfp8)) == doctest::Approx(2.0625));
    }

    TEST_CASE("precision: a precision the GPU lacks runs in the next wider one") {
        const GpuSpec h100 = load_cluster("dgx-h100").gpu;
        const GpuSpec a100 = load_cluster("dgx-a100-80g").gpu;
        const GpuSpec gb200 =
            load_cluster_uncalibrated("gb200-nvl72").gpu;  // the profile as measured
        CHECK(runnable_dtype(h100, Dtype::nvfp4) == Dtype::fp8);
        CHECK(runnable_dtype(a100, Dtype::fp8) == Dtype::bf16);
        CHECK(runnable_dtype(gb200, Dtype::nvfp4) == Dtype::nvfp4);
        CHECK(unquantised(Dtype::mxfp8) == Dtype::bf16);
        CHECK(unquantised(Dtype::fp16) == Dtype::fp16);
        // GB200 NVFP4 at 16384^3 (8796.1 GFLOP): S09 7627.6 TFLOP/s = 0.763 of 10000;
        // MXFP8 has no curve of its own and takes the FP8 one (0.723 at that size).
        CHECK(gemm_efficiency(gb200, flop(8796.1e9), Dtype::nvfp4) == doctest::Approx(0.763));
        CHECK(gemm_efficiency(gb200, flop(8796.1e9), Dtype::mxfp8) == doctest::Approx(0.723));
        CHECK(gemm_efficiency(gb200, flop(8796.1e9), Dtype::bf16) == doctest::Approx(0.729));
    }

    TEST_CASE("collectives: TP=16 stays on NVLink inside an NVL72 domain, not on DGX B200") {
        const ClusterSpec nvl72 = load_cluster("gb200-nvl72");
        const ClusterSpec b200 = load_cluster("dgx-b200");
        // TP=16: 4 trays of 4 inside the 72-GPU domain (the rack runs 4 such groups, 64
        // GPUs, as a block-scheduled NVL72 does): NVLink at the profile's 680 GB/s ring busbw.
        const GroupLink tp16 = group_link(nvl72, 16, 1);
        CHECK(tp16.kind == LinkKind::nvlink);
        CHECK_FALSE(tp16.crosses_nodes());
        CHECK(tp16.busbw.value() == doctest::Approx(680e9));
        CHECK(group_link(nvl72, 8, 1).busbw.value() == doctest::Approx(680e9));  // two trays
        // DP=8 behind TP=16 (extent 128 > 72): 4 members per domain, each with its own NIC:
        // min(680, 4 x 47) = 188 GB/s.
        const GroupLink dp = group_link(nvl72, 8, 16);
        CHECK(dp.kind == LinkKind::network);
        CHECK(dp.members_per_node == 4);
        CHECK(dp.nodes == 2);
        CHECK(dp.busbw.value() == doctest::Approx(188e9));
        // DGX B200: 16 ranks span 2 hosts of 8, 8 NICs each: min(682.2, 8 x 47.7) = 381.6 GB/s
        const GroupLink b16 = group_link(b200, 16, 1);
        CHECK(b16.kind == LinkKind::network);
        CHECK(b16.nodes == 2);
        CHECK(b16.busbw.value() == doctest::Approx(381.6e9));
        // DP=8 of single GPUs on GB200 spans 2 trays but one NVLink domain (the Llama 3 8B rows
        // of public_runs_2025.csv); on 4-GPU hosts without the domain key it would cross.
        CHECK(group_link(nvl72, 8, 1).kind == LinkKind::nvlink);
        ClusterSpec trays = nvl72;
        trays.node.nvlink_domain_gpus = 0;  // = gpus_per_node (4)
        const GroupLink t8 = group_link(trays, 8, 1);
        CHECK(t8.kind == LinkKind::network);
        CHECK(t8.busbw.value() == doctest::Approx(4 * 47e9));  // min(680, 4 x 47) = 188 GB/s
    }

    TEST_CASE("precision: published precision labels name a dtype and recipe") {
        using P = PrecisionChoice;
        CHECK(precision_of_label("FP8 per-tensor current scaling (FP8-CS) + BF16") ==
              P{Dtype::fp8, Fp8Recipe::tensorwise});
        CHECK(precision_of_label("MXFP8 (FP8-MX, block-scaled) + BF16") ==
              P{Dtype::mxfp8, Fp8Recipe::delayed});
        CHECK(precision_of_label("FP8 blockwise") == P{Dtype::fp8, Fp8Recipe::blockwise});
        CHECK(precision_of_label("fp8") == P{Dtype::fp8, Fp8Recipe::delayed});
        CHECK(precision_of_label("NVFP4 + BF16") == P{Dtype::nvfp4, Fp8Recipe::delayed});
        CHECK(precision_of_label("BF16 mixed") == P{Dtype::bf16, Fp8Recipe::delayed});
        CHECK(precision_of_label("mixed fp16") == P{Dtype::fp16, Fp8Recipe::delayed});
        CHECK_FALSE(precision_of_label("int4").has_value());
    }

    TEST_CASE("precision: SP all-gathers the column-parallel inputs quantised") {
        const ClusterSpec h100 = load_cluster("dgx-h100");
        const ModelSpec m = test::gpt3();
        Plan p = test::plan(1, 8, 1);
        p.sp = true;
        JobSpec bf16 = job_of(Dtype::bf16);
        bf16.gpus = 8;
        bf16.global_batch = 8;
        bf16.seq_len = 2048;
        JobSpec fp8 = bf16;
        fp8.compute = Dtype::fp8;
        const PlanLinks l = plan_links(h100, p);
        const LayerCost a = layer_cost(m, h100, bf16, p, l, false);
        const LayerCost b = layer_cost(m, h100, fp8, p, l, false);
        // Per layer with SP, X = the bytes one all-gather or reduce-scatter of T x h sends:
        // bf16 = fwd 2 AG + 2 RS, bwd 2 column re-gathers + 2 RS + 2 row-parallel AG = 6X + 4X;
        // fp8 gathers the 4 column-parallel inputs at 1 B instead of 2: 4(X/2) + 4X + 2X = 8X.
        CHECK(a.tp_bytes.value() / b.tp_bytes.value() == doctest::Approx(10.0 / 8.0));
        // Delayed scaling needs no amax all-reduce; current scaling adds one per gather.
        fp8.fp8_recipe = Fp8Recipe::tensorwise;
        const LayerCost c = layer_cost(m, h100, fp8, p, l, false);
        // 2 forward gathers x one 4-byte all-reduce over 8 GPUs: 2 x 14 steps x 1.86 us
        // (+ 4 B x 1.75 / 370 GB/s, negligible) = 52.1 us more exposed forward TP time.
        CHECK((c.tp_fwd - b.tp_fwd).value() ==
              doctest::Approx(2.0 * 14.0 * 1.86e-6).epsilon(1e-3).scale(0));
    }

    TEST_CASE("precision: a calibration overlay's GEMM factor scales every precision's curve") {
        // hwprofiles/calibration/gb200-nvl72.toml: gemm_efficiency_factor 0.64 (FITTED). At
        // 16384^3 the FP8 curve is 0.723 -> 0.723 x 0.64 = 0.46272; NVFP4 0.763 -> 0.48832.
        const GpuSpec raw = load_cluster_uncalibrated("gb200-nvl72").gpu;
        const GpuSpec cal = load_cluster("gb200-nvl72").gpu;
        CHECK(gemm_efficiency(raw, flop(8796.1e9), Dtype::fp8) == doctest::Approx(0.723));
        CHECK(gemm_efficiency(cal, flop(8796.1e9), Dtype::fp8) == doctest::Approx(0.46272));
        CHECK(gemm_efficiency(cal, flop(8796.1e9), Dtype::nvfp4) == doctest::Approx(0.48832));
        CHECK(gemm_efficiency(cal, flop(8796.1e9), Dtype::bf16) == doctest::Approx(0.729 * 0.64));
    }
}
