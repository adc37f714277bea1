#include "costmodel/pipeline.hpp"
#include "costmodel/num.hpp"

#include "core/schedule.hpp"

#include <algorithm>

namespace cleave {

namespace {

using detail::d;

bool interleaved(const Plan& p) {
    return p.schedule == Schedule::interleaved && p.vpp > 1;
}

}  // namespace

double bubble_fraction(const Plan& p, int64_t m) {
    if (p.schedule == Schedule::dualpipe) {
        return d(p.pp - 2) / (3.0 * d(m) + d(p.pp - 2));
    }
    if (p.schedule == Schedule::dualpipev) {
        return d(p.pp - 1) / (3.0 * d(m) + d(p.pp - 1));
    }
    const double v = interleaved(p) ? d(p.vpp) : 1.0;
    return d(p.pp - 1) / (v * d(m) + d(p.pp - 1));
}

Seconds dualpipe_bubble(int64_t p, Seconds fb, Seconds b, Seconds w) {
    return max(Seconds{}, (fb + b - 3.0 * w) * (d(p) / 2.0 - 1.0));
}

double inflight_microbatches(const Plan& p, int64_t m, int64_t s) {
    if (bidirectional(p.schedule)) {
        return 1.0;
    }
    // The one schedule's peak (core/schedule.hpp), in whole stages of v chunks.
    const int64_t v = interleaved(p) ? p.vpp : 1;
    return d(peak_inflight_chunks(sim_schedule(p.schedule), p.pp, v, m, s)) / d(v);
}

Seconds pipeline_time(const Plan& p, int64_t m, Seconds sum_stages, Seconds max_stage) {
    if (p.pp <= 1) {
        return max_stage * d(m);
    }
    const double v = interleaved(p) ? d(p.vpp) : 1.0;
    return sum_stages / v + max_stage * (d(m) - 1.0 / v);
}

}  // namespace cleave
