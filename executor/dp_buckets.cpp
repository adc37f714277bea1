#include "executor/dp_buckets.hpp"

#include <algorithm>

namespace cleave::executor {

namespace {

// Sorts and merges overlapping or adjacent ranges; drops empty ones.
std::vector<GradRange> merged(std::vector<GradRange> v) {
    std::sort(v.begin(), v.end(), [](const GradRange& a, const GradRange& b) {
        return a.begin < b.begin;
    });
    std::vector<GradRange> out;
    for (const GradRange& r : v) {
        if (r.end <= r.begin) {
            continue;
        }
        if (!out.empty() && r.begin <= out.back().end) {
            out.back().end = std::max(out.back().end, r.end);
        } else {
            out.push_back(r);
        }
    }
    return out;
}

// `from` without the (sorted, disjoint) `holes`.
std::vector<GradRange> subtract(GradRange from, const std::vector<GradRange>& holes) {
    std::vector<GradRange> out;
    int64_t at = from.begin;
    for (const GradRange& h : holes) {
        if (h.end <= at || h.begin >= from.end) {
            continue;
        }
        if (h.begin > at) {
            out.push_back({at, h.begin});
        }
        at = std::max(at, h.end);
    }
    if (at < from.end) {
        out.push_back({at, from.end});
    }
    return out;
}

}  // namespace

std::vector<GradRange> layer_grad_ranges(const Params& params, const LayerHandles& layer) {
    std::vector<GradRange> v;
    for (const int64_t h : layer.dense_handles()) {
        if (h < 0) {
            continue;
        }
        const ParamInfo& info = params.info(h);
        if (!info.tp_replicated) {
            v.push_back({info.offset, info.offset + info.size()});
        }
    }
    return merged(std::move(v));
}

std::vector<GradRange> DpBuckets::take(GradRange r) {
    const std::vector<GradRange> fresh = subtract(r, taken_);
    std::vector<GradRange> all = taken_;
    all.insert(all.end(), fresh.begin(), fresh.end());
    taken_ = merged(std::move(all));
    return fresh;
}

std::vector<GradRange> DpBuckets::rest() const {
    return subtract({0, total_}, taken_);
}

}  // namespace cleave::executor
