#pragma once
// Inputs built in code for the cost-model tests (no loader involved).

#include "core/cluster.hpp"
#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"

namespace cleave::test {

/// A DGX A100 80GB-like node: 8 GPUs on NVSwitch at 234.89 GB/s busbw, 24 GB/s per GPU across
/// nodes, constant GEMM efficiency 0.8, HBM 2039 GB/s at 0.8, 5.5 GiB reserved.
inline ClusterSpec dgx_a100() {
    ClusterSpec c;
    c.name = "test-dgx-a100";
    c.gpu.name = "A100";
    c.gpu.memory = gib(80);
    c.gpu.reserved_memory = gib(5.5);
    c.gpu.hbm_bw = gbps(2039);
    c.gpu.hbm_efficiency = 0.8;
    c.gpu.peak_fp32 = tflops(19.5);
    c.gpu.peak_tf32 = tflops(156);
    c.gpu.peak_bf16 = tflops(312);
    c.gpu.peak_fp16 = tflops(312);
    c.gpu.gemm_efficiency = {{flop(1e9), 0.8}};
    c.node.gpus_per_node = 8;
    c.node.intra_link = IntraLink::nvswitch;
    c.node.intra_bw = gbps(234.89);
    c.node.intra_latency = us(2.41);
    c.node.pcie_bw = gbps(31);
    c.network.kind = "infiniband-hdr";
    c.network.inter_bw = gbps(24);
    c.network.inter_latency = us(10.8);
    return c;
}

/// 8 x A100 PCIe per node on one shared 1 GbE link (the seed's slow cluster).
inline ClusterSpec pcie_1gbe() {
    ClusterSpec c = dgx_a100();
    c.name = "test-pcie-1gbe";
    c.node.intra_link = IntraLink::pcie;
    c.node.intra_bw = gbps(12);
    c.network.kind = "ethernet-1g";
    c.network.inter_bw = gbps(0.1187 / 8.0);  // one 1 GbE link shared by 8 GPUs
    c.network.inter_latency = us(50);
    return c;
}

/// GPT-3 175B (Brown et al. 2020): 96 layers, h 12288, 96 heads, V 51200, s 2048.
inline ModelSpec gpt3() {
    ModelSpec m;
    m.name = "gpt3-175b";
    m.layers = 96;
    m.hidden = 12288;
    m.heads = 96;
    m.kv_heads = 96;
    m.ffn_hidden = 4 * 12288;
    m.vocab = 51200;
    m.seq_len = 2048;
    return m;
}

/// The seed's 13B GPT (examples/seed-13b.toml): 32 layers, h 5760, 40 heads; 13.05B params.
inline ModelSpec seed13b() {
    ModelSpec m;
    m.name = "seed-13b";
    m.layers = 32;
    m.hidden = 5760;
    m.heads = 40;
    m.kv_heads = 40;
    m.ffn_hidden = 4 * 5760;
    m.vocab = 51200;
    m.seq_len = 2048;
    return m;
}

/// A GPU with H100's name and round peaks (1000 TFLOP/s BF16, 60 FP32), for attention tests.
inline GpuSpec h100_round() {
    GpuSpec g;
    g.name = "NVIDIA H100 SXM5 80GB";
    g.peak_bf16 = tflops(1000);
    g.peak_fp32 = tflops(60);
    return g;
}

/// seed13b reshaped to 32 heads of 128 (h 4096, MHA, ffn 16384), 32 layers.
inline ModelSpec model_4k() {
    ModelSpec m = seed13b();
    m.hidden = 4096;
    m.heads = 32;
    m.kv_heads = 32;
    m.ffn_hidden = 16384;
    return m;
}

inline JobSpec job(int64_t gpus, int64_t gbs, int64_t seq = 2048) {
    JobSpec j;
    j.gpus = gpus;
    j.global_batch = gbs;
    j.seq_len = seq;
    return j;
}

inline Plan plan(int64_t dp, int64_t tp, int64_t pp, int64_t mbs = 1) {
    Plan p;
    p.dp = dp;
    p.tp = tp;
    p.pp = pp;
    p.mbs = mbs;
    return p;
}

/// A small GQA SwiGLU RoPE model (the eager and launch tests): h 1024, 8 heads of 128 (q 1024),
/// 2 KV heads (kv 256), f 4096, 4 layers, seq 1024.
inline ModelSpec gqa_1024() {
    ModelSpec m;
    m.name = "small-gqa";
    m.layers = 4;
    m.hidden = 1024;
    m.heads = 8;
    m.kv_heads = 2;
    m.ffn_hidden = 4096;
    m.vocab = 32000;
    m.seq_len = 1024;
    m.mlp = MlpKind::swiglu;
    m.positions = PositionKind::rope;
    return m;
}

}  // namespace cleave::test
