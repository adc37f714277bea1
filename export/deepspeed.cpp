// A DeepSpeed config for a plan (`cleave plan --format deepspeed`).
#include "core/errors.hpp"
#include "export/export.hpp"

#include <nlohmann/json.hpp>

namespace cleave {

namespace {

/// transformers' Llama module names of Megatron-Bridge's LoRA targets (modeling_llama.py:
/// q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj).
std::string hf_lora_modules(uint8_t targets) {
    std::string out = "[";
    const auto add = [&out](const char* names) {
        out += (out.size() > 1 ? ", " : "") + std::string(names);
    };
    if ((targets & lora_target::linear_qkv) != 0) {
        add("\"q_proj\", \"k_proj\", \"v_proj\"");
    }
    if ((targets & lora_target::linear_proj) != 0) {
        add("\"o_proj\"");
    }
    if ((targets & lora_target::linear_fc1) != 0) {
        add("\"gate_proj\", \"up_proj\"");
    }
    if ((targets & lora_target::linear_fc2) != 0) {
        add("\"down_proj\"");
    }
    return out + "]";
}

}  // namespace

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
    const bool hf = job.stack.model_code == ModelCode::hf_transformers;
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
    if (p.recompute != Recompute::none && !hf) {
        ds["activation_checkpointing"] = {{"partition_activations", p.tp > 1},
                                          {"contiguous_memory_optimization", false},
                                          {"cpu_checkpointing", false}};
    }
    if (hf) {
        // accelerate / the HF Trainer wrap transformers' model, not a PipelineModule
        // (Rule::model_code keeps pp 1), and checkpoint through the Trainer's flag.
        ds.erase("pipeline");
    }
    os << ds.dump(2) << "\n";
    err << "cleave plan: note: plan " << to_string(p);
    if (hf) {
        err << "; pass this file to accelerate (deepspeed_config_file) or the HF Trainer "
            << "(--deepspeed)";
        if (p.recompute == Recompute::full) {
            err << "; --gradient_checkpointing True (whole decoder layers)";
        }
        if (job.peft != Peft::none) {
            err << "; peft LoraConfig(r=" << job.lora_dim << ", lora_alpha=" << job.lora_alpha
                << ", target_modules=" << hf_lora_modules(job.lora_targets)
                << (job.peft == Peft::dora ? ", use_dora=True" : "") << ")";
        }
        err << "\n";
        return;
    }
    err << "; DeepSpeed takes pipeline stages from PipelineModule(num_stages=" << p.pp << ")";
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
