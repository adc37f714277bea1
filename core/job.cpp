#include "core/job.hpp"

namespace cleave {

int optimizer_moments(Optimizer o) {
    return o == Optimizer::adam ? 2 : 1;
}

double model_state_bytes_per_param(const JobSpec& job) {
    const double master = (job.master_weights && bytes_of(job.weights) < 4.0) ? 4.0 : 0.0;
    return bytes_of(job.weights) + bytes_of(job.grads) + master +
           optimizer_moments(job.optimizer) * bytes_of(job.optimizer_states);
}

}  // namespace cleave
