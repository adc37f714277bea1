// Hardware-profile loader: unit conversion, diagnostics, and every shipped profile.
#include "core/errors.hpp"
#include "core/load.hpp"
#include "tests/core/diag_helpers.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <doctest/doctest.h>

using namespace cleave;
using cleave::test::diagnostics_of;
using cleave::test::expect_diagnostics;

namespace {

const char* const good_profile = R"([cluster]
name = "test-node"
display_name = "a test node"
price_per_gpu_hour_usd = 2.5

[gpu]
name = "Test GPU"
hbm_capacity_gib = 80
reserved_memory_gib = 4.5
hbm_bandwidth_gbps = 2000
hbm_efficiency = 0.8
peak_tflops_fp32 = 19.5
peak_tflops_bf16 = 312

[gpu.gemm_efficiency]
size_gflop = [1, 1000]
efficiency = [0.5, 0.8]

[node]
gpus_per_node = 8
intra_link = "nvswitch"
intra_bandwidth_gbps = 230
intra_latency_us = 2.5
pcie_bandwidth_gbps = 31

[network]
kind = "infiniband-hdr"
inter_bandwidth_gbps = 24
inter_latency_us = 10
)";

std::string replace(std::string text, const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
}

}  // namespace

TEST_SUITE("core") {
    TEST_CASE("load: a cluster TOML converts display units to SI") {
        const ClusterSpec c = parse_cluster_toml(good_profile, "test.toml");
        CHECK(c.name == "test-node");
        CHECK(c.display_name == "a test node");
        CHECK(c.source == "test.toml");
        CHECK(c.price_per_gpu_hour_usd == 2.5);
        CHECK(c.gpu.memory.value() == 80.0 * 1073741824.0);  // GiB are binary
        CHECK(c.gpu.reserved_memory.value() == 4.5 * 1073741824.0);
        CHECK(c.gpu.hbm_bw.value() == 2000e9);  // GB/s are decimal
        CHECK(c.gpu.peak_bf16.value() == 312e12);
        CHECK(c.gpu.peak_fp8.value() == 0.0);  // absent = no hardware path
        REQUIRE(c.gpu.gemm_efficiency.size() == 2);
        CHECK(c.gpu.gemm_efficiency[1].size.value() == 1000e9);
        // log-linear midpoint of (1, 0.5) and (1000, 0.8) at sqrt(1000) GFLOP: 0.65
        CHECK(gemm_efficiency(c.gpu, flop(std::sqrt(1000.0) * 1e9)) == doctest::Approx(0.65));
        // The same curve read at ln(size): 0.65 at the midpoint, clamped at 0.5 and 0.8 outside.
        CHECK(gemm_efficiency_ln(c.gpu, std::log(std::sqrt(1000.0) * 1e9), Dtype::bf16) ==
              doctest::Approx(0.65));
        CHECK(gemm_efficiency_ln(c.gpu, std::log(1e6), Dtype::bf16) == doctest::Approx(0.5));
        CHECK(gemm_efficiency_ln(c.gpu, std::log(1e15), Dtype::bf16) == doctest::Approx(0.8));
        CHECK(c.node.gpus_per_node == 8);
        CHECK(c.node.intra_link == IntraLink::nvswitch);
        CHECK(c.node.intra_bw.value() == 230e9);
        CHECK(c.node.intra_latency.value() == doctest::Approx(2.5e-6));
        CHECK(c.network.inter_bw.value() == 24e9);
        CHECK(c.network.inter_latency.value() == doctest::Approx(10e-6));
    }

    TEST_CASE("load: the network bandwidth may be given in Gbit/s instead") {
        const auto text =
            replace(good_profile, "inter_bandwidth_gbps = 24", "inter_bandwidth_gbit_s = 0.125");
        const ClusterSpec c = parse_cluster_toml(text, "test.toml");
        // 1 Gbit/s shared by 8 GPUs: 0.125 Gbit/s = 15.625 MB/s per GPU
        CHECK(c.network.inter_bw.value() == 15.625e6);
    }

    TEST_CASE("load: both network bandwidth keys at once is an error") {
        const auto text = replace(good_profile,
                                  "inter_bandwidth_gbps = 24",
                                  "inter_bandwidth_gbps = 24\ninter_bandwidth_gbit_s = 1");
        expect_diagnostics([&] { (void)parse_cluster_toml(text, "c.toml"); },
                           {{29,
                             26,
                             "'network.inter_bandwidth_gbit_s' and 'network.inter_bandwidth_gbps' "
                             "both set: give exactly one"}});
    }

    TEST_CASE("load: a misspelled cluster key is reported at its line and column") {
        const auto text = replace(good_profile, "intra_latency_us", "intra_latncy_us");
        // The [node] header is line 19; the misspelled key is on line 23, column 1.
        expect_diagnostics([&] { (void)parse_cluster_toml(text, "c.toml"); },
                           {{19, 1, "missing required key 'node.intra_latency_us' in [node]"},
                            {23,
                             1,
                             "unknown key 'node.intra_latncy_us' (did you mean "
                             "'intra_latency_us'?)"}});
    }

    TEST_CASE("load: cluster value errors (curve, efficiency, reserved, enum) come together") {
        auto text = replace(good_profile, "reserved_memory_gib = 4.5", "reserved_memory_gib = 80");
        text = replace(text, "hbm_efficiency = 0.8", "hbm_efficiency = 1.2");
        text = replace(text, "efficiency = [0.5, 0.8]", "efficiency = [0.5]");
        text = replace(text, "\"nvswitch\"", "\"nvlink\"");
        expect_diagnostics(
            [&] { (void)parse_cluster_toml(text, "c.toml"); },
            {{9, 23, "'gpu.reserved_memory_gib' must be less than 'gpu.hbm_capacity_gib'"},
             {11, 18, "'gpu.hbm_efficiency' must be in (0, 1], got 1.2"},
             {17,
              14,
              "'gpu.gemm_efficiency.efficiency' has 1 values but 'gpu.gemm_efficiency.size_gflop' "
              "has 2"},
             {21,
              14,
              R"('node.intra_link' must be one of "nvswitch", "nvlink-mesh", "xgmi", "pcie", got "nvlink")"}});
    }

    TEST_CASE("load: node.sync_wait_fraction is optional, above 0 and at most 1") {
        CHECK(parse_cluster_toml(good_profile, "c.toml").node.sync_wait_fraction == 0.0);
        const auto with = [&](const std::string& v) {
            return replace(good_profile, "pcie_bandwidth_gbps = 31",
                           "pcie_bandwidth_gbps = 31\nsync_wait_fraction = " + v);
        };
        CHECK(parse_cluster_toml(with("0.04"), "c.toml").node.sync_wait_fraction == 0.04);
        expect_diagnostics([&] { (void)parse_cluster_toml(with("1.5"), "c.toml"); },
                           {{25, 22, "'node.sync_wait_fraction' must be in (0, 1], got 1.5"}});
    }

    TEST_CASE("load: GEMM sizes must increase and efficiencies lie in 0..1") {
        const auto text = replace(good_profile,
                                  "size_gflop = [1, 1000]\nefficiency = [0.5, 0.8]",
                                  "size_gflop = [1000, 1]\nefficiency = [0.5, \"x\"]");
        expect_diagnostics(
            [&] { (void)parse_cluster_toml(text, "c.toml"); },
            {{16, 14, "'gpu.gemm_efficiency.size_gflop' must be strictly increasing"},
             {17,
              20,
              "'gpu.gemm_efficiency.efficiency' elements must be numbers in (0, 1], got a "
              "string"}});
    }

    TEST_CASE("load: every shipped profile loads and is self-consistent") {
        const auto names = shipped_profiles();
        for (const char* expected : {"a100-pcie-1gbe",
                                     "dgx-a100-40g",
                                     "dgx-a100-80g",
                                     "dgx-b200",
                                     "dgx-b300",
                                     "dgx-h100",
                                     "dgx-h200",
                                     "dgx1-v100",
                                     "dgx2-v100",
                                     "gb200-nvl72",
                                     "gb300-nvl72",
                                     "h100-96gb",
                                     "h200-nvl",
                                     "h800",
                                     "mi300x",
                                     "mi325x",
                                     "mi350x",
                                     "mi355x"}) {
            CAPTURE(expected);
            CHECK(std::find(names.begin(), names.end(), expected) != names.end());
        }
        for (const auto& name : names) {
            CAPTURE(name);
            const ClusterSpec c = load_cluster(name);
            CHECK(c.name == name);
            // DGX-2: 16 GPUs; NVL72 racks: 4 per tray, 72 per NVLink domain; H200 NVL: one
            // 4-card NVLink-bridge island per node; others 8 and 8.
            const bool nvl72 = name.find("nvl72") != std::string::npos;
            const bool four = nvl72 || name == "h200-nvl";
            CHECK(c.node.gpus_per_node == (name == "dgx2-v100" ? 16 : four ? 4 : 8));
            CHECK(nvlink_domain(c.node) == (nvl72 ? 72 : c.node.gpus_per_node));
            CHECK(usable_memory(c.gpu).value() > 0.0);
            CHECK(c.gpu.gemm_efficiency.size() >= 5);
            CHECK(c.network.inter_bw < c.node.intra_bw);
            CHECK(peak_flops(c.gpu, Dtype::fp16).value() > peak_flops(c.gpu, Dtype::fp32).value());
        }
    }

    TEST_CASE("load: nvlink_domain_gpus defaults to gpus_per_node and holds whole hosts") {
        CHECK(parse_cluster_toml(good_profile, "c.toml").node.nvlink_domain_gpus == 8);
        const auto text = replace(
            good_profile, "gpus_per_node = 8", "gpus_per_node = 8\nnvlink_domain_gpus = 12");
        expect_diagnostics(
            [&] { (void)parse_cluster_toml(text, "c.toml"); },
            {{21, 22, "'node.nvlink_domain_gpus' must be a multiple of 'node.gpus_per_node' (8)"}});
    }

    TEST_CASE("load: the slow cluster has 1 Gbit/s per node shared by 8 GPUs") {
        const ClusterSpec c = load_cluster("a100-pcie-1gbe");
        CHECK(c.network.inter_bw.value() == doctest::Approx(1e9 / 8.0 / 8.0));  // bytes/s per GPU
        CHECK(c.node.intra_link == IntraLink::pcie);
    }

    TEST_CASE("load: a profile is also found by path") {
        const std::string path = std::string(CLEAVE_TEST_DATA_DIR) + "/hwprofiles/dgx-h100.toml";
        const ClusterSpec c = load_cluster(path);
        CHECK(c.name == "dgx-h100");
        CHECK(c.source == path);
        CHECK(c.gpu.peak_bf16.value() == 989e12);
    }

    TEST_CASE("load: an unknown profile name lists the shipped ones") {
        const auto ds = diagnostics_of([] { (void)load_cluster("dgx-h1000"); });
        REQUIRE(ds.size() == 1);
        CHECK(ds[0].message.find("unknown hardware profile 'dgx-h1000'") != std::string::npos);
        CHECK(ds[0].message.find("dgx-h100, dgx-h200") != std::string::npos);
    }
}
