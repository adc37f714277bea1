#include "published/published_memory.hpp"

#include "core/errors.hpp"
#include "core/load.hpp"
#include "published/csv_row.hpp"
#include "costmodel/estimate.hpp"
#include "published/published.hpp"

#include <charconv>
#include <map>

namespace cleave {

namespace {

using Row = std::map<std::string, std::string>;

bool has_text(const std::string& s, const char* what) {
    return s.find(what) != std::string::npos;
}

bool starts(const std::string& s, const char* what) {
    return s.rfind(what, 0) == 0;
}

using Cells = detail::CsvRow;

/// "N PP microbatches" inside a micro-batch cell, or 0.
int64_t stated_microbatches(const std::string& cell) {
    const auto at = cell.find(" PP microbatches");
    if (at == std::string::npos) {
        return 0;
    }
    auto from = cell.rfind(' ', at - 1);
    from = from == std::string::npos ? 0 : from + 1;
    int64_t v = 0;
    std::from_chars(cell.data() + from, cell.data() + at, v);
    return v;
}

ModelSpec model_of(const Cells& r, std::string& notes) {
    const std::string& name = r.str("model");
    if (has_text(name, "Moonlight")) {
        const std::filesystem::path path = shipped_model_config_path("moonlight-16b-a3b.config.json");
        if (path.empty()) {
            r.fail("model", "the shipped config moonlight-16b-a3b.config.json is not found");
        }
        ModelSpec m = load_model(path);
        m.name = name;
        notes += "model from examples/hf/moonlight-16b-a3b.config.json; ";
        return m;
    }
    return detail::columns_model(r);  // Llama 3.1 / Llama 2: the Llama family
}

void memory_job_of(const Cells& r, MemoryCase& c, std::string& notes) {
    JobSpec& j = c.job;
    j.gpus = r.count("num_gpus");
    j.seq_len = r.count("seq_length");
    const std::string& prec = r.str("precision");
    if (has_text(prec, "Float8")) {
        j.compute = Dtype::fp8;
        j.fp8_recipe = Fp8Recipe::tensorwise;  // torchao dynamic tensorwise scaling
        j.float8.recipe = Float8Recipe::tensorwise;  // torchtitan stacks: costmodel/float8.hpp
        notes += "Float8 linears priced as fp8 tensorwise; ";
    }
    const std::string& sh = r.str("dp_sharding");
    if (has_text(sh, "precision-aware")) {
        // Megatron's precision-aware optimizer as the row states it (fp32 main params).
        if (has_text(sh, "bf16 main grads")) {
            j.grads = Dtype::bf16;
        }
        if (has_text(sh, "exp_avg_sq")) {
            j.optimizer_states = Dtype::bf16;
            j.optimizer_states_sq = Dtype::bf16;
        }
        notes += "precision-aware optimizer: grads " + std::string(to_string(j.grads)) +
                 ", moments " + to_string(j.optimizer_states) + ", fp32 main params; ";
    } else if (has_text(prec, "grad_reduce bf16")) {
        j.grads = Dtype::bf16;
    }
}

// torchtitan as the row's release ran it: torch.compile per block from the row's notes
// ("torch.compile=no" / "=yes" / "torch.compile + Float8"); at 9dec370 (2024-12) the loss is
// F.cross_entropy on the whole logits, never compiled (train.py @9dec370 loss_fn, "compiling
// loss function causes CUDA errors, turning off for now"); ChunkedLossWrapper came in 2026-06
// (pytorch/torchtitan #3779, 9530a874d).
void torchtitan_release_of(const Cells& r, MemoryCase& c, std::string& notes) {
    if (!has_text(r.str("framework"), "torchtitan")) {
        return;
    }
    const std::string& n = r.str("notes");
    if (has_text(n, "torch.compile=no")) {
        c.torch_compile = 0;
    } else if (has_text(n, "torch.compile")) {
        c.torch_compile = 1;
    }
    if (has_text(r.str("framework_version"), "9dec370")) {
        c.loss = LossImpl::torch_eager;
        c.loss_chunks = 1;
        c.release = "24.12";  // the stack's [[float8.release]] row of 9dec370 (torchao eab345c)
        notes += "torchtitan 9dec370 (release 24.12): eager unchunked loss; ";
    }
    // The run's float8 FSDP keys where the row names them (llama3_405b.toml @9dec370 sets
    // enable_fsdp_float8_all_gather and precompute_float8_dynamic_scale_for_fsdp); else the
    // release's defaults (off).
    if (c.job.compute == Dtype::fp8 && has_text(n, "fp8 FSDP all-gather")) {
        c.job.float8.fsdp_all_gather = true;
        c.job.float8.precompute_scale = true;
        notes += "float8 FSDP all-gather; ";
    }
    if (c.torch_compile >= 0) {
        notes += c.torch_compile == 1 ? "blocks compiled; " : "blocks eager; ";
    }
}

void memory_plan_of(const Cells& r, MemoryCase& c, std::string& notes) {
    Plan& p = c.plan;
    p.tp = r.count("tp", 1);
    p.pp = r.count("pp", 1);
    p.dp = r.count("dp", 1);
    p.cp = r.count("cp", 1);
    p.ep = r.count("ep", 1);
    p.etp = r.count("etp", 0);
    p.vpp = r.count("vpp", 1);
    p.mbs = r.count("micro_batch_size", 1);
    p.schedule = p.vpp > 1 || has_text(r.str("pp_schedule"), "Interleaved") ? Schedule::interleaved
                                                                          : Schedule::one_f_one_b;
    p.sp = starts(r.str("sequence_parallel"), "yes");
    const std::string& rc = r.str("recompute");
    if (starts(rc, "full")) {
        p.recompute = Recompute::full;
    } else if (starts(rc, "selective []")) {
        p.recompute = Recompute::none;  // an empty module list recomputes nothing
    } else if (starts(rc, "selective [")) {
        p.recompute = Recompute::selective;  // Megatron's module list, as the row gives it
        p.recompute_modules = parse_recompute_modules(rc.substr(10, rc.find(']') - 9));
    } else if (starts(rc, "selective")) {
        p.recompute = Recompute::selective;
    }
    const std::string& sh = r.str("dp_sharding");
    if (has_text(sh, "FSDP")) {
        p.zero = 3;
    } else if (has_text(sh, "ZeRO-1") || has_text(sh, "distributed optimizer")) {
        p.zero = 1;
    }
    // Batch: the row's GBS, else local batch x DP ranks (x the stated PP micro-batch count).
    const int64_t micro = stated_microbatches(r.str("micro_batch_size"));
    c.job.global_batch = r.count("global_batch_size", 0);
    if (c.job.global_batch == 0) {
        c.job.global_batch = p.mbs * p.dp * std::max<int64_t>(1, micro);
        notes += "GBS not stated: " + std::to_string(c.job.global_batch) +
                 " (micro-batch x dp" + (micro > 0 ? " x the stated micro-batch count" : "") + "); ";
    }
    if (p.pp > 1 && c.model.layers % p.pp != 0 && (c.model.layers + 2) % p.pp == 0) {
        const int64_t share = (c.model.layers + 2) / p.pp;
        p.first_layers = share - 1;
        p.last_layers = share - 1;
        notes += "layer map not stated: " + std::to_string(share - 1) + " layers on the first and " +
                 "last stages, " + std::to_string(share) + " on the others; ";
    }
}

MemoryCase memory_case_of(const Cells& r) {
    MemoryCase c;
    c.row_id = r.count("row_id");
    c.source_key = r.str("source_key");
    c.model_name = r.str("model");
    c.confidence = r.str("confidence");
    c.measured_gib = r.num("peak_memory_gib");
    // "max reserved (...)" or "peak allocated (...); max reserved stayed ~40 GB": the metric
    // is the cell's first word after max / peak.
    const std::string& metric = r.str("memory_metric");
    c.metric = (starts(metric, "max reserved") || starts(metric, "peak reserved"))
                   ? MemoryMetric::reserved
                   : MemoryMetric::allocated;
    std::string notes;
    c.model = model_of(r, notes);
    memory_job_of(r, c, notes);
    memory_plan_of(r, c, notes);
    torchtitan_release_of(r, c, notes);
    std::string why;
    c.profile = profile_for_gpu(r.str("gpu_type"), r.count("gpu_memory_gb"), 0, why);
    if (c.profile.empty()) {
        c.reason = why;
        return c;
    }
    notes = why + notes;
    c.stack = stack_for_framework(r.str("framework"));
    if (c.stack.empty()) {
        c.reason = "no shipped stack for framework '" + r.str("framework") + "'";
        return c;
    }
    notes += "stack " + c.stack + "; ";
    if (c.job.seq_len <= 0) {
        c.reason = "sequence length not stated";
        return c;
    }
    if (c.measured_gib <= 0.0) {
        c.reason = "no measured peak";
        return c;
    }
    c.expressible = true;
    c.reason = notes;
    return c;
}

}  // namespace

const char* to_string(MemoryMetric m) {
    return m == MemoryMetric::reserved ? "reserved" : "allocated";
}

bool is_memory_csv(std::string_view csv) {
    const auto end = csv.find('\n');
    return csv.substr(0, end).find("memory_metric") != std::string_view::npos;
}

std::vector<MemoryCase> parse_public_memory(std::string_view csv, const std::string& source_name) {
    const auto rows = detail::named_rows(
        csv_rows(csv),
        {"row_id", "source_key", "model", "num_layers", "hidden_size", "num_attention_heads",
         "vocab_size", "seq_length", "gpu_type", "num_gpus", "tp", "pp", "dp", "micro_batch_size",
         "recompute", "precision", "framework", "dp_sharding", "peak_memory_gib", "memory_metric"},
        source_name);
    std::vector<MemoryCase> out;
    for (size_t i = 0; i < rows.size(); ++i) {
        out.push_back(memory_case_of(Cells{rows[i], source_name, static_cast<int64_t>(i + 2), true}));
    }
    return out;
}

void load_memory_case_stack(MemoryCase& c) {
    const bool grads_from_row = c.job.grads != JobSpec{}.grads;
    c.job.stack = load_stack(c.stack);
    if (!grads_from_row) {
        c.job.grads = c.job.stack.grad_dtype;
    }
    if (c.torch_compile >= 0) {
        c.job.stack.torch_compile = c.torch_compile == 1;
    }
    if (c.loss != LossImpl::unset) {
        c.job.stack.loss = c.loss;
    }
    if (c.loss_chunks > 0) {
        c.job.stack.loss_chunks = c.loss_chunks;
    }
    if (!c.release.empty()) {
        c.job.stack.release = c.release;
    }
}

MemoryResult evaluate_memory(const MemoryCase& c, const ClusterSpec& cluster) {
    const Estimate e = estimate(c.model, cluster, c.job, c.plan);
    MemoryResult r;
    r.stage = e.peak_memory_stage;
    r.allocated_gib = to_gib(e.memory.allocated);
    r.reserved_gib = to_gib(e.memory.allocated + e.memory.allocator);
    r.predicted_gib = c.metric == MemoryMetric::reserved ? r.reserved_gib : r.allocated_gib;
    r.error_pct = 100.0 * (r.predicted_gib - c.measured_gib) / c.measured_gib;
    r.total_gib = to_gib(e.memory.total);
    r.usable_gib = to_gib(e.memory_usable);
    return r;
}

}  // namespace cleave
