#include "core/cluster.hpp"

#include <cmath>

namespace cleave {

FlopsPerSecond peak_flops(const GpuSpec& gpu, Dtype d) {
    switch (d) {
    case Dtype::fp32:
        return gpu.peak_fp32;
    case Dtype::tf32:
        return gpu.peak_tf32;
    case Dtype::bf16:
        return gpu.peak_bf16;
    case Dtype::fp16:
        return gpu.peak_fp16;
    case Dtype::fp8:
        return gpu.peak_fp8;
    }
    return {};
}

Bytes usable_memory(const GpuSpec& gpu) {
    return gpu.memory - gpu.reserved_memory;
}

double gemm_efficiency(const GpuSpec& gpu, Flops size) {
    const auto& c = gpu.gemm_efficiency;
    if (c.empty()) {
        return 0.0;
    }
    if (size <= c.front().size) {
        return c.front().efficiency;
    }
    if (size >= c.back().size) {
        return c.back().efficiency;
    }
    for (size_t i = 1; i < c.size(); ++i) {
        if (size <= c[i].size) {
            const double x0 = c[i - 1].ln_size;
            const double x1 = c[i].ln_size;
            const double w = (std::log(size.value()) - x0) / (x1 - x0);
            return c[i - 1].efficiency + w * (c[i].efficiency - c[i - 1].efficiency);
        }
    }
    return c.back().efficiency;
}

}  // namespace cleave
