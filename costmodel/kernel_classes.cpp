#include "costmodel/kernel_classes.hpp"

namespace cleave {

ClassTimes& ClassTimes::operator+=(const ClassTimes& o) {
    gemm += o.gemm;
    attention += o.attention;
    quantize += o.quantize;
    norm += o.norm;
    activation += o.activation;
    elementwise += o.elementwise;
    moe_permute += o.moe_permute;
    communication += o.communication;
    other += o.other;
    gaps += o.gaps;
    return *this;
}

ClassTimes operator*(const ClassTimes& c, double k) {
    return {c.gemm * k,        c.attention * k,   c.quantize * k,
            c.norm * k,        c.activation * k,  c.elementwise * k,
            c.moe_permute * k, c.communication * k, c.other * k, c.gaps * k};
}

ClassTimes layer_class_times(const LayerCost& lc, const LayerClasses& k) {
    ClassTimes t;
    t.gemm = lc.gemm + k.recompute_gemm;
    t.attention = lc.attention + k.softmax + k.recompute_attention;
    t.quantize = k.quantize;
    t.norm = k.norm + k.recompute_norm;
    t.activation = k.activation + k.recompute_activation;
    t.moe_permute = k.permute;
    const Seconds named_memory = k.quantize + k.norm + k.activation + k.softmax + k.permute + k.gaps;
    const Seconds named_redo =
        k.recompute_gemm + k.recompute_attention + k.recompute_norm + k.recompute_activation;
    t.elementwise = max(Seconds{}, lc.memory - named_memory) + max(Seconds{}, lc.recompute - named_redo);
    t.communication = lc.tp_fwd + lc.tp_bwd + lc.cp_fwd + lc.cp_bwd + lc.ep_fwd + lc.ep_bwd;
    t.other = lc.expert_overhead;
    t.gaps = k.gaps;
    return t;
}

}  // namespace cleave
