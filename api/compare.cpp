// The best plan for one job on several hardware profiles, side by side (api/cleave.hpp
// compare()).
#include "api/cleave.hpp"
#include "api/detail.hpp"
#include "core/calibration.hpp"
#include "costmodel/precision.hpp"
#include "planner/search.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cleave::api {

namespace {

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

using detail::f;

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

void print_compare(std::ostream& os, const std::string& dtype, const std::vector<ProfileBest>& all) {
    const JobSpec& job = all.front().in.job;
    os << "# cleave compare: " << all.front().in.model.name << ", " << job.gpus
       << " GPUs, global batch " << job.global_batch << ", seq " << job.seq_len << ", " << dtype
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

}  // namespace

Compared compare(const JobOptions& job,
                 const std::vector<std::string>& clusters,
                 const ModelSpec* model) {
    Compared out;
    out.dtype = job.dtype;
    SearchOptions so;
    so.top_k = 1;
    for (const std::string& c : clusters) {
        JobOptions jf = job;
        jf.cluster = c;
        jf.precision_fallback = true;  // said in the assumptions line
        ProfileBest pb{model != nullptr ? load_inputs(jf, *model, load_cluster(c)) : load_inputs(jf),
                       {}};
        pb.result = search(pb.in.model, pb.in.cluster, pb.in.job, so);
        out.profiles.push_back(std::move(pb));
    }
    return out;
}

bool Compared::any_feasible() const {
    return std::any_of(profiles.begin(), profiles.end(),
                       [](const ProfileBest& pb) { return !pb.result.plans.empty(); });
}

nlohmann::json to_json(const Compared& c) {
    return compare_json(c.profiles);
}

void print_table(std::ostream& os, const Compared& c) {
    print_compare(os, c.dtype, c.profiles);
}

}  // namespace cleave::api
