// The two Hopper variants shipped for public runs: h100-96gb (Meta Grand Teton, torchtitan's
// benchmark machine) and h800 (DeepSeek-V3's). Values are checked against the sources quoted in
// the profiles' trailing comments; capacities are binary (GiB), rates decimal (GB/s).
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
}
