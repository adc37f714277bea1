// Shipped profiles checked value by value against the sources in their trailing comments: the
// two Hopper variants for public runs, h100-96gb (Meta Grand Teton, torchtitan's benchmark
// machine) and h800 (DeepSeek-V3's), and the issue 47 additions dgx-b300, h200-nvl, mi325x,
// mi350x and mi355x. Capacities are binary (GiB), rates decimal (GB/s, TFLOP/s).
#include "core/calibration.hpp"
#include "core/load.hpp"

#include <doctest/doctest.h>

using namespace cleave;

namespace {

constexpr double gib_B = 1073741824.0;

}  // namespace

TEST_SUITE("core") {
    TEST_CASE("profiles: h100-96gb is the HBM2e, 500 W Grand Teton H100") {
        const ClusterSpec c = load_cluster("h100-96gb");
        CHECK(c.name == "h100-96gb");
        CHECK(c.calibration.empty());  // no overlay in hwprofiles/calibration/
        // [E] 96 GiB of DRAM x the 80 GB part's nvidia-smi ratio 81559 / 81920 = 97871 MiB
        // = 95.58 GiB, the total other 96 GB Hoppers (GH200, H20) report.
        CHECK(c.gpu.memory.value() == doctest::Approx(95.58 * gib_B).epsilon(1e-12));
        // torchtitan benchmark "Hardware": "96GB HBM2e with 2.4 TB/sec" = 2400e9 B/s (not the
        // 80 GB HBM3 part's 3350).
        CHECK(c.gpu.hbm_bw.value() == doctest::Approx(2400e9).epsilon(1e-12));
        // "default 500W power limit"; the peaks stay at the SXM datasheet: 989 dense BF16.
        CHECK(c.gpu.tdp_w == 500.0);
        CHECK(c.gpu.peak_bf16.value() == doctest::Approx(989e12).epsilon(1e-12));
        // HGX H100 NVSwitch ring busbw ~370 GB/s (nccl-tests #212), as dgx-h100.
        CHECK(c.node.intra_link == IntraLink::nvswitch);
        CHECK(c.node.intra_bw.value() == doctest::Approx(370e9).epsilon(1e-12));
        // 400 Gb/s per GPU = 50 GB/s line rate; nccl-tests reach 46-48 per NIC: 47e9 B/s.
        CHECK(c.network.inter_bw.value() == doctest::Approx(47e9).epsilon(1e-12));
        CHECK(c.node.gpus_per_node == 8);
    }

    TEST_CASE("profiles: h800 is an H100 SXM5 with 200 GB/s per direction of NVLink") {
        const ClusterSpec c = load_cluster("h800");
        CHECK(c.name == "h800");
        CHECK(c.calibration.empty());  // the dgx-h100 overlay is keyed to dgx-h100 only
        // nvidia-smi "NVIDIA H800 ... 81559MiB": 81559 / 1024 = 79.65 GiB.
        CHECK(c.gpu.memory.value() == doctest::Approx(79.65 * gib_B).epsilon(1e-12));
        // H100 SXM5 80GB HBM3: 3.35 TB/s.
        CHECK(c.gpu.hbm_bw.value() == doctest::Approx(3350e9).epsilon(1e-12));
        CHECK(c.gpu.tdp_w == 700.0);  // nvidia-smi power cap 700W
        // DeepSeek-V3 report sec. 3.2.2: 160 GB/s measured one-way (400 GB/s is bidirectional,
        // i.e. 200 per direction; 160 / 200 = 0.80, near H100's ring 370 / 450 = 0.82).
        CHECK(c.node.intra_link == IntraLink::nvswitch);
        CHECK(c.node.intra_bw.value() == doctest::Approx(160e9).epsilon(1e-12));
        // The report's IB 50 GB/s = 400 Gb/s / 8 line rate; nccl-tests per CX-7 NDR NIC: 47.
        CHECK(c.network.inter_bw.value() == doctest::Approx(47e9).epsilon(1e-12));
        CHECK(c.network.inter_bw.value() < 400e9 / 8.0);
        CHECK(c.node.gpus_per_node == 8);
    }

    TEST_CASE("profiles: h800 and h100-96gb keep dgx-h100's compute and GEMM curves") {
        const ClusterSpec ref = load_cluster_uncalibrated("dgx-h100");
        for (const char* name : {"h800", "h100-96gb"}) {
            CAPTURE(name);
            const ClusterSpec c = load_cluster(name);
            // Same GH100 silicon: 989 BF16 / 1979 FP8 dense, the same measured curves.
            CHECK(c.gpu.peak_bf16 == ref.gpu.peak_bf16);
            CHECK(c.gpu.peak_fp8 == ref.gpu.peak_fp8);
            CHECK(c.gpu.gemm_efficiency == ref.gpu.gemm_efficiency);
            CHECK(c.gpu.gemm_efficiency_fp8 == ref.gpu.gemm_efficiency_fp8);
        }
    }

    TEST_CASE("profiles: dgx-b300 is B200's dense BF16 / FP8 with 1.5x FP4 and 288 GB") {
        const ClusterSpec c = load_cluster("dgx-b300");
        CHECK(c.calibration.empty());  // no overlay is fitted for B300
        // DGX B300 datasheet (stas00/ml-engineering TFLOPS table, note 21): 2250 dense BF16,
        // 4500 FP8, as B200; NVIDIA HGX / DGX B300 "FP4 144 PFLOPS | 108 PFLOPS" (sparse | dense)
        // over 8 GPUs = 13.5 PF dense FP4.
        CHECK(c.gpu.peak_bf16.value() == doctest::Approx(2250e12).epsilon(1e-12));
        CHECK(c.gpu.peak_fp8.value() == doctest::Approx(4500e12).epsilon(1e-12));
        CHECK(c.gpu.peak_nvfp4.value() == doctest::Approx(13500e12).epsilon(1e-12));
        CHECK(c.gpu.peak_nvfp4 > load_cluster("dgx-b200").gpu.peak_nvfp4);
        // MLPerf Training v5.1 system JSONs (Nebius, Dell): "275040 MiB" = 268.59 GiB.
        CHECK(c.gpu.memory.value() == doctest::Approx(268.59 * gib_B).epsilon(1e-12));
        // 7680-bit bus at 3996 MHz (QuickRunCUDA b300_clean), as dgx-b200; TGP 1100 W (MLPerf).
        CHECK(c.gpu.hbm_bw.value() == doctest::Approx(7672e9).epsilon(1e-12));
        CHECK(c.gpu.tdp_w == 1100.0);
        // 8 x ConnectX-8 800 Gb/s: 100 GB/s x 0.94 busbw per NIC, as gb300-nvl72.
        CHECK(c.node.gpus_per_node == 8);
        CHECK(c.network.inter_bw.value() == doctest::Approx(94e9).epsilon(1e-12));
        // TE's gemm_profiling on B300 ranks the formats NVFP4 > FP8 > MXFP8 > BF16 in TFLOP/s.
        const auto rate = [&](Dtype d) {
            return (peak_flops(c.gpu, d) * gemm_efficiency(c.gpu, flop(1864e9), d)).value();
        };
        CHECK(rate(Dtype::nvfp4) > rate(Dtype::fp8));
        CHECK(rate(Dtype::fp8) > rate(Dtype::mxfp8));
        CHECK(rate(Dtype::mxfp8) > rate(Dtype::bf16));
    }

    TEST_CASE("profiles: h200-nvl is a 600 W H200 rated at 1545 MHz in 4-card NVLink islands") {
        const ClusterSpec c = load_cluster("h200-nvl");
        CHECK(c.calibration.empty());
        // nvidia.com/en-us/data-center/h200 H200 NVL column: BF16 1,671 and FP8 3,341 TFLOPS
        // with sparsity, i.e. 835.5 / 1670.5 dense; 141 GB at 4.8 TB/s; up to 600 W.
        CHECK(c.gpu.peak_bf16.value() == doctest::Approx(835.5e12).epsilon(1e-12));
        CHECK(c.gpu.peak_fp8.value() == doctest::Approx(1670.5e12).epsilon(1e-12));
        CHECK(c.gpu.hbm_bw.value() == doctest::Approx(4800e9).epsilon(1e-12));
        CHECK(c.gpu.tdp_w == 600.0);
        // nvidia-smi 143771 MiB, as the SXM part.
        CHECK(c.gpu.memory == load_cluster_uncalibrated("dgx-h200").gpu.memory);
        // [E] the SXM's 1300 MHz at 700 W x 600 / 700 over the NVL rating clock 1545 MHz.
        CHECK(tensor_clock_ceiling(c.gpu) == doctest::Approx(1114.0 / 1545.0).epsilon(1e-12));
        // NVL4 bridge: 4 GPUs per NVLink domain, no switch; a NIC of 400 Gb/s per 2 GPUs.
        CHECK(c.node.gpus_per_node == 4);
        CHECK(nvlink_domain(c.node) == 4);
        CHECK(c.node.intra_link == IntraLink::nvlink_mesh);
        CHECK(c.network.inter_bw.value() == doctest::Approx(23.5e9).epsilon(1e-12));
    }

    TEST_CASE("profiles: mi325x is MI300X's compute with 256 GB at 6 TB/s and 1000 W") {
        const ClusterSpec c = load_cluster("mi325x");
        const ClusterSpec mi300x = load_cluster("mi300x");
        // AMD: "same compute as MI300X" (stas00/ml-engineering note 18), 1307.4 dense BF16.
        CHECK(c.gpu.peak_bf16 == mi300x.gpu.peak_bf16);
        CHECK(c.gpu.peak_fp8.value() == doctest::Approx(2614.9e12).epsilon(1e-12));
        CHECK(c.gpu.peak_nvfp4.value() == 0.0);  // no FP4 on CDNA 3
        // ROCm gpu-arch-specs: VRAM 256 GiB; 6.0 TB/s HBM3E; 1000 W typical board power.
        CHECK(c.gpu.memory.value() == doctest::Approx(256.0 * gib_B).epsilon(1e-12));
        CHECK(c.gpu.hbm_bw.value() == doctest::Approx(6000e9).epsilon(1e-12));
        CHECK(c.gpu.tdp_w == 1000.0);
        // AMD max-achievable FLOPs (ROCm blog, part 2): BF16 843 of 1307.4 at the curve's best.
        CHECK(gemm_efficiency(c.gpu, flop(1099.5e9), Dtype::bf16) == doctest::Approx(0.645));
        CHECK(c.node.intra_link == IntraLink::xgmi);
        CHECK(c.node.gpus_per_node == 8);
    }

    TEST_CASE("profiles: mi355x and mi350x are one CDNA 4 die at 2400 and 2200 MHz") {
        const ClusterSpec mi355x = load_cluster("mi355x");
        const ClusterSpec mi350x = load_cluster("mi350x");
        // 2400 MHz x 1024 matrix cores x 512 FMA x 2 = 2516.6 dense BF16 (AMD: 2.5 PFLOPS);
        // MXFP4 4x BF16 = 10066.3 (AMD: 10 PFLOPS), carried in the block-scaled FP4 key.
        CHECK(mi355x.gpu.peak_bf16.value() == doctest::Approx(2516.6e12).epsilon(1e-12));
        CHECK(mi355x.gpu.peak_mxfp8 == mi355x.gpu.peak_fp8);
        CHECK(mi355x.gpu.peak_nvfp4.value() == doctest::Approx(10066.3e12).epsilon(1e-12));
        CHECK(mi355x.gpu.peak_tf32.value() == 0.0);  // none published for CDNA 4
        // MI350X: the same peaks x 2200 / 2400 (AMD: 2.3 PFLOPS BF16, 9.2 PFLOPS MXFP4).
        CHECK(mi350x.gpu.peak_bf16.value() == doctest::Approx(2306.9e12).epsilon(1e-12));
        CHECK(mi350x.gpu.peak_nvfp4.value() ==
              doctest::Approx(mi355x.gpu.peak_nvfp4.value() * 2200.0 / 2400.0).epsilon(1e-4));
        // 1400 W liquid vs 1000 W air; 288 GiB (hipBLASLt on MI350X: 309.2 GB) at 8 TB/s.
        CHECK(mi355x.gpu.tdp_w == 1400.0);
        CHECK(mi350x.gpu.tdp_w == 1000.0);
        for (const ClusterSpec* c : {&mi355x, &mi350x}) {
            CHECK(c->gpu.memory.value() == doctest::Approx(309.2e9).epsilon(1e-4));
            CHECK(c->gpu.hbm_bw.value() == doctest::Approx(8000e9).epsilon(1e-12));
            // ROCm acceptance docs, MI350X example: 8 GB RCCL all-reduce busbw 367.51 GB/s.
            CHECK(c->node.intra_bw.value() == doctest::Approx(367.5e9).epsilon(1e-12));
            CHECK(c->node.gpus_per_node == 8);
        }
    }
}
