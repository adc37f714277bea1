#pragma once
// The parameters one rank holds: each a slice of a plan-independent global tensor, laid out in
// one flat weight buffer and one flat gradient buffer (Megatron's contiguous grad buffer), so DP
// reduces one buffer and ZeRO-1 shards it.

#include "executor/backend.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cleave::executor {

enum class InitKind { weight, bias, gain };

/// One parameter: rows x cols of a global tensor with `global_cols` columns, starting at
/// (row_begin, col_begin).
struct ParamInfo {
    std::string name;
    InitKind kind = InitKind::weight;
    int64_t global_cols = 0;
    int64_t row_begin = 0;
    int64_t rows = 0;
    int64_t col_begin = 0;
    int64_t cols = 0;
    bool tp_replicated = false;  // every TP rank holds the whole tensor
    bool counted = true;         // this rank's copy enters weights_checksum
    int64_t offset = 0;          // into the flat buffers, set by allocate()
    bool expert = false;         // an MoE expert's tensor: reduced over expert-DP, laid out last

    [[nodiscard]] int64_t size() const { return rows * cols; }
};

struct ParamRef {
    View w;
    View g;
};

class Params {
public:
    /// Registers a parameter; returns its handle. Precondition: allocate() not yet called.
    int64_t add(const ParamInfo& info);

    /// Lays the parameters out (TP-replicated ones first, expert ones last), allocates weights and
    /// gradients (and Adam moments for this rank's 1/`shards` of them), and fills the weights from
    /// `seed`.
    void allocate(Backend& be, int64_t shards, uint64_t seed);

    [[nodiscard]] ParamRef ref(int64_t handle) const;
    [[nodiscard]] const ParamInfo& info(int64_t handle) const;

    [[nodiscard]] const std::vector<ParamInfo>& all() const { return infos_; }

    [[nodiscard]] View weights() const { return w_.view(); }

    [[nodiscard]] View grads() const { return g_.view(); }

    [[nodiscard]] View adam_m() const { return m_.view(); }

    [[nodiscard]] View adam_v() const { return v_.view(); }

    /// Elements of the flat buffers (padded to a multiple of the shard count).
    [[nodiscard]] int64_t padded_size() const { return w_.size(); }

    /// Leading elements that belong to TP-replicated parameters.
    [[nodiscard]] int64_t replicated_size() const { return replicated_; }

    /// First element of the expert parameters (== count() when there are none): their
    /// gradients are reduced over the expert-DP group, the ones before over DP.
    [[nodiscard]] int64_t expert_begin() const { return expert_begin_; }

    /// Elements of real parameters (without padding).
    [[nodiscard]] int64_t count() const { return count_; }

    /// Sum of this rank's counted weights, in double.
    [[nodiscard]] double checksum(Backend& be) const;

    /// Per tensor (name, value): the sum of this rank's counted part of it, each weight times a
    /// fixed pseudo-random number in [-1, 1) drawn from the tensor name and global index (issue
    /// 16). Summed over ranks it is the same for every split of the model; unlike the plain
    /// sum it is not dominated by the norm gains near 1, and per tensor one weight off by an
    /// Adam step (~lr) moves it by ~lr/2 against the tests' 1e-5 tolerance.
    [[nodiscard]] std::vector<std::pair<std::string, double>> probes(Backend& be) const;

private:
    std::vector<ParamInfo> infos_;
    Buffer w_;
    Buffer g_;
    Buffer m_;
    Buffer v_;
    int64_t replicated_ = 0;
    int64_t expert_begin_ = 0;
    int64_t count_ = 0;
};

}  // namespace cleave::executor
