#include "costmodel/overlap.hpp"

#include <algorithm>

namespace cleave {

Seconds exposed_bucketed(Seconds total, Seconds one_bucket, Seconds compute, bool overlap) {
    if (!overlap) {
        return total;
    }
    const Seconds first = min(one_bucket, total);
    return first + max(Seconds{}, total - first - compute);
}

Seconds fsdp_exposed(
    Seconds gathers, Seconds reduce_scatters, Seconds compute, double units, bool prefetch) {
    if (!prefetch) {
        return gathers + max(Seconds{}, reduce_scatters - compute);
    }
    const Seconds all = gathers + reduce_scatters;
    const Seconds first = all / std::max(1.0, units);
    return first + max(Seconds{}, all - first - compute);
}

Seconds overlap_slowdown(Seconds total, Seconds exposed, double fraction) {
    return max(Seconds{}, total - exposed) * fraction;
}

Seconds exposed_behind_gemm(Seconds comm, Seconds gemm, bool overlap) {
    return overlap ? max(Seconds{}, comm - gemm) : comm;
}

}  // namespace cleave
