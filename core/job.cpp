#include "core/job.hpp"

namespace cleave {

int optimizer_moments(Optimizer o) {
    return o == Optimizer::adam ? 2 : 1;
}

double optimizer_state_bytes(const JobSpec& job) {
    const double w = bytes_of(job.weights);
    const double master_b = bytes_of(job.master_dtype);
    // A master copy whenever the weights are 16-bit or narrower, in its own dtype: fp32
    // (Megatron's default), fp16 (--main-params-dtype fp16) or the 16-bit shard Apex's
    // DistributedFusedAdam keeps with dtype=bf16 (store_params); fp32 weights are their own.
    const double master = (job.master_weights && w <= 2.0) ? master_b : 0.0;
    return master + bytes_of(job.optimizer_states) +
           (job.optimizer == Optimizer::adam ? bytes_of(job.optimizer_states_sq) : 0.0);
}

double scalar_optimizer_state_bytes(const JobSpec& job) {
    if (job.optimizer != Optimizer::muon) {
        return optimizer_state_bytes(job);
    }
    JobSpec adam = job;
    adam.optimizer = Optimizer::adam;
    return optimizer_state_bytes(adam);
}

const char* to_string(Optimizer o) {
    switch (o) {
    case Optimizer::adam:
        return "adam";
    case Optimizer::sgd:
        return "sgd";
    case Optimizer::muon:
        return "muon";
    }
    return "adam";
}

const char* to_string(MuonTpMode m) {
    switch (m) {
    case MuonTpMode::blockwise:
        return "blockwise";
    case MuonTpMode::duplicated:
        return "duplicated";
    case MuonTpMode::distributed:
        return "distributed";
    }
    return "duplicated";
}

double model_state_bytes_per_param(const JobSpec& job) {
    return bytes_of(job.weights) + bytes_of(job.grads) + optimizer_state_bytes(job);
}

}  // namespace cleave
