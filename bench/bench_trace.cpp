// Reading a Kineto trace: a trace of CLEAVE_BENCH_TRACE_MB megabytes (default 64) built in memory
// from the shape of a real one (kernels on a compute and a communication stream, their CPU
// launches, cpu_ops, flow events), read and summarised. Reported: bytes per second.
#include "trace/analyze.hpp"
#include "trace/classes.hpp"
#include "trace/kineto.hpp"

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

namespace {

std::string make_trace(size_t bytes) {
    static const char* kNames[] = {
        "void cutlass::device_kernel<dpsk::grouped_gemm::cuda::fp8_ptp128c::GemmKernel>(dpsk::grouped_gemm::cuda::fp8_ptp128c::GemmKernel::Params)",
        "void flash::compute_attn_ws<Flash_fwd_kernel_traits<192, 128, 128, 12, 2, false, 1, cutlass::bfloat16_t, 128>, true>(flash::Flash_fwd_params)",
        "void cuda::per_token_cast_to_fp8_with_channels<__nv_bfloat16, 128, false, 128, false>(__nv_bfloat16 const*, int, unsigned char*, float*, int)",
        "void layer_norm::ln_fwd_kernel<layer_norm::Kernel_traits<__nv_bfloat16, 7168, 4, 1, 16> >(layer_norm::FwdParams)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)",
    };
    std::string t = "{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA H800\", \"numSms\": 132}],\n\"traceEvents\": [\n";
    long ts = 1740461679471346;
    long corr = 1;
    bool first = true;
    while (t.size() < bytes) {
        for (const char* n : kNames) {
            const std::string c = std::to_string(corr++);
            if (!first) {
                t += ",\n";
            }
            first = false;
            t += "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::add\", \"pid\": 1, \"tid\": 1, \"ts\": " +
                 std::to_string(ts) + ", \"dur\": 3, \"args\": {\"External id\": " + c + ", \"Sequence number\": 5}},\n";
            t += "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, \"tid\": 1, \"ts\": " +
                 std::to_string(ts + 1) + ", \"dur\": 4, \"args\": {\"External id\": " + c + ", \"cbid\": 211, \"correlation\": " + c + "}},\n";
            t += "{\"ph\": \"s\", \"id\": " + c + ", \"pid\": 1, \"tid\": 1, \"ts\": " + std::to_string(ts + 1) +
                 ", \"cat\": \"ac2g\", \"name\": \"ac2g\"},\n";
            t += "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"" + std::string(n) + "\", \"pid\": 0, \"tid\": 7, \"ts\": " +
                 std::to_string(ts + 10) + ", \"dur\": 40, \"args\": {\"External id\": " + c +
                 ", \"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": " + c +
                 ", \"registers per thread\": 168, \"shared memory\": 0, \"blocks per SM\": 0.85, \"warps per SM\": 3.4, \"grid\": [112, 1, 1], \"block\": [384, 1, 1], \"est. achieved occupancy %\": 0}}";
            ts += 50;
        }
    }
    t += "\n]}\n";
    return t;
}

void BM_ReadTrace(benchmark::State& state) {
    const char* env = std::getenv("CLEAVE_BENCH_TRACE_MB");
    const size_t mb = env != nullptr ? std::strtoul(env, nullptr, 10) : 64;
    const std::string text = make_trace(mb * 1000000);
    const cleave::trace::ClassTable classes = cleave::trace::load_class_table();
    for (auto _ : state) {
        const cleave::trace::KinetoTrace t = cleave::trace::read_kineto_text(text, "bench.json");
        benchmark::DoNotOptimize(cleave::trace::summarize(t, classes).compute_busy_ms);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_ReadTrace)->Unit(benchmark::kMillisecond)->MinTime(1.0);

}  // namespace

BENCHMARK_MAIN();
