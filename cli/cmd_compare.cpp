// cleave compare: the best plan for one job on several hardware profiles, side by side.
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "cli/report.hpp"
#include "core/calibration.hpp"
#include "costmodel/precision.hpp"
#include "planner/search.hpp"

#include <array>
#include <cstdio>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cleave::cli {

namespace {

struct CompareOptions {
    std::string model;
    std::vector<std::string> clusters;
    int64_t gpus = 0;
    int64_t gbs = 0;
    int64_t seq = 0;
    std::string dtype = "bf16";
    std::string grad_dtype;
    std::string job_file;
    std::string fp8_recipe;
    bool fp8_param_gather = false;
    std::string stack;  // "" = the CLI's default (megatron-core)
    std::string format = "table";
    TrainFlags train;
};

struct ProfileBest {
    Inputs in;
    SearchResult result;
};

/// Dollars per iteration and per million tokens; negative when the profile has no price.
struct Cost {
    double per_iteration = -1.0;
    double per_million_tokens = -1.0;
};

Cost cost_of(const Inputs& in, const Estimate& e) {
    Cost c;
    // --price-per-gpu-hour, else the profile's price (load_inputs puts either in in.train)
    const double price = in.train.price_per_gpu_hour_usd;
    if (price <= 0.0) {
        return c;
    }
    c.per_iteration = price * static_cast<double>(in.job.gpus) * e.iteration_time.value() / 3600.0;
    const double tokens = static_cast<double>(in.job.global_batch * in.job.seq_len);
    c.per_million_tokens = c.per_iteration / tokens * 1e6;
    return c;
}

/// What every profile is priced with, so that the rows compare like with like: one job, one
/// requested precision (and where a GPU lacks it, the precision it runs instead), cleave's
/// Megatron-Core + Transformer Engine model of the step on every profile.
std::string assumptions(const std::vector<ProfileBest>& all) {
    const JobSpec& job = all.front().in.job;
    std::string s = std::string("same job and plan search on every profile; linear GEMMs in ") +
                    to_string(job.compute);
    if (job.compute == Dtype::fp8) {
        s += std::string(" (") + to_string(job.fp8_recipe) + " scaling)";
    }
    s += std::string(", attention core and output layer in ") +
         to_string(unquantised(job.compute)) + ", " + to_string(job.grads) +
         " gradients, weights " + to_string(job.weights) + ", Adam states " +
         to_string(job.optimizer_states) + "; software stack " + job.stack.name +
         " on every profile";
    for (const ProfileBest& pb : all) {
        const Dtype run = runnable_dtype(pb.in.cluster.gpu, job.compute);
        if (run != job.compute) {
            s += std::string("; ") + pb.in.cluster.name + " has no " + to_string(job.compute) +
                 " path and runs it in " + to_string(run);
        }
    }
    // Fitted overlays differ by profile (and by the stack they were fitted with): say which.
    std::string fitted;
    for (const ProfileBest& pb : all) {
        if (const auto cal = find_calibration(pb.in.cluster.name)) {
            fitted += (fitted.empty() ? "" : ", ") + pb.in.cluster.name + " (fitted with stack " +
                      cal->stack + ")";
        }
    }
    s += "; fitted calibration overlays: " + (fitted.empty() ? std::string("none") : fitted);
    return s;
}

std::string f(const char* spec, double v) {
    std::array<char, 64> b{};
    std::snprintf(b.data(), b.size(), spec, v);
    return b.data();
}

/// "#   train: 12.3 days (0.4 lost), 9.4e+04 GPU-h, 45.6 MWh, $234,000" when --tokens is given.
void print_train_line(std::ostream& os, const Inputs& in, const Estimate& e) {
    nlohmann::json j;
    add_train_json(j, in, e);
    if (!j.contains("train_days")) {
        return;
    }
    const auto num = [](const nlohmann::json& v, const char* spec) {
        return v.is_number() ? f(spec, v.get<double>()) : std::string("-");
    };
    os << "#   train " << f("%.3g", in.train.tokens) << " tokens: " << num(j["train_days"], "%.1f")
       << " days (" << num(j["train"]["lost_days"], "%.2f") << " lost to interruptions), "
       << num(j["gpu_hours"], "%.4g") << " GPU-h, " << num(j["energy_mwh"], "%.4g") << " MWh, $"
       << num(j["cost"], "%.4g") << "\n";
}

void print_table(std::ostream& os, const CompareOptions& o, const std::vector<ProfileBest>& all) {
    const JobSpec& job = all.front().in.job;
    os << "# cleave compare: " << all.front().in.model.name << ", " << job.gpus
       << " GPUs, global batch " << job.global_batch << ", seq " << job.seq_len << ", " << o.dtype
       << "; best plan per profile (fastest iteration)\n";
    os << "# assumed: " << assumptions(all) << "\n";
    os << "# profile               iter(s)      tok/s  MFU%  mem(GiB) usable headroom   $/iter  "
          "$/1M tok\n";
    for (const ProfileBest& pb : all) {
        std::array<char, 160> b{};
        if (pb.result.plans.empty()) {
            std::snprintf(b.data(),
                          b.size(),
                          "%-22s  no feasible plan (%lld candidates)",
                          pb.in.cluster.name.c_str(),
                          static_cast<long long>(pb.result.candidates_evaluated));
            os << b.data() << "\n";
            const Rejection& mem = pb.result.rejection(RejectReason::memory);
            if (mem.count > 0) {
                os << "#   "
                   << describe_rejection(
                          pb.in.model, pb.in.job, SearchOptions{}, RejectReason::memory, mem)
                   << "\n";
            }
            continue;
        }
        const RankedPlan& best = pb.result.plans.front();
        const Estimate& e = best.estimate;
        const Cost c = cost_of(pb.in, e);
        const double usable = to_gib(e.memory_usable);
        std::snprintf(b.data(),
                      b.size(),
                      "%-22s %8.3f %10.0f %5.1f %9.1f %6.1f %8.1f %8s %9s",
                      pb.in.cluster.name.c_str(),
                      e.iteration_time.value(),
                      e.tokens_per_s,
                      100.0 * e.mfu,
                      to_gib(e.memory.total),
                      usable,
                      usable - to_gib(e.memory.total),
                      c.per_iteration < 0 ? "-" : f("%.3f", c.per_iteration).c_str(),
                      c.per_million_tokens < 0 ? "-" : f("%.3f", c.per_million_tokens).c_str());
        os << b.data() << "\n";
        os << "#   " << to_flags(best.plan) << "\n";
        print_train_line(os, pb.in, e);
    }
}

nlohmann::json compare_json(const std::vector<ProfileBest>& all) {
    auto rows = nlohmann::json::array();
    for (const ProfileBest& pb : all) {
        nlohmann::json row = {
            {"cluster", pb.in.cluster.name},
            {"gemm_dtype", to_string(runnable_dtype(pb.in.cluster.gpu, pb.in.job.compute))},
            {"display_name", pb.in.cluster.display_name},
            {"candidates_evaluated", pb.result.candidates_evaluated},
            {"feasible", pb.result.feasible},
            {"price_per_gpu_hour_usd", pb.in.train.price_per_gpu_hour_usd}};
        if (pb.result.plans.empty()) {
            row["best"] = nullptr;
        } else {
            const RankedPlan& best = pb.result.plans.front();
            const Cost c = cost_of(pb.in, best.estimate);
            row["best"] = estimate_to_json(pb.in, best.plan, best.estimate);
            for (const char* k : {"train_days", "gpu_hours", "energy_mwh", "cost"}) {
                if (row["best"].contains(k)) {
                    row[k] = row["best"][k];
                }
            }
            row["memory_headroom_gib"] =
                to_gib(best.estimate.memory_usable) - to_gib(best.estimate.memory.total);
            row["cost_per_iteration_usd"] =
                c.per_iteration < 0 ? nlohmann::json(nullptr) : nlohmann::json(c.per_iteration);
            row["cost_per_million_tokens_usd"] = c.per_million_tokens < 0
                                                     ? nlohmann::json(nullptr)
                                                     : nlohmann::json(c.per_million_tokens);
        }
        rows.push_back(std::move(row));
    }
    const JobSpec& job = all.front().in.job;
    return {{"model", all.front().in.model.name},
            {"gpus", job.gpus},
            {"global_batch", job.global_batch},
            {"seq_len", job.seq_len},
            {"dtype", to_string(job.compute)},
            {"assumptions", assumptions(all)},
            {"profiles", rows}};
}

void run_compare(const CompareOptions& o, CliContext& ctx) {
    std::vector<ProfileBest> all;
    SearchOptions so;
    so.top_k = 1;
    for (const std::string& c : o.clusters) {
        JobFlags jf;
        jf.model = o.model;
        jf.cluster = c;
        jf.gpus = o.gpus;
        jf.gbs = o.gbs;
        jf.seq = o.seq;
        jf.dtype = o.dtype;
        jf.grad_dtype = o.grad_dtype;
        jf.job_file = o.job_file;
        jf.fp8_recipe = o.fp8_recipe;
        jf.fp8_param_gather = o.fp8_param_gather;
        jf.stack = o.stack;
        jf.precision_fallback = true;  // said in the assumptions line
        jf.train = o.train;
        ProfileBest pb{load_inputs(jf), {}};
        pb.result = search(pb.in.model, pb.in.cluster, pb.in.job, so);
        all.push_back(std::move(pb));
    }
    if (o.format == "json") {
        ctx.out << compare_json(all).dump(2) << "\n";
    } else {
        print_table(ctx.out, o, all);
    }
    bool any = false;
    for (const ProfileBest& pb : all) {
        any = any || !pb.result.plans.empty();
    }
    if (!any) {
        ctx.err << "cleave compare: no profile has a feasible plan\n";
        ctx.exit_code = 1;
    }
}

}  // namespace

void setup_compare(CLI::App& app, CliContext& ctx) {
    auto o = std::make_shared<CompareOptions>();
    auto* sub = app.add_subcommand("compare", "Best plan for one job on several hardware profiles");
    sub->add_option("MODEL", o->model, "Model: cleave TOML or Hugging Face config.json")
        ->required()
        ->check(CLI::ExistingFile);
    sub->add_option("--clusters", o->clusters, "Hardware profiles: shipped names or TOML paths")
        ->required()
        ->expected(1, -1);
    sub->add_option("--gpus", o->gpus, "Number of GPUs")->required()->check(CLI::PositiveNumber);
    sub->add_option("--gbs", o->gbs, "Global batch size in sequences")->check(CLI::PositiveNumber);
    sub->add_option("--seq", o->seq, "Sequence length (default: the model's)")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--dtype", o->dtype, "Compute dtype of the linear layers' GEMMs")
        ->check(CLI::IsMember({"bf16", "fp16", "fp8", "mxfp8", "nvfp4", "fp32"}))
        ->capture_default_str();
    sub->add_option("--fp8-recipe", o->fp8_recipe, "FP8 scaling recipe (default delayed)")
        ->check(CLI::IsMember({"tensorwise", "delayed", "blockwise"}));
    sub->add_flag("--fp8-param-gather", o->fp8_param_gather, "FP8 primary weights");
    sub->add_option("--stack", o->stack, "Software stack for every profile (cleave stack list)");
    sub->add_option("--grad-dtype", o->grad_dtype, "Gradient buffer dtype (default fp32)")
        ->check(CLI::IsMember({"bf16", "fp16", "fp32"}));
    sub->add_option("--job", o->job_file, "Job TOML (flags override it)")->check(CLI::ExistingFile);
    add_train_flags(*sub, o->train);
    sub->add_option("--format", o->format, "Output: table or json")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    sub->callback([o, &ctx] { run_compare(*o, ctx); });
}

}  // namespace cleave::cli
