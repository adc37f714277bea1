#include "costmodel/packing.hpp"

#include <algorithm>

namespace cleave {

bool packed(const JobSpec& job) {
    return job.packed_mean_len > 0.0;
}

double attention_span(const JobSpec& job) {
    const double s = static_cast<double>(job.seq_len);
    if (!packed(job)) {
        return s;
    }
    // E[L^2] / E[L] = (mu^2 + sigma^2) / mu (packing.hpp); no sample is longer than its pack.
    const double mu = job.packed_mean_len;
    const double span = mu + job.packed_len_std * job.packed_len_std / mu;
    return s > 0.0 ? std::min(span, s) : span;
}

double packed_attention_scale(const JobSpec& job) {
    const double s = static_cast<double>(job.seq_len);
    return s > 0.0 ? attention_span(job) / s : 1.0;
}

}  // namespace cleave
