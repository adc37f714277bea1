#include "costmodel/loss.hpp"

#include "core/errors.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/flops.hpp"
#include "costmodel/num.hpp"

#include <algorithm>

namespace cleave {

double loss_impl_buffers(LossImpl impl, bool vocab_parallel) {
    switch (impl) {
    case LossImpl::megatron_unfused:
    case LossImpl::megatron_native:
        return 3.0;
    case LossImpl::te:
        return 1.0;
    case LossImpl::torch_eager:
        return vocab_parallel ? 8.0 : 6.0;
    case LossImpl::torch_compiled:
        return vocab_parallel ? 3.0 : 2.0;
    case LossImpl::unset:
        break;
    }
    CLEAVE_ASSERT(false, "loss_impl_buffers: the stack's loss is unset");
    return 0.0;
}

Bytes loss_peak_bytes(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    const SoftwareStack& s = job.stack;
    // torch's loss_parallel runs only with TP (torchtitan applies it unless disabled); Megatron
    // and Transformer Engine always compute on the vocabulary shards, which n already counts.
    const double n = loss_impl_buffers(s.loss, p.tp > 1);
    const double chunks = detail::d(std::max<int64_t>(1, s.loss_chunks));
    const double tok = tokens_per_gpu(job, p);
    const double logits =
        n * activation_bytes(job) * tok / chunks * detail::d(m.vocab) / detail::d(p.tp);
    const double gathered = chunks > 1.0 ? 4.0 * tok * detail::d(m.hidden) : 0.0;
    return bytes(logits + gathered);
}

LossTraffic loss_bytes_per_logit(LossImpl impl, double ab) {
    if (impl == LossImpl::torch_eager) {
        return {ab + 16.0, 24.0 + ab};
    }
    if (impl == LossImpl::torch_compiled) {
        return {2.0 * ab, 2.0 * ab};
    }
    return {ab + 16.0, 4.0 + ab};
}

Bytes pipeline_kept_outputs_bytes(const ModelSpec& m,
                                  const JobSpec& job,
                                  const Plan& p,
                                  int64_t microbatches) {
    if (p.pp <= 1 || job.stack.framework != StackFramework::torchtitan) {
        return {};
    }
    const double width =
        job.stack.loss_chunks > 1 ? detail::d(m.hidden) : detail::d(m.vocab) / detail::d(p.tp);
    return bytes(detail::d(microbatches) * tokens_per_gpu(job, p) * width * activation_bytes(job));
}

}  // namespace cleave
