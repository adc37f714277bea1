#include "costmodel/float8.hpp"

#include "costmodel/compute.hpp"
#include "costmodel/precision.hpp"

#include <algorithm>

namespace cleave {

const Float8Release* float8_release(const SoftwareStack& s) {
    const auto& rows = s.float8_releases;
    if (rows.empty()) {
        return nullptr;
    }
    if (s.release.empty()) {
        return &rows.back();
    }
    const Float8Release* hit = &rows.front();
    for (const Float8Release& r : rows) {
        if (r.release <= s.release) {  // YY.MM compare as text
            hit = &r;
        }
    }
    return hit;
}

Float8Run float8_run_of_release(const JobSpec& job) {
    Float8Run f;
    const Float8Release* row = job.compute == Dtype::fp8 ? float8_release(job.stack) : nullptr;
    if (row == nullptr) {
        return f;
    }
    const Float8Options& o = job.float8;
    f.active = true;
    f.recipe = o.recipe.value_or(row->recipes.empty() ? Float8Recipe::tensorwise : row->recipes.front());
    f.fsdp_all_gather = o.fsdp_all_gather.value_or(row->fsdp_all_gather);
    f.precompute_scale = o.precompute_scale.value_or(row->precompute_scale);
    f.force_recompute_weight = o.force_recompute_weight.value_or(false);
    const bool tensorwise = f.recipe == Float8Recipe::tensorwise;
    f.saves_float8_input = row->saves_float8_input && tensorwise;
    f.saves_float8_weight = row->saves_float8_weight && tensorwise;
    return f;
}

std::string float8_settings_error(const JobSpec& job) {
    const Float8Run f = float8_run(job);
    if (!f.active) {
        return {};
    }
    const Float8Release& row = *float8_release(job.stack);
    const std::string at = "torchtitan " + row.commit + " (release " + row.release + ")";
    if (std::find(row.recipes.begin(), row.recipes.end(), f.recipe) == row.recipes.end()) {
        std::string names;
        for (const Float8Recipe r : row.recipes) {
            names += (names.empty() ? "" : ", ") + std::string(to_string(r));
        }
        return "float8 recipe " + std::string(to_string(f.recipe)) + " is not one " + at +
               " accepts (" + names + ")";
    }
    if ((f.fsdp_all_gather || f.precompute_scale) && f.recipe != Float8Recipe::tensorwise) {
        return "the FSDP float8 all-gather (and its precomputed scales) takes the tensorwise recipe "
               "only (torchao config.py: enable_fsdp_float8_all_gather only supports tensorwise "
               "scaling granularity), not " + std::string(to_string(f.recipe));
    }
    if (f.precompute_scale && !f.fsdp_all_gather) {
        return "precompute_float8_dynamic_scale_for_fsdp needs the FSDP float8 all-gather (torchtitan "
               "applies it only with enable_fsdp_float8_all_gather)";
    }
    if (f.force_recompute_weight && !row.force_recompute_key) {
        return "force_recompute_fp8_weight_in_bwd is not a key of " + at;
    }
    return {};
}

double float8_saved_input_bytes(const JobSpec& job) {
    return float8_run(job).saves_float8_input ? 1.0 : activation_bytes(job);
}

double float8_saved_weight_bytes_per_param(const JobSpec& job) {
    const Float8Run f = float8_run(job);
    return f.saves_float8_weight && !f.force_recompute_weight && !f.fsdp_all_gather ? 1.0 : 0.0;
}

double float8_gather_bytes_per_param(const JobSpec& job) {
    return float8_run(job).fsdp_all_gather ? 1.0 : bytes_of(job.weights);
}

double float8_linear_params(const ModelSpec& m, const Plan& p, double layers) {
    return layers * static_cast<double>(params_attention(m) + params_mlp(m, m.ffn_hidden)) /
           static_cast<double>(p.tp);
}

double float8_cast_bytes_per_element(const GpuSpec& gpu, const JobSpec& job) {
    const Float8Run f = float8_run(job);
    if (!f.active) {
        return 0.0;
    }
    switch (f.recipe) {
    case Float8Recipe::tensorwise:
        return 2.0 + 2.0 + (native_fp8_layouts(gpu) ? 1.0 : 2.0);
    case Float8Recipe::rowwise:
        return 2.0 * (2.0 + 1.0);
    case Float8Recipe::rowwise_with_gw_hp:
        return 2.0 + 1.0;
    }
    return 0.0;
}

double float8_casts_per_operand(const JobSpec& job) {
    const Float8Run f = float8_run(job);
    return f.active && f.recipe == Float8Recipe::rowwise ? 2.0 : 1.0;
}

Bytes float8_weight_cast_bytes(const GpuSpec& gpu, const JobSpec& job, double params, double shards) {
    const Float8Run f = float8_run(job);
    if (!f.active) {
        return {};
    }
    const double casts = float8_saved_weight_bytes_per_param(job) > 0.0 ? 1.0 : 2.0;
    const double local = f.fsdp_all_gather ? params / std::max(1.0, shards) : params;
    return bytes(casts * float8_cast_bytes_per_element(gpu, job) * local);
}

}  // namespace cleave
