#pragma once
// Which parts of the flat gradient buffer a rank has started to reduce over DP (issue 17). The
// run starts a layer's gradients as soon as the chunk's last backward has passed the layer, and
// reduces the rest (embedding, output layer, TP-replicated norms and biases) after the
// backward; pure bookkeeping, so that every element is reduced exactly once.

#include "executor/params.hpp"
#include "executor/transformer.hpp"

#include <cstdint>
#include <vector>

namespace cleave::executor {

/// Elements [begin, end) of the flat gradient buffer.
struct GradRange {
    int64_t begin = 0;
    int64_t end = 0;

    bool operator==(const GradRange&) const = default;
};

/// The flat-buffer ranges of `layer`'s parameters that are not TP-replicated, sorted, adjacent
/// ones merged. TP-replicated ones are left for after the backward: with sequence parallelism
/// they are all-reduced over TP first (run.cpp, update()).
[[nodiscard]] std::vector<GradRange> layer_grad_ranges(const Params& params,
                                                       const LayerHandles& layer);

/// The ranges of [0, total) already started, and the rest.
class DpBuckets {
public:
    explicit DpBuckets(int64_t total)
        : total_(total) {}

    /// Marks r started; returns the parts of r not started before (sorted, disjoint).
    [[nodiscard]] std::vector<GradRange> take(GradRange r);

    /// [0, total) without what was started, sorted and merged.
    [[nodiscard]] std::vector<GradRange> rest() const;

    /// Forgets every start (next iteration).
    void reset() { taken_.clear(); }

private:
    int64_t total_ = 0;
    std::vector<GradRange> taken_;  // sorted, disjoint, merged
};

}  // namespace cleave::executor
