// The optional per-kernel-class memory efficiencies and batched_gemm_fused of a hardware profile
// (core/load_cluster.cpp, docs/file-formats.md).
#include "core/errors.hpp"
#include "core/load.hpp"
#include "tests/core/diag_helpers.hpp"

#include <string>

#include <doctest/doctest.h>

using namespace cleave;
using cleave::test::expect_diagnostics;

namespace {

std::string profile(const std::string& extra_gpu_keys) {
    return R"([cluster]
name = "classes"

[gpu]
name = "Test CPU"
hbm_capacity_gib = 8
reserved_memory_gib = 0
hbm_bandwidth_gbps = 20
hbm_efficiency = 0.1
peak_tflops_fp32 = 0.04
)" + extra_gpu_keys +
           R"(
[gpu.gemm_efficiency]
size_gflop = [1]
efficiency = [0.5]

[node]
gpus_per_node = 2
intra_link = "nvswitch"
intra_bandwidth_gbps = 2
intra_latency_us = 5
pcie_bandwidth_gbps = 20

[network]
kind = "none"
inter_bandwidth_gbps = 2
inter_latency_us = 5
)";
}

}  // namespace

TEST_SUITE("core") {
    TEST_CASE("load: kernel-class efficiencies are optional and 0 when absent") {
        const ClusterSpec c = parse_cluster_toml(profile(""), "c.toml");
        CHECK(c.gpu.hbm_efficiency == 0.1);
        CHECK(c.gpu.norm_efficiency == 0.0);
        CHECK(c.gpu.elementwise_efficiency == 0.0);
        CHECK(c.gpu.activation_efficiency == 0.0);
        CHECK(c.gpu.gated_activation_efficiency == 0.0);
        CHECK(c.gpu.softmax_efficiency == 0.0);
        CHECK(c.gpu.cross_entropy_efficiency == 0.0);
        CHECK(c.gpu.optimizer_efficiency == 0.0);
        CHECK(c.gpu.batched_gemm_fused);
        CHECK(c.node.sync_wait.value() == 0.0);  // node.sync_wait_us absent
        CHECK(c.node.collective_bw.all_reduce.value() == 0.0);
        CHECK(c.node.collective_bw.reduce_scatter.value() == 0.0);
    }

    TEST_CASE("load: per-collective node bandwidths are optional and read in GB/s") {
        std::string text = profile("");
        const std::string at = "pcie_bandwidth_gbps = 20\n";
        text.replace(text.find(at),
                     at.size(),
                     at + "all_reduce_bandwidth_gbps = 2.2\nreduce_scatter_bandwidth_gbps = 3.5\n");
        const ClusterSpec c = parse_cluster_toml(text, "c.toml");
        CHECK(c.node.collective_bw.all_reduce.value() == doctest::Approx(2.2e9).epsilon(1e-12));
        CHECK(c.node.collective_bw.reduce_scatter.value() == doctest::Approx(3.5e9).epsilon(1e-12));
        CHECK(c.node.collective_bw.all_gather.value() == 0.0);
        CHECK(c.node.collective_bw.send_recv.value() == 0.0);
    }

    TEST_CASE("load: node.sync_wait_us is read in microseconds, a negative one is an error") {
        std::string text = profile("");
        const std::string at = "pcie_bandwidth_gbps = 20\n";
        text.replace(text.find(at), at.size(), at + "sync_wait_us = 120\n");
        const ClusterSpec c = parse_cluster_toml(text, "c.toml");
        CHECK(c.node.sync_wait.value() == doctest::Approx(120e-6).epsilon(1e-12));
        text.replace(text.find("sync_wait_us = 120"), 18, "sync_wait_us = -1");
        CHECK_THROWS_AS((void)parse_cluster_toml(text, "c.toml"), ConfigError);
    }

    TEST_CASE("load: kernel-class efficiencies and batched_gemm_fused are read") {
        const ClusterSpec c = parse_cluster_toml(profile(R"(norm_efficiency = 0.06
elementwise_efficiency = 0.2
activation_efficiency = 0.012
gated_activation_efficiency = 0.07
softmax_efficiency = 0.04
cross_entropy_efficiency = 0.05
optimizer_efficiency = 1
batched_gemm_fused = false
)"),
                                                 "c.toml");
        CHECK(c.gpu.norm_efficiency == 0.06);
        CHECK(c.gpu.elementwise_efficiency == 0.2);
        CHECK(c.gpu.activation_efficiency == 0.012);
        CHECK(c.gpu.gated_activation_efficiency == 0.07);
        CHECK(c.gpu.softmax_efficiency == 0.04);
        CHECK(c.gpu.cross_entropy_efficiency == 0.05);
        CHECK(c.gpu.optimizer_efficiency == 1.0);
        CHECK_FALSE(c.gpu.batched_gemm_fused);
    }

    TEST_CASE("load: a kernel-class efficiency out of range or a non-boolean flag is an error") {
        const std::string text = profile(R"(softmax_efficiency = 1.5
norm_efficiency = 0
batched_gemm_fused = "no"
)");
        expect_diagnostics([&] { (void)parse_cluster_toml(text, "c.toml"); },
                           {{11, 22, "'gpu.softmax_efficiency' must be in (0, 1], got 1.5"},
                            {12, 19, "'gpu.norm_efficiency' must be in (0, 1], got 0"},
                            {13,
                             22,
                             "'gpu.batched_gemm_fused' must be a boolean (true or false), "
                             "got a string"}});
    }
}
