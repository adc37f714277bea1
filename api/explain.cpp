#include "api/cleave.hpp"
#include "api/detail.hpp"
#include "costmodel/risks.hpp"

#include "costmodel/collectives.hpp"
#include "costmodel/float8.hpp"
#include "costmodel/packing.hpp"
#include "costmodel/peft.hpp"
#include "costmodel/precision.hpp"
#include "costmodel/train_cost.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

namespace cleave::api {

namespace {

nlohmann::json memory_json(const MemoryBreakdown& m) {
    return {{"weights", to_gib(m.weights)},
            {"grads", to_gib(m.grads)},
            {"optimizer", to_gib(m.optimizer)},
            {"activations", to_gib(m.activations)},
            {"logits", to_gib(m.logits)},
            {"comm_buffers", to_gib(m.comm_buffers)},
            {"reserved", to_gib(m.reserved)},
            {"total", to_gib(m.total)},
            {"peak_allocated", to_gib(m.allocated)},
            {"peak_reserved", to_gib(m.allocated + m.allocator)},
            {"allocator", to_gib(m.allocator)}};
}

nlohmann::json time_json(const TimeBreakdown& t) {
    return {{"compute", t.compute.value()},
            {"tp_comm", t.tp_comm.value()},
            {"cp_comm", t.cp_comm.value()},
            {"ep_comm", t.ep_comm.value()},
            {"pp_comm", t.pp_comm.value()},
            {"bubble", t.bubble.value()},
            {"dp_comm", t.dp_comm.value()},
            {"optimizer", t.optimizer.value()}};
}

// One micro-batch's fwd + bwd not named by a kind (MoE expert overhead, offload waits): what the
// gemm, attention, memory, recompute and comm parts leave, at least 0. The JSON's by_kind_s and
// the table's "by kind" rows both read it here.
Seconds other_kind(const StageCost& c) {
    const Seconds comm = c.fwd_comm + c.bwd_comm;
    return max(Seconds{},
               c.fwd + c.bwd - c.gemm - c.attention - c.memory_bound - c.recompute - comm);
}

nlohmann::json stages_json(const Plan& p, const Estimate& e) {
    const auto m = static_cast<double>(e.microbatches);
    auto out = nlohmann::json::array();
    for (int64_t s = 0; s < p.pp; ++s) {
        const StageCost& c = stage_cost(e, s, p.pp);
        const Seconds comm = c.fwd_comm + c.bwd_comm;
        out.push_back({{"stage", s},
                       {"layers", c.layers},
                       {"memory_gib", memory_json(c.memory)},
                       {"fwd_s", c.fwd.value()},
                       {"bwd_s", c.bwd.value()},
                       // busy time of the iteration: every micro-batch's forward and backward
                       {"time_s", (c.fwd + c.bwd).value() * m},
                       {"fwd_comm_s", c.fwd_comm.value()},
                       {"bwd_comm_s", c.bwd_comm.value()},
                       {"dp_grad_sync_s", c.dp_grad_sync.value()},
                       {"optimizer_s", c.optimizer.value()},
                       // one micro-batch's fwd + bwd by kind, as the table's "by kind" rows
                       {"by_kind_s",
                        {{"gemm", c.gemm.value()},
                         {"attention", c.attention.value()},
                         {"memory_bound", c.memory_bound.value()},
                         {"recompute", c.recompute.value()},
                         {"comm", comm.value()},
                         {"other", other_kind(c).value()}}}});
    }
    return out;
}

nlohmann::json or_null(double v, bool known) {
    return known ? nlohmann::json(v) : nlohmann::json(nullptr);
}

}  // namespace

void add_train_json(nlohmann::json& j, const Inputs& in, const Estimate& e) {
    const TrainCostOptions& o = in.train;
    if (!(o.tokens > 0.0) || !(e.tokens_per_s > 0.0)) {
        return;
    }
    const TrainCost c = train_cost(o, e.tokens_per_s, in.job.gpus);
    constexpr double s_per_day = 86400.0;
    j["train_days"] = c.wall_time.value() / s_per_day;  // inf (not finishing) dumps as null
    j["gpu_hours"] = c.gpu_hours;
    j["energy_mwh"] = or_null(c.energy_mwh, o.gpu_power_w > 0.0);
    j["cost"] = or_null(c.cost_usd, o.price_per_gpu_hour_usd > 0.0);
    j["train"] = {{"tokens", o.tokens},
                  {"compute_days", c.compute_time.value() / s_per_day},
                  {"lost_days", c.lost_time.value() / s_per_day},
                  {"interruptions", c.interruptions},
                  {"finishes", c.finishes},
                  {"interruptions_per_gpu_hour", o.interruptions_per_gpu_hour},
                  {"checkpoint_interval_h", o.checkpoint_interval.value() / 3600.0},
                  {"restart_h", o.restart_time.value() / 3600.0},
                  {"gpu_power_w", o.gpu_power_w},
                  {"pue", o.pue},
                  {"price_per_gpu_hour_usd", o.price_per_gpu_hour_usd}};
}

nlohmann::json plan_to_json(const Plan& p, const JobSpec& job) {
    nlohmann::json j = {{"dp", p.dp},
                        {"tp", p.tp},
                        {"pp", p.pp},
                        {"cp", p.cp},
                        {"ep", p.ep},
                        {"vpp", p.vpp},
                        {"mbs", p.mbs},
                        {"microbatches", num_microbatches(p, job)},
                        {"schedule", to_string(p.schedule)},
                        {"recompute", to_string(p.recompute)},
                        {"sp", p.sp},
                        {"zero", p.zero},
                        {"first_stage_layers", p.first_layers},
                        {"last_stage_layers", p.last_layers},
                        {"flags", to_flags(p)}};
    if (p.ep > 1 || p.etp > 0) {  // the expert grid (dense plans keep their fields as they were)
        j["etp"] = expert_tp(p);
        j["edp"] = expert_dp(p);
    }
    return j;
}

namespace {

/// The precision priced: the requested dtype, its FP8 recipe, the dtype the GPU runs the linear
/// GEMMs in (costmodel/precision.hpp runnable_dtype) and the 16-bit one of the rest.
nlohmann::json precision_json(const Inputs& in) {
    const JobSpec& j = in.job;
    nlohmann::json o = {{"dtype", to_string(j.compute)},
                        {"gemm_dtype", to_string(runnable_dtype(in.cluster.gpu, j.compute))},
                        {"unquantised_dtype", to_string(unquantised(j.compute))},
                        {"weights", to_string(j.weights)}};
    if (const Float8Run f = float8_run(j); f.active) {
        // torchao Float8 under torchtitan (costmodel/float8.hpp), torchtitan's key names.
        o["float8"] = {{"recipe_name", to_string(f.recipe)},
                       {"enable_fsdp_float8_all_gather", f.fsdp_all_gather},
                       {"precompute_float8_dynamic_scale_for_fsdp", f.precompute_scale},
                       {"force_recompute_fp8_weight_in_bwd", f.force_recompute_weight},
                       {"release", float8_release(j.stack)->release}};
    } else if (j.compute == Dtype::fp8) {
        o["fp8_recipe"] = to_string(j.fp8_recipe);
    }
    return o;
}

/// One caution: the full sentence (JSON "cautions", the report) and its one line for the tables,
/// which ends with the docs section that holds the rest.
struct Caution {
    std::string text;
    std::string line;
};

// Where the prediction is known to be weaker than the published-run table says it is: said next
// to the numbers (docs/costmodel.md section 9), not a risk to the job.
std::vector<Caution> caution_list(const Inputs& in, std::optional<Schedule> schedule) {
    std::vector<Caution> out;
    const auto add = [&out](std::string text, std::string line) {
        out.push_back({std::move(text), std::move(line)});
    };
    // DualPipe / DualPipeV hide each rank's all-to-all and pipeline sends under the other
    // direction's compute, as the DeepSeek-V3 report says they do; against that report's own
    // step the price is far too fast (docs/costmodel.md section 9, "DualPipe").
    if (schedule && bidirectional(*schedule)) {
        add("DualPipe: the all-to-all and pipeline sends are priced as hidden under the other "
            "direction's compute, as the DeepSeek-V3 report describes; cleave's one published "
            "check, DeepSeek-V3 as that report trained it (2,048 H800, PP 16 x EP 64, FP8), is "
            "predicted at 14.1 s a step against the report's ~19.9 s (180K H800 GPU-hours per "
            "trillion tokens), 29 % fast, while 1F1B with the all-to-all exposed prices 23.7 s; "
            "if the overlap is as full as the report says, the compute under it is what is priced "
            "fast (docs/costmodel.md section 9): treat this time as optimistic",
            "DualPipe: its overlap is priced as complete; DeepSeek-V3's published step is 29 % "
            "slower (docs/costmodel.md section 9)");
    }
    // Transformers' model code under accelerate + DeepSpeed: the device work is priced, the
    // host's (DeepSpeed's hooks per sub-module, PEFT and transformers' Python) is not
    // (docs/costmodel.md section 3.3).
    if (in.job.stack.model_code == ModelCode::hf_transformers) {
        add("transformers' model code under accelerate + DeepSpeed: cleave prices the GPU's work, "
            "not the host's (DeepSpeed's Python hooks around every sub-module, PEFT and "
            "transformers' eager ops), which can outlast it; MLPerf v4.0's two Llama 2 70B LoRA "
            "runs on this stack (public_runs_mlperf.csv rows 5088, 5089) took 24-41 % longer "
            "than predicted (docs/costmodel.md section 3.3): treat this time as optimistic",
            "transformers + DeepSpeed: host time not priced; published runs 24-41 % slower than "
            "predicted (docs/costmodel.md section 3.3)");
    }
    if (in.model.attention_sinks) {
        add("attention with learnable sinks (GPT-OSS): Transformer Engine runs it without "
            "FlashAttention (cuDNN fused attention only, priced at its head-dim-64 rate on "
            "Hopper); Megatron-Bridge's published GPT-OSS 120B runs are 21-53 % slower than "
            "cleave predicts on every system (public_runs_2025.csv rows 1007, 1016, 1024, 1027; "
            "public_runs_2026h1.csv rows 2003, 2019, 2023, 2028; docs/costmodel.md section 9): "
            "treat this time as optimistic",
            "attention with learnable sinks (GPT-OSS): published runs are 21-53 % slower than "
            "predicted (docs/costmodel.md section 9)");
    }
    // Packed samples shorter than the shortest call the stack's attention curve measured are read
    // at that call's efficiency (attention.cpp clamps the curve): optimistic, more so under CP.
    if (packed(in.job)) {
        const auto lower = [](std::string s) {
            for (char& ch : s) {
                ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
            }
            return s;
        };
        double shortest = 0.0;
        for (const AttentionCurve& c : in.job.stack.attention_curves) {
            if (!c.seq.empty() && !c.gpu.empty() &&
                lower(in.cluster.gpu.name).find(lower(c.gpu)) != std::string::npos) {
                shortest = shortest > 0.0 ? std::min(shortest, c.seq.front()) : c.seq.front();
            }
        }
        const double span = attention_span(in.job);
        if (span / 2.0 < shortest) {  // below it at cp 1, or at cp >= 2
            add("packed samples: the attention core runs calls of " + detail::f("%g", span) +
                    " / cp keys, and a call shorter than the shortest the stack's attention "
                    "curve measured on this GPU (" + detail::f("%g", shortest) +
                    " keys) is priced at that call's efficiency: where " + detail::f("%g", span) +
                    " / cp < " + detail::f("%g", shortest) +
                    ", treat the attention core as optimistic",
                "packed samples: the core's calls of " + detail::f("%g", span) +
                    " / cp keys, where shorter than " + detail::f("%g", shortest) +
                    " (the attention curve's shortest), are priced optimistic");
        }
    }
    // Hopper: every source of published H100 runs is slower than cleave predicts except one
    // layout (docs/costmodel.md section 9, "The four time files" and "Hopper").
    const std::string& gpu = in.cluster.gpu.name;
    if (gpu.find("H100") != std::string::npos || gpu.find("H800") != std::string::npos ||
        gpu.find("H200") != std::string::npos) {
        const bool fp8 = is_quantised(in.job.compute);
        add("Hopper: NVIDIA's published H100 training runs are 5-18 % slower than cleave "
            "predicts on most layouts (public_runs_2024.csv, the 38 DGX Cloud rows on NeMo 24.09 "
            "/ 24.11: signed mean -9 %; Megatron-Bridge's H100 tables 25.11-26.04 and DGX Cloud's "
            "on NeMo 25.04: -5 to -15 %); within 2 % only for Megatron-Bridge's Llama 3 70B at "
            "TP 4 PP 8. The cause is not identified (docs/costmodel.md section 9): " +
                std::string(fp8 ? "in FP8 the same 38 DGX Cloud layouts are 12 % slower than "
                                  "cleave predicts on average and up to 23 % "
                                  "(tests/data/public_runs_2024_fp8.csv, the recipes' FP8 tables): "
                                  "treat this time as up to about 20 % optimistic"
                                : "treat this time as up to about 15 % optimistic"),
            fp8 ? "Hopper: published H100 FP8 runs are up to 23 % slower than predicted: up to "
                  "~20 % optimistic (docs/costmodel.md section 9)"
                : "Hopper: published H100 runs are 5-18 % slower than predicted: up to ~15 % "
                  "optimistic (docs/costmodel.md section 9)");
    }
    // Blackwell = a GPU with MXFP8 tensor cores (the profile's mxfp8 peak; Hopper has none).
    const int64_t mamba = kind_count(in.model, LayerKind::mamba, 0,
                                     static_cast<int64_t>(in.model.layer_kinds.size()));
    if (mamba > 0 && peak_flops(in.cluster.gpu, Dtype::mxfp8) > FlopsPerSecond{}) {
        add("Mamba-2 layers on Blackwell: Megatron-Bridge's published Nemotron 3 runs on B200, "
            "GB200 and GB300 are 14-29 % slower than cleave predicts (public_runs_2026h1.csv "
            "rows 2030, 2031, 2033, 2034; the H100 row 2026 is within 5 %); what the missing "
            "time is (the SSD scan's Triton kernels on Blackwell are a lead) is not measured "
            "(docs/costmodel.md section 9): treat this time as optimistic",
            "Mamba-2 layers on Blackwell: published Nemotron 3 runs are 14-29 % slower than "
            "predicted (docs/costmodel.md section 9)");
    }
    if (in.model.moe.enabled() && is_quantised(in.job.compute) &&
        in.cluster.node.quantised_expert_overhead <= Seconds{}) {
        add("quantised expert GEMMs' fixed cost per local expert is not priced on this profile "
            "(no calibration overlay sets [moe] quantised_expert_overhead_us; the shipped overlays "
            "were fitted at 160-1210 us per local expert per MoE layer per micro-batch, "
            "docs/costmodel.md section 4.2): the time may be optimistic",
            "quantised expert GEMMs' fixed cost per local expert is not priced on this profile: "
            "optimistic (docs/costmodel.md section 4.2)");
    }
    // A release the stack has no data for is priced as the nearest earlier one it knows.
    if (std::string why = unknown_release_caution(in.job.stack); !why.empty()) {
        add(std::move(why),
            "release " + in.job.stack.release + " is not one stack '" + in.job.stack.name +
                "' knows: priced as one it knows (docs/stacks.md)");
    }
    const std::string& fitted = in.cluster.node.quantised_expert_recipe;
    if (in.model.moe.enabled() && is_quantised(in.job.compute) &&
        in.cluster.node.quantised_expert_overhead > Seconds{} && !fitted.empty()) {
        const std::string job = in.job.compute == Dtype::fp8
                                    ? std::string("fp8-") + to_string(in.job.fp8_recipe)
                                    : std::string(to_string(in.job.compute));
        if (job != fitted) {
            add("the quantised expert GEMMs' fixed cost per local expert on this "
                "profile was fitted to " +
                    fitted + " runs; this job runs " + job +
                    ", for which the value is a guess (docs/costmodel.md section 4.2)",
                "quantised expert GEMMs' fixed cost was fitted to " + fitted +
                    " runs, this job runs " + job + ": a guess (docs/costmodel.md section 4.2)");
        }
    }
    return out;
}

}  // namespace

std::vector<std::string> cautions(const Inputs& in, std::optional<Schedule> schedule) {
    std::vector<std::string> out;
    for (Caution& c : caution_list(in, schedule)) {
        out.push_back(std::move(c.text));
    }
    return out;
}

std::vector<std::string> caution_lines(const Inputs& in, std::optional<Schedule> schedule) {
    std::vector<std::string> out;
    for (Caution& c : caution_list(in, schedule)) {
        out.push_back(std::move(c.line));
    }
    return out;
}

static nlohmann::json estimate_json_base(const Inputs& in, const Plan& p, const Estimate& e) {
    auto risks = nlohmann::json::array();
    for (const Risk& r : describe_risks(in.model, in.cluster, in.job, p, e)) {
        risks.push_back({{"kind", to_string(r.kind)}, {"message", r.message}, {"fix", r.fix}});
    }
    nlohmann::json j = {
        {"plan", plan_to_json(p, in.job)},
        {"iteration_time_s", e.iteration_time.value()},
        {"tokens_per_s", e.tokens_per_s},
        {"tflops_per_gpu", e.tflops_per_gpu},
        {"mfu", e.mfu},
        {"hfu", e.hfu},
        {"bubble_ratio", e.bubble_ratio},
        {"memory_gib", memory_json(e.memory)},
        {"usable_memory_gib", to_gib(e.memory_usable)},
        {"memory_headroom_gib", to_gib(e.memory_headroom)},
        // usable - headroom - peak: negative when the plan does not fit
        {"memory_spare_gib", to_gib(e.memory_usable - e.memory_headroom - e.memory.total)},
        {"peak_memory_stage", e.peak_memory_stage},
        {"fits", e.fits},
        {"time_s", time_json(e.time)},
        {"comm_bytes_per_gpu",
         {{"dp", e.comm_bytes_per_gpu.dp.value()},
          {"tp", e.comm_bytes_per_gpu.tp.value()},
          {"pp", e.comm_bytes_per_gpu.pp.value()},
          {"cp", e.comm_bytes_per_gpu.cp.value()},
          {"ep", e.comm_bytes_per_gpu.ep.value()}}},
        {"model_flops", e.model_flops.value()},
        {"hardware_flops", e.hardware_flops.value()},
        {"stages", stages_json(p, e)},
        {"precision", precision_json(in)},
        {"stack", stack_json(in.job.stack)},
        {"risks", risks}};
    if (const auto c = cautions(in, p.schedule); !c.empty()) {
        j["cautions"] = c;
    }
    if (const auto n = plan_notes(p); !n.empty()) {
        j["notes"] = n;
    }
    if (e.expert_overhead > Seconds{}) {  // of time_s.compute
        j["expert_overhead_s"] = e.expert_overhead.value();
    }
    if (e.comm_bytes_per_gpu.ep.value() > 0.0) {  // the EP traffic per link
        j["comm_bytes_per_gpu"]["ep_nvlink"] = e.comm_bytes_per_gpu.ep_nvlink.value();
        j["comm_bytes_per_gpu"]["ep_nic"] = e.comm_bytes_per_gpu.ep_nic.value();
    }
    return j;
}

double peft_trainable(const ModelSpec& m, const JobSpec& job) {
    return lora_params_per_layer(m, job) * static_cast<double>(m.layers);
}

std::string peft_summary(const ModelSpec& m, const JobSpec& job) {
    if (job.peft == Peft::none) {
        return "";
    }
    const double trained = peft_trainable(m, job);
    const double all = static_cast<double>(params_total(m));
    return std::string(to_string(job.peft)) + " dim " + std::to_string(job.lora_dim) + ", alpha " +
           detail::f("%g", job.lora_alpha) + " (scale " +
           detail::f("%g", job.lora_alpha / static_cast<double>(job.lora_dim)) + "), targets " +
           lora_targets_string(job.lora_targets) + ": " + detail::f("%.2f", trained / 1e6) +
           "M trainable of " + detail::f("%.2f", all / 1e9) + "B parameters (" +
           detail::f("%.3f", 100.0 * trained / all) + " %), base frozen";
}

std::string cuda_graph_summary(const GpuSpec& gpu, const JobSpec& job) {
    if (job.cuda_graph_impl == CudaGraphImpl::none) {
        return "";
    }
    return std::string(to_string(job.cuda_graph_impl)) + " over " +
           cuda_graph_scope_string(job.cuda_graph_scope) + ": the launch gaps of their scope not paid" +
           (gpu.launch_gap.value() > 0.0
                ? " (" + detail::f("%g", gpu.launch_gap.value() * 1e6) + " us a launch on this GPU)"
                : " (no launch gap priced on this GPU: no change to the price)");
}

std::string packed_summary(const JobSpec& job) {
    if (!packed(job)) {
        return "";
    }
    return "packs of " + std::to_string(job.seq_len) + " tokens, samples of mean " +
           detail::f("%g", job.packed_mean_len) + " (std " + detail::f("%g", job.packed_len_std) +
           ") tokens: attention per sample, span E[L^2]/E[L] " +
           detail::f("%g", attention_span(job)) + " = " +
           detail::f("%.4g", packed_attention_scale(job)) +
           " of the unpacked core; one pack a micro-batch";
}

nlohmann::json packed_json(const JobSpec& job) {
    return {{"packed_sequence_size", job.seq_len},
            {"mean_len", job.packed_mean_len},
            {"len_std", job.packed_len_std},
            {"attention_span", attention_span(job)},
            {"attention_scale", packed_attention_scale(job)}};
}

nlohmann::json peft_json(const ModelSpec& m, const JobSpec& job) {
    return {{"method", to_string(job.peft)},
            {"dim", job.lora_dim},
            {"alpha", job.lora_alpha},
            {"target_modules", lora_targets_string(job.lora_targets)},
            {"trainable_params", peft_trainable(m, job)},
            {"frozen_params", static_cast<double>(params_total(m))}};
}

nlohmann::json estimate_to_json(const Inputs& in, const Plan& p, const Estimate& e) {
    nlohmann::json j = estimate_json_base(in, p, e);
    if (in.job.peft != Peft::none) {
        j["peft"] = peft_json(in.model, in.job);
    }
    if (in.job.cuda_graph_impl != CudaGraphImpl::none) {
        j["cuda_graphs"] = {{"impl", to_string(in.job.cuda_graph_impl)},
                            {"scope", cuda_graph_scope_string(in.job.cuda_graph_scope)}};
    }
    if (packed(in.job)) {
        j["packed_seq"] = packed_json(in.job);
    }
    add_train_json(j, in, e);
    return j;
}

}  // namespace cleave::api

namespace cleave::api {

namespace {

using detail::f;

std::string pad(const std::string& s, size_t w) {
    return s.size() >= w ? s : std::string(w - s.size(), ' ') + s;
}

/// " (tensorwise scaling; linear GEMMs in bf16 on this GPU)": what the dtype means here.
std::string precision_note(const Inputs& in) {
    const JobSpec& j = in.job;
    std::string n;
    if (const Float8Run f = float8_run(j); f.active) {
        n = std::string("torchao float8 ") + to_string(f.recipe) +
            (f.fsdp_all_gather ? ", float8 FSDP all-gather" : "");
    } else if (j.compute == Dtype::fp8) {
        n = std::string(to_string(j.fp8_recipe)) + " scaling";
    }
    if (j.weights == Dtype::fp8) {
        n += std::string(n.empty() ? "" : ", ") + "fp8 weights";
    }
    const Dtype run = runnable_dtype(in.cluster.gpu, j.compute);
    if (run != j.compute) {
        n += std::string(n.empty() ? "" : "; ") + "linear GEMMs in " + to_string(run) +
             " on this GPU";
    }
    return n.empty() ? n : " (" + n + ")";
}

void print_headline(std::ostream& os, const Inputs& in, const Plan& p, const Estimate& e) {
    os << "# cleave explain: " << in.model.name << " on " << in.cluster.name << ", " << in.job.gpus
       << " GPUs, gbs " << in.job.global_batch << ", seq " << in.job.seq_len << ", "
       << to_string(in.job.compute) << precision_note(in) << "\n";
    os << "# plan: " << to_flags(p) << " (" << e.microbatches << " micro-batches)\n";
    if (const std::string peft = peft_summary(in.model, in.job); !peft.empty()) {
        os << "# peft: " << peft << "\n";
    }
    if (const std::string pk = packed_summary(in.job); !pk.empty()) {
        os << "# packed: " << pk << "\n";
    }
    if (const std::string cg = cuda_graph_summary(in.cluster.gpu, in.job); !cg.empty()) {
        os << "# cuda graphs: " << cg << "\n";
    }
    os << "# iteration_s tokens_per_s tflops_per_gpu    mfu    hfu  bubble  fits\n";
    os << "  " << pad(f("%.4g", e.iteration_time.value()), 11) << " "
       << pad(f("%.4g", e.tokens_per_s), 12) << " " << pad(f("%.1f", e.tflops_per_gpu), 14) << " "
       << pad(f("%.3f", e.mfu), 6) << " " << pad(f("%.3f", e.hfu), 6) << " "
       << pad(f("%.3f", e.bubble_ratio), 7) << " " << pad(e.fits ? "yes" : "NO", 5) << "\n";
    const double spare = to_gib(e.memory_usable - e.memory_headroom - e.memory.total);
    os << "# "
       << (e.fits ? "fits with " + f("%.1f", spare) + " GiB to spare"
                  : "misses by " + f("%.1f", -spare) + " GiB")
       << " (peak " << f("%.1f", to_gib(e.memory.total)) << " + headroom "
       << f("%.1f", to_gib(e.memory_headroom)) << " of " << f("%.1f", to_gib(e.memory_usable))
       << " GiB usable)\n";
}

void print_memory(std::ostream& os, const Plan& p, const Estimate& e, bool expandable) {
    os << "#\n# memory per GPU (GiB), usable " << f("%.1f", to_gib(e.memory_usable))
       << "; peak stage " << e.peak_memory_stage << "\n";
    os << "# stage layers weights   grads optimizer activations  logits    comm   alloc     rsv "
          "  out   total\n";
    for (int64_t s = 0; s < p.pp; ++s) {
        if (s > 1 && s < p.pp - 1) {
            continue;  // middle stages equal stage 1
        }
        const StageCost& c = stage_cost(e, s, p.pp);
        const MemoryBreakdown& m = c.memory;
        const int64_t shown = s == 1 && p.pp > 2 ? e.middle_stage : s;
        os << "  " << pad(std::to_string(shown), 5) << " " << pad(std::to_string(c.layers), 6);
        for (Bytes b : {m.weights,
                        m.grads,
                        m.optimizer,
                        m.activations,
                        m.logits,
                        m.comm_buffers}) {
            os << " "
               << pad(f("%.2f", to_gib(b)),
                      b == m.optimizer     ? 9
                      : b == m.activations ? 11
                                           : 7);
        }
        os << " " << pad(f("%.2f", to_gib(m.allocated)), 7) << " "
           << pad(f("%.2f", to_gib(m.allocated + m.allocator)), 7) << " "
           << pad(f("%.1f", to_gib(m.reserved)), 5) << " " << pad(f("%.2f", to_gib(m.total)), 7)
           << "\n";
    }
    os << "# alloc = tensors at the peak (torch max_memory_allocated); rsv = what the caching\n"
          "# allocator reserves for them (max_memory_reserved: the stack's allocator_overhead);\n"
          "# out = the profile's memory outside the allocator (CUDA context, NCCL); total = what\n"
          "# must fit: alloc + ";
    const MemoryBreakdown& pm = e.memory;
    os << f("%.1f", pm.allocated.value() > 0.0 ? 100.0 * to_gib(pm.total - pm.allocated - pm.reserved) /
                                                     to_gib(pm.allocated)
                                               : 0.0)
       << (expandable ? " % page residue (a guess) + out: under expandable segments the allocator\n"
                        "# unmaps its free pages before it reports OOM; rsv is what it holds when "
                        "memory is ample\n"
                      : " % the allocator cannot give back + out: before it reports OOM it frees\n"
                        "# every cached segment that holds no tensor; rsv is what it holds when "
                        "memory is ample\n");
    if (p.schedule == Schedule::dualpipe) {
        os << "# dualpipe: row r is pipeline rank r, which holds stage r and stage " << p.pp - 1
           << "-r: the memory and the layers of both (weights and grads of both stages, their\n"
              "# optimizer states sharded over the two ranks that hold each stage, "
           << p.pp + 1 << " micro-batches of one stage's activations)\n";
    } else if (p.schedule == Schedule::dualpipev) {
        os << "# dualpipev: row r is pipeline rank r, which holds stage r and stage "
           << 2 * p.pp - 1 << "-r of " << 2 * p.pp
           << " stages (rank 0 the embedding and the output layer): the memory and the\n"
              "# layers of both, "
           << 2 * p.pp + 1 << " micro-batches of one stage's activations\n";
    }
    if (e.middle_stages_differ) {
        os << "# stages 1.." << p.pp - 2 << " hold different layer kinds (a hybrid model): each is "
           << "priced; the one shown holds the most memory\n";
    } else if (p.pp > 3) {
        os << "# stages 2.." << p.pp - 2
           << " hold what stage 1 holds, or less (fewer micro-batches "
           << "in flight)\n";
    }
}

void print_time(std::ostream& os, const Plan& p, const Estimate& e) {
    const TimeBreakdown& t = e.time;
    os << "#\n# time per iteration (s), slowest stage\n";
    os << "#   compute  tp_comm  cp_comm  ep_comm  pp_comm   bubble  dp_comm optimizer  "
          "iteration\n";
    os << " ";
    for (Seconds s : {t.compute, t.tp_comm, t.cp_comm, t.ep_comm, t.pp_comm, t.bubble, t.dp_comm}) {
        os << " " << pad(f("%.4g", s.value()), 8);
    }
    os << " " << pad(f("%.4g", t.optimizer.value()), 9) << " "
       << pad(f("%.4g", e.iteration_time.value()), 10) << "\n";
    if (e.expert_overhead > Seconds{}) {
        os << "#   of compute, " << f("%.4g", e.expert_overhead.value())
           << " s is the quantised expert GEMMs' fixed cost per local expert (the profile's "
              "calibration overlay, fitted)\n";
    }
    if (t.straggler > Seconds{}) {
        os << "#   of compute, " << f("%.4g", t.straggler.value())
           << " s is the slowest of the job's GPUs (the profile's throughput_spread)\n";
    }
    os << "#\n# one micro-batch per stage (ms): fwd and bwd include their exposed comm\n";
    os << "# stage      fwd      bwd fwd_comm bwd_comm dp_grad_sync optimizer\n";
    for (int64_t s = 0; s < p.pp; ++s) {
        if (s > 1 && s < p.pp - 1) {
            continue;
        }
        const StageCost& c = stage_cost(e, s, p.pp);
        os << "  " << pad(std::to_string(s), 5);
        for (Seconds x : {c.fwd, c.bwd, c.fwd_comm, c.bwd_comm}) {
            os << " " << pad(f("%.3f", to_ms(x)), 8);
        }
        os << " " << pad(f("%.3f", to_ms(c.dp_grad_sync)), 12) << " "
           << pad(f("%.3f", to_ms(c.optimizer)), 9) << "\n";
    }
    os << "#\n# fwd + bwd of one micro-batch by kind (ms): gemm = linear-layer GEMMs, attention = its\n"
          "# core, memory = memory-bound kernels, other = MoE expert overhead, offload waits\n";
    os << "# stage     gemm attention   memory recompute     comm    other\n";
    for (int64_t s = 0; s < p.pp; ++s) {
        if (s > 1 && s < p.pp - 1) {
            continue;
        }
        const StageCost& c = stage_cost(e, s, p.pp);
        const Seconds comm = c.fwd_comm + c.bwd_comm;
        os << "  " << pad(std::to_string(s), 5);
        for (Seconds x : {c.gemm, c.attention, c.memory_bound, c.recompute, comm, other_kind(c)}) {
            os << " " << pad(f("%.3f", to_ms(x)), 8);
        }
        os << "\n";
    }
}

void print_group(
    std::ostream& os, const char* name, int64_t size, const GroupLink& l, Collective c, Bytes b) {
    const double factor = busbw_factor(c, size);
    const double busbw = to_gbps(l.busbw);
    const double algbw = factor > 0 ? busbw / factor : busbw;
    os << "  " << pad(name, 5) << " " << pad(std::to_string(size), 4) << " "
       << pad(to_string(l.kind), 7) << " " << pad(std::to_string(l.nodes), 5) << " "
       << pad(to_string(c), 14) << " " << pad(f("%.3f", factor), 6) << " "
       << pad(f("%.4g", busbw), 8) << " " << pad(f("%.4g", algbw), 8) << " "
       << pad(f("%.3f", to_gib(b)), 10) << "\n";
}

void print_traffic(std::ostream& os, const Inputs& in, const Plan& p, const Estimate& e) {
    const PlanLinks l = plan_links(in.cluster, p);
    os << "#\n# traffic per GPU per iteration; algbw = busbw / factor (nccl-tests "
          "PERFORMANCE.md)\n";
    os << "# group size    link nodes     collective factor busbw(GB/s) algbw  sent(GiB)\n";
    const CommBytes& b = e.comm_bytes_per_gpu;
    print_group(os, "tp", p.tp, l.tp, p.sp ? Collective::all_gather : Collective::all_reduce, b.tp);
    print_group(os, "cp", p.cp, l.cp, Collective::send_recv, b.cp);
    print_group(os, "ep", p.ep, l.ep, Collective::all_to_all, b.ep);
    if (b.ep.value() > 0.0) {
        // All-to-all per link: r of the ep ranks share this GPU's NVLink domain.
        os << "#   ep per link: " << l.ep_a2a.r << " of " << l.ep_a2a.n
           << " EP ranks in this GPU's NVLink domain (dispatcher "
           << to_string(in.job.stack.moe_dispatcher) << "): nvlink "
           << f("%.3f", to_gib(b.ep_nvlink)) << " GiB at " << f("%.4g", to_gbps(l.ep_a2a.nvlink_bw))
           << " GB/s, nic " << f("%.3f", to_gib(b.ep_nic)) << " GiB at "
           << f("%.4g", to_gbps(l.ep_a2a.nic_bw))
           << " GB/s (the two at once; the busbw column above is the ring's, not used for "
              "the all-to-all)\n";
    }
    print_group(os,
                "dp",
                p.dp * p.cp,
                l.dp,
                p.zero == 0 ? Collective::all_reduce : Collective::reduce_scatter,
                b.dp);
    print_group(os, "pp", p.pp, l.pp, Collective::send_recv, b.pp);
}

// Word-wraps `text` to 100 columns; the first line starts with `first`, the rest with `indent`.
void wrap(std::ostream& os,
          const std::string& first,
          const std::string& indent,
          const std::string& text) {
    constexpr size_t width = 100;
    std::string line = first;
    bool fresh = true;  // nothing but the prefix on this line yet
    size_t i = 0;
    while (i < text.size()) {
        size_t j = text.find(' ', i);
        if (j == std::string::npos) {
            j = text.size();
        }
        const std::string word = text.substr(i, j - i);
        if (!fresh && line.size() + 1 + word.size() > width) {
            os << line << "\n";
            line = indent;
            fresh = true;
        }
        line += fresh ? word : " " + word;
        fresh = false;
        i = j + 1;
    }
    os << line << "\n";
}

void print_train(std::ostream& os, const Inputs& in, const Estimate& e) {
    const TrainCostOptions& o = in.train;
    if (!(o.tokens > 0.0) || !(e.tokens_per_s > 0.0)) {
        return;
    }
    const TrainCost c = train_cost(o, e.tokens_per_s, in.job.gpus);
    os << "#\n# time and cost to train " << f("%.4g", o.tokens) << " tokens\n";
    os << "#   days  compute_days lost_days interruptions  gpu_hours energy(MWh)    cost($)\n";
    os << "  " << pad(f("%.2f", c.wall_time.value() / 86400.0), 6) << " "
       << pad(f("%.2f", c.compute_time.value() / 86400.0), 13) << " "
       << pad(f("%.2f", c.lost_time.value() / 86400.0), 9) << " "
       << pad(f("%.1f", c.interruptions), 13) << " " << pad(f("%.4g", c.gpu_hours), 10) << " "
       << pad(o.gpu_power_w > 0.0 ? f("%.4g", c.energy_mwh) : "-", 11) << " "
       << pad(o.price_per_gpu_hour_usd > 0.0 ? f("%.4g", c.cost_usd) : "-", 10) << "\n";
    os << "# lost: " << f("%.3g", o.interruptions_per_gpu_hour) << " interruptions/GPU-hour, each "
       << f("%.3g", o.checkpoint_interval.value() / 3600.0) << " h checkpoint interval / 2 + "
       << f("%.3g", o.restart_time.value() / 3600.0) << " h restart\n";
}

void print_cautions(std::ostream& os, const Inputs& in, const Plan& p) {
    const auto c = caution_lines(in, p.schedule);
    if (c.empty()) {
        return;
    }
    os << "#\n# cautions (" << c.size() << ")\n";
    for (const std::string& s : c) {
        os << "  " << s << "\n";  // one line each, however wide (issue 49)
    }
}

void print_risks(std::ostream& os, const Inputs& in, const Plan& p, const Estimate& e) {
    const auto risks = describe_risks(in.model, in.cluster, in.job, p, e);
    os << "#\n# risks (" << risks.size() << ")\n";
    for (const Risk& r : risks) {
        wrap(os, "  " + std::string(to_string(r.kind)) + ": ", "    ", r.message);
        wrap(os, "    fix: ", "    ", r.fix);
    }
}

}  // namespace

void print_estimate_table(std::ostream& os, const Inputs& in, const Plan& p, const Estimate& e) {
    print_headline(os, in, p, e);
    print_memory(os, p, e, in.job.stack.expandable_segments);
    print_time(os, p, e);
    print_traffic(os, in, p, e);
    print_train(os, in, e);
    print_cautions(os, in, p);
    print_risks(os, in, p, e);
    for (const std::string& n : plan_notes(p)) {
        os << "#\n";
        wrap(os, "# note: ", "#   ", n);
    }
}

}  // namespace cleave::api

namespace cleave::api {

Explained explain(const Inputs& in, const Plan& plan) {
    return {in, plan, estimate(in.model, in.cluster, in.job, plan)};
}

nlohmann::json to_json(const Explained& x) {
    nlohmann::json j = estimate_to_json(x.inputs, x.plan, x.estimate);
    // The optimizer priced (issue 26): its states and step depend on it.
    const JobSpec& job = x.inputs.job;
    j["optimizer"] = {{"name", to_string(job.optimizer)}};
    if (job.optimizer == Optimizer::muon) {
        j["optimizer"]["muon_num_ns_steps"] = job.muon_ns_steps;
        j["optimizer"]["muon_tp_mode"] = to_string(job.muon_tp_mode);
        j["optimizer"]["scalar_optimizer"] = "adam";
    }
    return j;
}

void print_table(std::ostream& os, const Explained& x) {
    print_estimate_table(os, x.inputs, x.plan, x.estimate);
}

}  // namespace cleave::api
