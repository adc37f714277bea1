#include "executor/params.hpp"

#include "executor/init.hpp"

#include <cmath>

namespace cleave::executor {

namespace {

// Uniform with standard deviation 0.02 (GPT-2 / Megatron init_method_std): half-width 0.02*sqrt(3).
constexpr float weight_half_width = 0.034641016f;
constexpr float bias_half_width = 0.01f;
constexpr float gain_half_width = 0.05f;

float init_value(InitKind kind, uint64_t seed, uint64_t id, uint64_t index) {
    const float u = uniform_pm1(seed, id, index);
    switch (kind) {
    case InitKind::weight:
        return weight_half_width * u;
    case InitKind::bias:
        return bias_half_width * u;
    case InitKind::gain:
        return 1.0f + gain_half_width * u;
    }
    return 0.0f;
}

}  // namespace

int64_t Params::add(const ParamInfo& info) {
    CLEAVE_ASSERT(w_.size() == 0, "Params::add after allocate");
    infos_.push_back(info);
    return static_cast<int64_t>(infos_.size()) - 1;
}

void Params::allocate(Backend& be, int64_t shards, uint64_t seed) {
    // Three classes in order: TP-replicated, other dense, expert (issue 16).
    const auto klass = [](const ParamInfo& p) { return p.expert ? 2 : p.tp_replicated ? 0 : 1; };
    int64_t offset = 0;
    for (const int k : {0, 1, 2}) {
        for (auto& p : infos_) {
            if (klass(p) == k) {
                p.offset = offset;
                offset += p.size();
            }
        }
        if (k == 0) {
            replicated_ = offset;
        } else if (k == 1) {
            expert_begin_ = offset;
        }
    }
    count_ = offset;
    const int64_t padded = (offset + shards - 1) / shards * shards;
    w_ = Buffer(be, padded);
    g_ = Buffer(be, padded);
    m_ = Buffer(be, padded / shards);
    v_ = Buffer(be, padded / shards);
    std::vector<float> host(static_cast<size_t>(padded), 0.0f);
    for (const auto& p : infos_) {
        const uint64_t id = tensor_id(p.name);
        for (int64_t r = 0; r < p.rows; ++r) {
            for (int64_t c = 0; c < p.cols; ++c) {
                const auto index =
                    static_cast<uint64_t>((p.row_begin + r) * p.global_cols + p.col_begin + c);
                host[static_cast<size_t>(p.offset + r * p.cols + c)] =
                    init_value(p.kind, seed, id, index);
            }
        }
    }
    be.upload(w_.view(), host);
}

ParamRef Params::ref(int64_t handle) const {
    const ParamInfo& p = info(handle);
    return {w_.view().slice(p.offset, p.size()), g_.view().slice(p.offset, p.size())};
}

const ParamInfo& Params::info(int64_t handle) const {
    CLEAVE_ASSERT(handle >= 0 && static_cast<size_t>(handle) < infos_.size(), "bad param handle");
    return infos_[static_cast<size_t>(handle)];
}

double Params::checksum(Backend& be) const {
    std::vector<float> host(static_cast<size_t>(w_.size()));
    be.download(host, w_.view());
    double sum = 0.0;
    for (const auto& p : infos_) {
        if (!p.counted) {
            continue;
        }
        for (int64_t i = 0; i < p.size(); ++i) {
            sum += host[static_cast<size_t>(p.offset + i)];
        }
    }
    return sum;
}

std::vector<std::pair<std::string, double>> Params::probes(Backend& be) const {
    std::vector<float> host(static_cast<size_t>(w_.size()));
    be.download(host, w_.view());
    constexpr uint64_t probe_seed = 0x70726f6265ULL;  // "probe"
    std::vector<std::pair<std::string, double>> out;
    for (const auto& p : infos_) {
        if (!p.counted) {
            continue;
        }
        double sum = 0.0;
        const uint64_t id = tensor_id(p.name);
        for (int64_t r = 0; r < p.rows; ++r) {
            for (int64_t c = 0; c < p.cols; ++c) {
                const auto index =
                    static_cast<uint64_t>((p.row_begin + r) * p.global_cols + p.col_begin + c);
                sum += static_cast<double>(host[static_cast<size_t>(p.offset + r * p.cols + c)]) *
                       uniform_pm1(probe_seed, id, index);
            }
        }
        out.emplace_back(p.name, sum);
    }
    return out;
}

}  // namespace cleave::executor
