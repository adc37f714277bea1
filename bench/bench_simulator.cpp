// Google Benchmark: simulate one iteration of a large interleaved pipeline.
// Run: build/<preset>/bench/bench_simulator --benchmark_repetitions=10
//      --benchmark_report_aggregates_only=true   (report the median)
#include "simulator/simulate.hpp"

#include <cstdint>

#include <benchmark/benchmark.h>

namespace {

// p ranks of v chunks with slightly uneven costs, a p2p time and 4 DP buckets per chunk.
cleave::SimInput make_input(cleave::SimSchedule s, int64_t p, int64_t m, int64_t v) {
    cleave::SimInput in;
    in.schedule = s;
    in.microbatches = m;
    for (int64_t r = 0; r < p; ++r) {
        cleave::RankInput rk;
        const double scale = 1.0 + 0.01 * static_cast<double>(r % 3);
        for (int64_t c = 0; c < v; ++c) {
            cleave::ChunkCost cc;
            cc.fwd = cleave::ms(2.0 * scale);
            cc.bwd = cleave::ms(4.0 * scale);
            rk.chunks.push_back(cc);
            for (int64_t b = 0; b < 4; ++b) {
                rk.dp_buckets.push_back({c, static_cast<double>(b + 1) / 4.0, cleave::ms(5.0)});
            }
        }
        rk.p2p_next = cleave::us(50.0);
        rk.optimizer = cleave::ms(10.0);
        in.ranks.push_back(rk);
    }
    return in;
}

void run(benchmark::State& state, cleave::SimSchedule s, bool timeline) {
    const int64_t p = state.range(0);
    const int64_t m = state.range(1);
    const int64_t v = state.range(2);
    const auto in = make_input(s, p, m, v);
    cleave::SimOptions opt;
    opt.record_timeline = timeline;
    for (auto _ : state) {
        auto r = cleave::simulate(in, opt);
        benchmark::DoNotOptimize(r.iteration_time);
    }
    state.counters["ops"] = static_cast<double>(2 * p * m * v);
    state.counters["ops_per_s"] = benchmark::Counter(static_cast<double>(2 * p * m * v),
                                                     benchmark::Counter::kIsIterationInvariantRate);
}

void BM_interleaved(benchmark::State& state) {
    run(state, cleave::SimSchedule::interleaved, false);
}

void BM_interleaved_timeline(benchmark::State& state) {
    run(state, cleave::SimSchedule::interleaved, true);
}

void BM_1f1b(benchmark::State& state) {
    run(state, cleave::SimSchedule::one_f_one_b, false);
}

}  // namespace

BENCHMARK(BM_interleaved)->Args({64, 1024, 4})->Args({8, 64, 2})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_interleaved_timeline)->Args({64, 1024, 4})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_1f1b)->Args({8, 4, 1})->Args({64, 1024, 1})->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
