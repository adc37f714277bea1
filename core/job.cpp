#include "core/job.hpp"

#include "core/errors.hpp"

#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

namespace cleave {

namespace {

// The bits a comma list of names sets, by `table`; an unknown name throws ConfigError naming
// `flag`, the name and the `known` ones.
template <std::size_t N>
uint8_t bits_of_names(const std::string& list,
                      const std::array<std::pair<std::string_view, uint8_t>, N>& table,
                      const std::string& flag,
                      const char* known) {
    uint8_t bits = 0;
    std::size_t pos = 0;
    while (pos <= list.size()) {
        const std::size_t comma = std::min(list.find(',', pos), list.size());
        const std::string_view name = std::string_view(list).substr(pos, comma - pos);
        bool found = false;
        for (const auto& [n, bit] : table) {
            if (n == name) {
                bits = static_cast<uint8_t>(bits | bit);
                found = true;
            }
        }
        if (!found) {
            throw ConfigError(flag + ": '" + std::string(name) + "' is not one of " + known);
        }
        pos = comma + 1;
    }
    return bits;
}

}  // namespace

int optimizer_moments(Optimizer o) {
    return o == Optimizer::adam ? 2 : 1;
}

double optimizer_state_bytes(const JobSpec& job) {
    const double w = bytes_of(job.weights);
    const double master_b = bytes_of(job.master_dtype);
    // A master copy whenever the weights are 16-bit or narrower, in its own dtype: fp32
    // (Megatron's default), fp16 (--main-params-dtype fp16) or the 16-bit shard Apex's
    // DistributedFusedAdam keeps with dtype=bf16 (store_params); fp32 weights are their own.
    const double master = (job.master_weights && w <= 2.0) ? master_b : 0.0;
    return master + bytes_of(job.optimizer_states) +
           (job.optimizer == Optimizer::adam ? bytes_of(job.optimizer_states_sq) : 0.0);
}

double scalar_optimizer_state_bytes(const JobSpec& job) {
    if (job.optimizer != Optimizer::muon) {
        return optimizer_state_bytes(job);
    }
    JobSpec adam = job;
    adam.optimizer = Optimizer::adam;
    return optimizer_state_bytes(adam);
}

const char* to_string(Optimizer o) {
    switch (o) {
    case Optimizer::adam:
        return "adam";
    case Optimizer::sgd:
        return "sgd";
    case Optimizer::muon:
        return "muon";
    }
    return "adam";
}

const char* to_string(MuonTpMode m) {
    switch (m) {
    case MuonTpMode::blockwise:
        return "blockwise";
    case MuonTpMode::duplicated:
        return "duplicated";
    case MuonTpMode::distributed:
        return "distributed";
    }
    return "duplicated";
}

const char* to_string(CudaGraphImpl i) {
    switch (i) {
    case CudaGraphImpl::local:
        return "local";
    case CudaGraphImpl::transformer_engine:
        return "transformer_engine";
    case CudaGraphImpl::none:
        break;
    }
    return "none";
}

std::optional<CudaGraphImpl> cuda_graph_impl_of(std::string_view name) {
    if (name == "none") {
        return CudaGraphImpl::none;
    }
    if (name == "local") {
        return CudaGraphImpl::local;
    }
    if (name == "transformer_engine") {
        return CudaGraphImpl::transformer_engine;
    }
    return std::nullopt;
}

namespace {

// Megatron-Core's cuda_graph_scope names (transformer_config.py @d98e8a64 CudaGraphScope).
constexpr std::array<std::pair<std::string_view, uint8_t>, 8> cuda_graph_scope_names = {{
    {"full", cuda_graph_scope::layer},
    {"attn", cuda_graph_scope::attn},
    {"mlp", cuda_graph_scope::mlp},
    {"moe", cuda_graph_scope::moe},
    {"moe_router", cuda_graph_scope::moe_router},
    {"moe_preprocess", cuda_graph_scope::moe_preprocess},
    {"mamba", cuda_graph_scope::mamba},
    {"full_iteration", cuda_graph_scope::full_iteration},
}};

}  // namespace

std::optional<uint8_t> cuda_graph_scope_of(std::string_view name) {
    for (const auto& [n, bit] : cuda_graph_scope_names) {
        if (n == name) {
            return bit;
        }
    }
    return std::nullopt;
}

uint8_t parse_cuda_graph_scope(const std::string& list, const std::string& flag) {
    return bits_of_names(list, cuda_graph_scope_names, flag,
                         "full, attn, mlp, moe, moe_router, moe_preprocess, mamba, full_iteration");
}

std::string cuda_graph_scope_string(uint8_t bits) {
    if ((bits & cuda_graph_scope::full_iteration) != 0) {
        return "full_iteration";
    }
    if ((bits & cuda_graph_scope::layer) == cuda_graph_scope::layer) {
        return "full";
    }
    std::string out;
    for (const auto& [n, bit] : cuda_graph_scope_names) {
        if (n != "full" && n != "full_iteration" && (bits & bit) != 0) {
            out += (out.empty() ? "" : ",") + std::string(n);
        }
    }
    return out;
}

const char* to_string(Peft p) {
    return p == Peft::lora ? "lora" : p == Peft::dora ? "dora" : "none";
}

namespace {

constexpr std::array<std::pair<std::string_view, uint8_t>, 4> lora_target_names = {{
    {"linear_qkv", lora_target::linear_qkv},
    {"linear_proj", lora_target::linear_proj},
    {"linear_fc1", lora_target::linear_fc1},
    {"linear_fc2", lora_target::linear_fc2},
}};

}  // namespace

std::string lora_targets_string(uint8_t targets) {
    std::string out;
    for (const auto& [name, bit] : lora_target_names) {
        if ((targets & bit) != 0) {
            out += (out.empty() ? "" : ",") + std::string(name);
        }
    }
    return out;
}

uint8_t parse_lora_targets(const std::string& list) {
    return bits_of_names(list, lora_target_names, "--lora-target-modules",
                         "linear_qkv, linear_proj, linear_fc1, linear_fc2");
}

double model_state_bytes_per_param(const JobSpec& job) {
    return bytes_of(job.weights) + bytes_of(job.grads) + optimizer_state_bytes(job);
}

}  // namespace cleave
