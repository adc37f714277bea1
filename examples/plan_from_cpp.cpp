// cleave from C++: the typed API (api/cleave.hpp) without the command line. Plans the seed's 13B
// job, prints the best plan's dimensions, time and memory, then prices one fixed layout.
//
//   build/release/examples/plan_from_cpp [examples/seed-13b.toml]
#include "api/cleave.hpp"
#include "core/errors.hpp"

#include <cstdio>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
    using namespace cleave;
    try {
        api::JobOptions job;
        job.model = argc > 1 ? argv[1] : "examples/seed-13b.toml";
        job.cluster = "dgx-a100-80g";
        job.gpus = 32;
        job.gbs = 128;
        const api::Inputs in = api::load_inputs(job);

        SearchOptions search;  // objective time, top 10, every dimension searched
        search.top_k = 3;
        const api::Planned r = api::plan(in, search);
        std::printf("%s on %s: %lld candidates, %lld feasible\n", in.model.name.c_str(),
                    in.cluster.name.c_str(), static_cast<long long>(r.result.candidates_evaluated),
                    static_cast<long long>(r.result.feasible));
        for (const RankedPlan& rp : r.result.plans) {
            std::printf("  tp %lld pp %lld dp %lld mbs %lld zero %d: %.3f s, MFU %.1f %%, %.1f GiB\n",
                        static_cast<long long>(rp.plan.tp), static_cast<long long>(rp.plan.pp),
                        static_cast<long long>(rp.plan.dp), static_cast<long long>(rp.plan.mbs),
                        rp.plan.zero, rp.estimate.iteration_time.value(), 100.0 * rp.estimate.mfu,
                        to_gib(rp.estimate.memory.total));
        }

        // One layout priced in full, as cleave explain --pp 8 --dp 4 --mbs 8 does.
        api::PlanOptions fixed;
        fixed.pp = 8;
        fixed.dp = 4;
        fixed.mbs = 8;
        const api::Explained x = api::explain(in, api::make_plan(fixed, in));
        std::printf("pp 8 x dp 4, mbs 8: %.3f s, %s\n", x.estimate.iteration_time.value(),
                    x.estimate.fits ? "fits" : "does not fit");
        std::cout << api::to_json(x)["memory_gib"].dump() << "\n";
        return 0;
    } catch (const ConfigError& e) {
        std::cerr << e.what() << "\n";
        return 2;
    }
}
