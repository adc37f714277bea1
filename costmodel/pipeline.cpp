#include "costmodel/pipeline.hpp"

#include <algorithm>

namespace cleave {

namespace {

double d(int64_t x) {
    return static_cast<double>(x);
}

bool interleaved(const Plan& p) {
    return p.schedule == Schedule::interleaved && p.vpp > 1;
}

}  // namespace

double bubble_fraction(const Plan& p, int64_t m) {
    const double v = interleaved(p) ? d(p.vpp) : 1.0;
    return d(p.pp - 1) / (v * d(m) + d(p.pp - 1));
}

double inflight_microbatches(const Plan& p, int64_t m, int64_t s) {
    switch (p.schedule) {
    case Schedule::gpipe:
        return d(m);
    case Schedule::one_f_one_b:
        return d(std::min(m, p.pp - s));
    case Schedule::interleaved: {
        const int64_t v = std::max<int64_t>(1, p.vpp);
        const int64_t chunks = std::min(m * v, 2 * (p.pp - s - 1) + (v - 1) * p.pp + 1);
        return d(chunks) / d(v);
    }
    }
    return d(m);
}

Seconds pipeline_time(const Plan& p, int64_t m, Seconds sum_stages, Seconds max_stage) {
    if (p.pp <= 1) {
        return max_stage * d(m);
    }
    const double v = interleaved(p) ? d(p.vpp) : 1.0;
    return sum_stages / v + max_stage * (d(m) - 1.0 / v);
}

}  // namespace cleave
