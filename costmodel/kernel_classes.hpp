#pragma once
// The price by the kernel classes a profiler trace shows (trace/classes.hpp: gemm, attention,
// quantize, norm, activation, elementwise, moe_permute, ...), so `explain --trace` and `calibrate
// --from-trace` put cleave's figures beside a measurement class by class. Pure.

#include "costmodel/compute.hpp"
#include "core/units.hpp"

namespace cleave {

struct ClassTimes {
    Seconds gemm;
    Seconds attention;  // the attention core (fused kernel, or score GEMMs + softmax + dropout)
    Seconds quantize;   // FP8 / FP4 casts of GEMM operands
    Seconds norm;
    Seconds activation;
    Seconds elementwise;  // residual adds, dropout, RoPE, what memory-bound time is left
    Seconds moe_permute;  // MoE router and token permutation
    Seconds communication;  // exposed TP / CP / EP collectives, as priced
    Seconds other;  // priced with no kernel class: the fitted per-expert cost of quantised MoE
    Seconds gaps;   // no kernel: the compute stream idle between launches (cleave trace's
                    // launch gaps; costmodel/launches.hpp)

    bool operator==(const ClassTimes&) const = default;

    /// Every class but communication (the gaps are no kernel's).
    [[nodiscard]] Seconds compute() const {
        return gemm + attention + quantize + norm + activation + elementwise + moe_permute + other;
    }
    ClassTimes& operator+=(const ClassTimes& o);
};

[[nodiscard]] ClassTimes operator*(const ClassTimes& c, double k);

/// One layer, one micro-batch: forward, backward and what backward recomputes, by class.
/// gemm = gemm + recompute_gemm; attention = attention + softmax + recompute_attention; norm,
/// activation likewise; quantize, moe_permute as priced; elementwise = memory less the named
/// classes and the launch gaps, plus the recompute not named; other = the expert overhead;
/// communication = the exposed TP + CP + EP time; gaps = the launch gaps.
[[nodiscard]] ClassTimes layer_class_times(const LayerCost& lc, const LayerClasses& k);

}  // namespace cleave
