// torchtitan job configuration for a plan (`cleave plan --format torchtitan`).
#include "core/errors.hpp"
#include "export/export.hpp"

#include "costmodel/float8.hpp"

#include <string>

namespace cleave {

namespace {

// torch.distributed.pipelining schedule names (torch/distributed/pipelining/schedules.py,
// get_schedule_class) that torchtitan's pipeline_parallel_schedule takes.
const char* schedule_name(const Plan& p) {
    switch (p.schedule) {
    case Schedule::gpipe:
        return "GPipe";
    case Schedule::interleaved:
        return "Interleaved1F1B";
    case Schedule::one_f_one_b:
        return "1F1B";
    case Schedule::dualpipev:
        return "DualPipeV";
    case Schedule::dualpipe:
        break;  // not a torch.distributed.pipelining schedule: write_export refuses it
    }
    return "1F1B";
}

/// One virtual stage's module names: torchtitan's Llama-style FQNs tok_embeddings, layers.i,
/// norm, output.
std::string model_part(const ModelSpec& m, const Plan& p, int64_t s, int64_t c) {
    std::string out = "[";
    const auto add = [&out](const std::string& name) {
        out += (out.size() > 1 ? ", \"" : "\"") + name + "\"";
    };
    if (s == 0 && c == 0) {
        add("tok_embeddings");
    }
    const int64_t first = chunk_first_layer(m.layers, p, s, c);
    for (int64_t i = 0; i < chunk_layers(m.layers, p, s, c); ++i) {
        add("layers." + std::to_string(first + i));
    }
    if (s == p.pp - 1 && c == p.vpp - 1) {
        add("norm");
        add("output");
    }
    return out + "]";
}

/// torch.compile and the loss as the plan priced them (SoftwareStack::torch_compile, loss,
/// loss_chunks): CompileConfig enable / components (config/configs.py @b5bcd76c66, CLI keys
/// --compile.enable / --compile.components); the loss is the config function's
/// (ChunkedLossWrapper.Config num_chunks, components/loss.py), not a CLI option.
void write_compile_and_loss(std::ostream& os, const JobSpec& job) {
    const SoftwareStack& s = job.stack;
    const bool loss_compiled = s.loss == LossImpl::torch_compiled;
    os << "\n[compile]\n";
    os << "enable = " << (s.torch_compile || loss_compiled ? "true" : "false") << "\n";
    std::string parts;
    if (s.torch_compile) {
        parts += "\"model\"";
    }
    if (loss_compiled) {
        parts += parts.empty() ? "\"loss\"" : ", \"loss\"";
    }
    os << "components = [" << parts << "]\n";
    os << "# loss and model_spec are set in the config function, not by CLI (torchtitan "
          "config/README.md @b5bcd76c66):\n";
    if (s.loss_chunks > 1) {
        os << "#   loss=ChunkedLossWrapper.Config(num_chunks=" << s.loss_chunks
           << ", loss_fn=CrossEntropyLoss.Config(global_vocab_size=...)),\n";
    } else {
        os << "#   loss=CrossEntropyLoss.Config(global_vocab_size=...),\n";
    }
}

/// torchao Float8 as the plan priced it (costmodel/float8.hpp): at b5bcd76c66 a converter in the
/// config function's model_registry(..., converters=[Float8LinearConverter.Config(...)])
/// (components/quantization/float8.py: recipe_name rowwise | rowwise_with_gw_hp); tensorwise and
/// the FSDP float8 keys as the last torchtitan that took them (9810191bb's dataclass config).
void write_float8(std::ostream& os, const JobSpec& job) {
    const Float8Run f = float8_run(job);
    if (!f.active) {
        if (job.compute == Dtype::fp8) {
            os << "# fp8 was priced as Transformer Engine's recipe (stack '" << job.stack.name
               << "'); torchtitan runs torchao Float8: --stack torchtitan-fsdp2 prices that\n";
        }
        return;
    }
    const std::string compile_arg =
        std::string("model_compile_enabled=") + (job.stack.torch_compile ? "True" : "False");
    if (f.recipe != Float8Recipe::tensorwise) {
        os << "#   model_spec=model_registry(\"<flavor>\", converters=[Float8LinearConverter.Config("
           << "recipe_name=\"" << to_string(f.recipe) << "\", filter_fqns=[\"lm_head\"], "
           << compile_arg << ")]),\n";
        return;
    }
    const auto py = [](bool b) { return b ? "True" : "False"; };
    os << "# float8 recipe tensorwise";
    if (const Float8Release* row = float8_release(job.stack)) {
        os << " (release " << row->release << ", torchtitan " << row->commit << ")";
    }
    os << " is not one b5bcd76c66 takes (6348d93d1, 2026-04-27, kept rowwise and "
          "rowwise_with_gw_hp);\n# at torchtitan 9810191bb (2026-02), where recipe_name unset is "
          "tensorwise and may not go with the FSDP keys:\n";
    os << "#   config.model_converters = ModelConvertersContainer.Config(converters=["
          "Float8LinearConverter.Config(enable_fsdp_float8_all_gather="
       << py(f.fsdp_all_gather) << ", precompute_float8_dynamic_scale_for_fsdp="
       << py(f.precompute_scale) << ")])\n";
    if (f.force_recompute_weight) {
        os << "#   float8.force_recompute_fp8_weight_in_bwd = true (torchtitan 473674acf..1fefaee08, "
              "2025-02..07 only)\n";
    }
}

}  // namespace

void write_torchtitan(std::ostream& os, const ModelSpec& model, const JobSpec& job, const RankedPlan& best) {
    if (job.packed_mean_len > 0.0) {  // costmodel/packing.hpp
        throw ConfigError("--format torchtitan: --packed-seq was priced as Megatron's THD packing "
                          "(Megatron-LM --sft, Megatron-Bridge offline packing); cleave writes no "
                          "torchtitan setting for it (use --format megatron or bridge)");
    }
    const Plan& p = best.plan;
    const int64_t m = num_microbatches(p, job);
    os << "# torchtitan job configuration for " << to_string(p) << "\n";
    os << "# Trainer.Config field paths at pytorch/torchtitan@b5bcd76c66 (config/configs.py); "
          "torchtitan\n# also takes each as a --section.option flag. World size "
       << plan_gpus(p) << ".\n";
    if (p.zero == 1 || p.zero == 2) {
        os << "# ZeRO-" << p.zero << ": FSDP2 without resharding after forward (torchtitan has "
           << "no optimizer-only sharding)\n";
    }
    if (p.recompute != Recompute::none) {
        os << "# activation checkpointing: activation_checkpoint = "
           << (p.recompute == Recompute::full ? "FullAC" : "SelectiveAC")
           << ".Config() (torchtitan/distributed/activation_checkpoint.py)\n";
    }
    os << "\n[training]\n";
    os << "num_tokens_per_microbatch_per_dp_rank = " << p.mbs * job.seq_len << "\n";
    os << "num_tokens_per_train_step = " << job.global_batch * job.seq_len << "\n";
    os << "max_context_length = " << job.seq_len << "\n";
    os << "\n[parallelism]\n";
    const bool sharded = p.zero >= 1;
    os << "data_parallel_replicate_degree = " << (sharded ? 1 : p.dp) << "\n";
    os << "data_parallel_shard_degree = " << (sharded ? p.dp : 1) << "\n";
    if (sharded) {
        os << "fsdp_reshard_after_forward = \"" << (p.zero == 3 ? "always" : "never") << "\"\n";
    }
    os << "tensor_parallel_degree = " << p.tp << "\n";
    os << "enable_sequence_parallel = " << (p.sp ? "true" : "false") << "\n";
    os << "context_parallel_degree = " << p.cp << "\n";
    os << "expert_parallel_degree = " << p.ep << "\n";
    os << "pipeline_parallel_degree = " << p.pp << "\n";
    if (p.pp > 1) {
        os << "pipeline_parallel_schedule = \"" << schedule_name(p) << "\"\n";
        os << "num_pp_microbatches = " << m << "\n";
        os << "module_fqns_per_model_part = [\n";
        if (p.schedule == Schedule::dualpipev) {
            // 2 pp stages in order; torchtitan places stage s and stage 2pp-1-s on rank s for
            // ScheduleDualPipeV ("v" style, 2 stages per rank: torchtitan/distributed/
            // pipeline_parallel.py stage_ids_this_rank @b5bcd76c66).
            Plan v = p;
            v.pp = 2 * p.pp;
            for (int64_t s = 0; s < v.pp; ++s) {
                os << "  " << model_part(model, v, s, 0) << ",\n";
            }
        } else {
            for (int64_t c = 0; c < p.vpp; ++c) {
                for (int64_t s = 0; s < p.pp; ++s) {
                    os << "  " << model_part(model, p, s, c) << ",\n";
                }
            }
        }
        os << "]\n";
    }
    write_compile_and_loss(os, job);
    write_float8(os, job);
}

}  // namespace cleave
