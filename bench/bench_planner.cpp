// The planner's full search for GPT-3 175B on 4096 DGX-A100 GPUs, global batch 1536, seq 2048
// (issue #4 Done-when), with the shipped profile. Counters: candidates priced per search and
// evaluations per second.
//   build/<dir>/bench/bench_planner --benchmark_repetitions=10 --benchmark_report_aggregates_only
#include "core/load.hpp"
#include "planner/search.hpp"

#include <benchmark/benchmark.h>

namespace {

struct Case {
    cleave::ModelSpec model;
    cleave::ClusterSpec cluster;
    cleave::JobSpec job;
};

Case gpt3_4096() {
    Case c;
    c.model = cleave::load_model(CLEAVE_SOURCE_DIR "/examples/gpt3-175b.toml");
    c.cluster = cleave::load_cluster(CLEAVE_SOURCE_DIR "/hwprofiles/dgx-a100-80g.toml");
    c.job.gpus = 4096;
    c.job.global_batch = 1536;
    c.job.seq_len = 2048;
    return c;
}

void report(benchmark::State& state, int64_t candidates) {
    state.counters["candidates"] = static_cast<double>(candidates);
    state.counters["evals_per_s"] = benchmark::Counter(static_cast<double>(candidates) *
                                                           static_cast<double>(state.iterations()),
                                                       benchmark::Counter::kIsRate);
}

void bm_search_gpt3_4096(benchmark::State& state) {
    const Case c = gpt3_4096();
    cleave::SearchOptions o;
    int64_t n = 0;
    for (auto _ : state) {
        const cleave::SearchResult r = cleave::search(c.model, c.cluster, c.job, o);
        n = r.candidates_evaluated;
        benchmark::DoNotOptimize(r.plans.data());
    }
    report(state, n);
}

// The enumeration alone (a trivial pricer), to separate search overhead from the cost model's.
cleave::Estimate trivial_price(const cleave::ModelSpec&,
                               const cleave::ClusterSpec&,
                               const cleave::JobSpec&,
                               const cleave::Plan& p) {
    cleave::Estimate e;
    e.fits = true;
    const auto mix = p.dp + 3 * p.tp + 7 * p.pp + 11 * p.cp + 13 * p.mbs + 17 * p.vpp +
                     19 * p.zero + 23 * static_cast<int64_t>(p.recompute) + (p.sp ? 29 : 0);
    e.iteration_time = cleave::seconds(1.0 / static_cast<double>(mix));
    return e;
}

void bm_enumerate_gpt3_4096(benchmark::State& state) {
    const Case c = gpt3_4096();
    cleave::SearchOptions o;
    int64_t n = 0;
    for (auto _ : state) {
        const cleave::SearchResult r =
            cleave::search_with(c.model, c.cluster, c.job, o, &trivial_price);
        n = r.candidates_evaluated;
        benchmark::DoNotOptimize(r.plans.data());
    }
    report(state, n);
}

}  // namespace

BENCHMARK(bm_search_gpt3_4096)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_enumerate_gpt3_4096)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
