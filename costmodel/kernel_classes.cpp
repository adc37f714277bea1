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
    return *this;
}

ClassTimes operator*(const ClassTimes& c, double k) {
    return {c.gemm * k,        c.attention * k,   c.quantize * k,
            c.norm * k,        c.activation * k,  c.elementwise * k,
            c.moe_permute * k, c.communication * k, c.other * k};
}

ClassTimes layer_class_times(const LayerCost& lc) {
    ClassTimes t;
    t.gemm = lc.gemm + lc.recompute_gemm;
    t.attention = lc.attention + lc.softmax + lc.recompute_attention;
    t.quantize = lc.quantize;
    t.norm = lc.norm + lc.recompute_norm;
    t.activation = lc.activation + lc.recompute_activation;
    t.moe_permute = lc.permute;
    const Seconds named_memory = lc.quantize + lc.norm + lc.activation + lc.softmax + lc.permute;
    const Seconds named_redo =
        lc.recompute_gemm + lc.recompute_attention + lc.recompute_norm + lc.recompute_activation;
    t.elementwise = max(Seconds{}, lc.memory - named_memory) + max(Seconds{}, lc.recompute - named_redo);
    t.communication = lc.tp_fwd + lc.tp_bwd + lc.cp_fwd + lc.cp_bwd + lc.ep_fwd + lc.ep_bwd;
    t.other = lc.expert_overhead;
    return t;
}

}  // namespace cleave
