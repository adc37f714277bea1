// One estimate() for GPT-3 175B on 1024 DGX A100 GPUs (TP 8, PP 8 interleaved, DP 16, ZeRO-1), the
// call the planner makes millions of times per search.
//   build/<dir>/bench/bench_costmodel --benchmark_repetitions=10 --benchmark_report_aggregates_only
#include "costmodel/estimate.hpp"

#include <benchmark/benchmark.h>

namespace {

cleave::ClusterSpec a100() {
    using namespace cleave;
    ClusterSpec c;
    c.name = "bench-dgx-a100";
    c.gpu.memory = gib(80);
    c.gpu.reserved_memory = gib(5.5);
    c.gpu.hbm_bw = gbps(2039);
    c.gpu.hbm_efficiency = 0.79;
    c.gpu.peak_fp32 = tflops(19.5);
    c.gpu.peak_bf16 = tflops(312);
    c.gpu.peak_fp16 = tflops(312);
    // a five-point curve, like the shipped profile
    c.gpu.gemm_efficiency = {{flop(2.1e9), 0.38},
                             {flop(1.7e10), 0.71},
                             {flop(1.4e11), 0.73},
                             {flop(1.1e12), 0.81},
                             {flop(8.8e12), 0.82}};
    c.node.gpus_per_node = 8;
    c.node.intra_bw = gbps(234.89);
    c.node.intra_latency = us(2.41);
    c.network.kind = "infiniband-hdr";
    c.network.inter_bw = gbps(24);
    c.network.inter_latency = us(10.8);
    return c;
}

void bm_estimate_gpt3(benchmark::State& state) {
    using namespace cleave;
    ModelSpec m;
    m.layers = 96;
    m.hidden = 12288;
    m.heads = 96;
    m.kv_heads = 96;
    m.ffn_hidden = 49152;
    m.vocab = 51200;
    m.seq_len = 2048;
    JobSpec job;
    job.gpus = 1024;
    job.global_batch = 1536;
    job.seq_len = 2048;
    Plan p;
    p.tp = 8;
    p.pp = 8;
    p.dp = 16;
    p.vpp = 3;
    p.schedule = Schedule::interleaved;
    p.sp = true;
    p.recompute = Recompute::selective;
    p.zero = 1;
    const ClusterSpec c = a100();
    for (auto _ : state) {
        Estimate e = estimate(m, c, job, p);
        benchmark::DoNotOptimize(e);
    }
}

}  // namespace

BENCHMARK(bm_estimate_gpt3);
BENCHMARK_MAIN();
