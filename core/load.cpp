// Job TOML ([job]) -> JobSpec. Model and cluster loading live in load_model.cpp,
// load_hf.cpp and load_cluster.cpp; the shared TOML machinery in load_toml.cpp.
#include "core/load.hpp"

#include "core/load_detail.hpp"
#include "core/stack.hpp"

namespace cleave {

namespace {

using detail::Choice;
using detail::Need;
using detail::TableReader;

template <class T>
void set(T& field, const std::optional<T>& v) {
    if (v) {
        field = *v;
    }
}

const std::vector<Choice<Dtype>>& dtype_choices() {
    static const std::vector<Choice<Dtype>> choices = {{"fp32", Dtype::fp32},
                                                       {"tf32", Dtype::tf32},
                                                       {"bf16", Dtype::bf16},
                                                       {"fp16", Dtype::fp16},
                                                       {"fp8", Dtype::fp8},
                                                       {"mxfp8", Dtype::mxfp8},
                                                       {"nvfp4", Dtype::nvfp4}};
    return choices;
}

void read_job(TableReader& r, JobSpec& job) {
    set(job.gpus, r.count("gpus", Need::required));
    set(job.global_batch, r.count("global_batch", Need::required));
    set(job.seq_len, r.count("seq_len", Need::optional));
    set(job.compute, r.choice("dtype_compute", Need::optional, dtype_choices()));
    set(job.weights, r.choice("dtype_weights", Need::optional, dtype_choices()));
    set(job.grads, r.choice("dtype_grads", Need::optional, dtype_choices()));
    set(job.optimizer_states, r.choice("dtype_optimizer_states", Need::optional, dtype_choices()));
    job.optimizer_states_sq = job.optimizer_states;
    set(job.master_weights, r.flag("master_weights", Need::optional));
    set(job.fp8_recipe,
        r.choice<Fp8Recipe>("fp8_recipe",
                            Need::optional,
                            {{"delayed", Fp8Recipe::delayed},
                             {"tensorwise", Fp8Recipe::tensorwise},
                             {"blockwise", Fp8Recipe::blockwise}}));
    set(job.bf16_layers_start, r.count("bf16_layers_start", Need::optional, true));
    set(job.bf16_layers_end, r.count("bf16_layers_end", Need::optional, true));
    set(job.train_tokens, r.quantity("train_tokens", Need::optional));
    set(job.mtp, r.flag("mtp", Need::optional));
    set(job.optimizer,
        r.choice<Optimizer>(
            "optimizer", Need::optional,
            {{"adam", Optimizer::adam}, {"sgd", Optimizer::sgd}, {"muon", Optimizer::muon}}));
    set(job.muon_ns_steps, r.count("muon_num_ns_steps", Need::optional));
    set(job.muon_tp_mode, r.choice<MuonTpMode>("muon_tp_mode", Need::optional,
                                               {{"blockwise", MuonTpMode::blockwise},
                                                {"duplicated", MuonTpMode::duplicated},
                                                {"distributed", MuonTpMode::distributed}}));
    // A shipped stack name or a stack TOML path (relative paths as written, like --stack).
    if (const auto stack = r.text("stack", Need::optional)) {
        try {
            job.stack = load_stack(*stack);
        } catch (const ConfigError& e) {
            std::string why;
            for (const Diagnostic& dg : e.diagnostics()) {
                why +=
                    (why.empty() ? "" : "; ") + (dg.where.file.empty() ? dg.message : render(dg));
            }
            r.bad_value("stack", "cannot be loaded: " + why);
        }
    }
}

}  // namespace

JobSpec parse_job_toml(std::string_view text, const std::string& source_name) {
    const toml::table root = detail::parse_toml(text, source_name);
    detail::DiagnosticSink sink(source_name);
    TableReader top(root, "", sink);
    JobSpec job;
    if (const toml::table* t = top.table("job", Need::required)) {
        TableReader r(*t, "job", sink);
        read_job(r, job);
        r.finish();
    }
    top.finish();
    sink.throw_if_any();
    return job;
}

JobSpec load_job(const std::filesystem::path& file) {
    return parse_job_toml(detail::read_text_file(file), file.string());
}

}  // namespace cleave
