// A DeepSpeed config for a plan (`cleave plan --format deepspeed`).
#include "core/errors.hpp"
#include "export/export.hpp"

#include <nlohmann/json.hpp>

namespace cleave {

void write_deepspeed(std::ostream& os,
                     std::ostream& err,
                     const JobSpec& job,
                     const RankedPlan& best) {
    if (job.packed_mean_len > 0.0) {  // costmodel/packing.hpp
        throw ConfigError("--format deepspeed: --packed-seq was priced as Megatron's THD packing "
                          "(per-sample attention with cu_seqlens); a DeepSpeed config has no such "
                          "setting (use --format megatron or bridge)");
    }
    const Plan& p = best.plan;
    nlohmann::json ds = {
        {"train_batch_size", job.global_batch},
        {"train_micro_batch_size_per_gpu", p.mbs},
        {"gradient_accumulation_steps", num_microbatches(p, job)},
        // overlap_comm: the price hid the grad reduce-scatter behind backward (stack file).
        {"zero_optimization",
         {{"stage", p.zero}, {"overlap_comm", job.stack.overlap_grad_reduce}}},
        {"pipeline",
         {{"stages", p.pp},
          {"partition", "parameters"},
          {"activation_checkpoint_interval", p.recompute == Recompute::full ? 1 : 0}}},
    };
    if (job.compute == Dtype::fp16) {
        ds["fp16"] = {{"enabled", true}, {"loss_scale", 0}};
    } else if (job.compute != Dtype::fp32) {
        ds["bf16"] = {{"enabled", true}};
    }
    if (p.recompute != Recompute::none) {
        ds["activation_checkpointing"] = {{"partition_activations", p.tp > 1},
                                          {"contiguous_memory_optimization", false},
                                          {"cpu_checkpointing", false}};
    }
    os << ds.dump(2) << "\n";
    err << "cleave plan: note: plan " << to_string(p) << "; DeepSpeed takes pipeline stages from "
        << "PipelineModule(num_stages=" << p.pp << ")";
    if (p.tp > 1 || p.cp > 1 || p.sp) {
        err << "; tp=" << p.tp << ", cp=" << p.cp << (p.sp ? ", sequence parallel" : "")
            << " need Megatron-DeepSpeed's model-parallel arguments";
    }
    if (p.schedule == Schedule::interleaved) {
        err << "; DeepSpeed has no interleaved schedule (vpp=" << p.vpp << ")";
    }
    err << "\n";
}

}  // namespace cleave
