#pragma once
// Helpers the exporters share (export/megatron.cpp, export/bridge.cpp); not an interface.

#include "core/job.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"

#include <array>
#include <cstdio>
#include <string>
#include <vector>

namespace cleave::exporters {

using Args = std::vector<std::string>;

inline void arg(Args& os, const std::string& flag, const std::string& value = "") {
    os.push_back(value.empty() ? flag : flag + " " + value);
}

/// v printed with a printf spec ("%.3f").
inline std::string f(const char* spec, double v) {
    std::array<char, 64> b{};
    std::snprintf(b.data(), b.size(), spec, v);
    return b.data();
}

/// The layer map in Megatron-LM's own flags (export/megatron.cpp).
/// `mtp_depths` > 0: a hybrid model's MTP block joins its pattern, Megatron's unified form
/// (arguments.py @d98e8a64: main + '/' + the MTP pattern once per depth).
void megatron_layout_args(Args& os, const ModelSpec& m, const Plan& p, int64_t mtp_depths = 0);

/// What Megatron's precision-aware optimizer must be told for the states the price assumed
/// (megatron/core/optimizer/optimizer_config.py @d98e8a64: exp_avg_dtype, exp_avg_sq_dtype,
/// main_params_dtype; use_precision_aware_optimizer for any of them narrower than fp32).
struct OptimizerDtypes {
    bool precision_aware = false;  // a state narrower than fp32
    std::string exp_avg, exp_avg_sq, main_params;
    bool master_inexpressible = false;  // bf16 master weights (Apex DistributedFusedAdam)
};
[[nodiscard]] OptimizerDtypes optimizer_dtypes(const JobSpec& job);

}  // namespace cleave::exporters
