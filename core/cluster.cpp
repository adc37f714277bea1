#include "core/cluster.hpp"

#include <algorithm>
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
    case Dtype::mxfp8:
        return gpu.peak_mxfp8;
    case Dtype::nvfp4:
        return gpu.peak_nvfp4;
    }
    return {};
}

int64_t nvlink_domain(const NodeSpec& n) {
    const int64_t d = n.nvlink_domain_gpus > 0 ? n.nvlink_domain_gpus : n.gpus_per_node;
    return d > 0 ? d : 1;
}

Bytes usable_memory(const GpuSpec& gpu) {
    return gpu.memory;
}

namespace {

// The curve at x = ln(size): clamped to its end points, linear in ln(size) between them.
double curve_at_ln(const std::vector<GemmEfficiencyPoint>& c, double x) {
    if (c.empty()) {
        return 0.0;
    }
    if (x <= c.front().ln_size) {
        return c.front().efficiency;
    }
    for (size_t i = 1; i < c.size(); ++i) {
        if (x <= c[i].ln_size) {
            const double x0 = c[i - 1].ln_size;
            const double w = (x - x0) / (c[i].ln_size - x0);
            return c[i - 1].efficiency + w * (c[i].efficiency - c[i - 1].efficiency);
        }
    }
    return c.back().efficiency;
}

double curve_at(const std::vector<GemmEfficiencyPoint>& c, Flops size) {
    return curve_at_ln(c, std::log(size.value()));
}

}  // namespace

Seconds quantised_expert_overhead(const NodeSpec& n,
                                  const std::string& release,
                                  std::string* fitted_under) {
    Seconds v = n.quantised_expert_overhead;
    std::string from = n.quantised_expert_release;
    if (!release.empty()) {
        for (const auto& e : n.quantised_expert_from_release) {
            if (e.release <= release && e.release >= from) {
                v = e.value;
                from = e.release;
            }
        }
    }
    if (fitted_under != nullptr) {
        *fitted_under = from;
    }
    return v;
}

double tensor_clock_ceiling(const GpuSpec& gpu) {
    if (gpu.peak_clock_mhz <= 0.0 || gpu.sustained_clock_mhz <= 0.0) {
        return 1.0;
    }
    return std::min(1.0, gpu.sustained_clock_mhz / gpu.peak_clock_mhz);
}

double gemm_efficiency(const GpuSpec& gpu, Flops size) {
    return std::min(curve_at(gpu.gemm_efficiency, size), tensor_clock_ceiling(gpu));
}

const std::vector<GemmEfficiencyPoint>& gemm_curve(const GpuSpec& gpu, Dtype d) {
    const auto& fp8 =
        gpu.gemm_efficiency_fp8.empty() ? gpu.gemm_efficiency : gpu.gemm_efficiency_fp8;
    switch (d) {
    case Dtype::fp8:
        return fp8;
    case Dtype::mxfp8:
        return gpu.gemm_efficiency_mxfp8.empty() ? fp8 : gpu.gemm_efficiency_mxfp8;
    case Dtype::nvfp4:
        return gpu.gemm_efficiency_nvfp4.empty() ? fp8 : gpu.gemm_efficiency_nvfp4;
    default:
        return gpu.gemm_efficiency;
    }
}

double gemm_efficiency(const GpuSpec& gpu, Flops size, Dtype d) {
    return std::min(curve_at(gemm_curve(gpu, d), size), tensor_clock_ceiling(gpu));
}

double gemm_efficiency_ln(const GpuSpec& gpu, double ln_size, Dtype d) {
    return std::min(curve_at_ln(gemm_curve(gpu, d), ln_size), tensor_clock_ceiling(gpu));
}

}  // namespace cleave
