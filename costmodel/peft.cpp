// LoRA and DoRA fine-tuning's costs (costmodel/peft.hpp).
#include "costmodel/peft.hpp"

#include "costmodel/num.hpp"
#include "costmodel/precision.hpp"

#include <algorithm>

namespace cleave {

namespace {

using detail::d;

// The base linears' whole (tp 1) forward shapes of one layer, in Bridge's target order.
void lora_base_shapes(const ModelSpec& m, const JobSpec& job, GemmShape out[4]) {
    Plan whole;
    const LayerGemms g = layer_gemms(m, job, whole, false, LayerShape::full);
    out[0] = g.qkv;
    out[1] = g.proj;
    out[2] = g.mlp_in;
    out[3] = g.mlp_out;
}

constexpr uint8_t lora_target_bits[4] = {lora_target::linear_qkv,
                                         lora_target::linear_proj,
                                         lora_target::linear_fc1,
                                         lora_target::linear_fc2};

}  // namespace

LoraLayerGemms lora_layer_gemms(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    LoraLayerGemms out;
    if (job.peft == Peft::none) {
        return out;
    }
    GemmShape base[4];
    lora_base_shapes(m, job, base);
    const double t = d(p.tp);
    const double tok = tokens_per_gpu(job, p);
    const double r = d(job.lora_dim);
    for (int i = 0; i < 4; ++i) {
        LoraAdapterGemms& a = out.linear[i];
        if ((job.lora_targets & lora_target_bits[i]) == 0 || base[i].n <= 0.0) {
            a.a.count = 0.0;
            a.b.count = 0.0;
            continue;
        }
        a.column = i == 0 || i == 2;  // linear_qkv, linear_fc1
        a.a = a.column ? GemmShape{tok, r / t, base[i].k, 1.0}
                       : GemmShape{tok, r, base[i].k / t, 1.0};
        a.b = GemmShape{tok, base[i].n / t, r, 1.0};
    }
    return out;
}

double lora_params_per_layer(const ModelSpec& m, const JobSpec& job) {
    if (job.peft == Peft::none) {
        return 0.0;
    }
    GemmShape base[4];
    lora_base_shapes(m, job, base);
    double n = 0.0;
    for (int i = 0; i < 4; ++i) {
        if ((job.lora_targets & lora_target_bits[i]) != 0) {
            // DoRA: and the magnitude, one per output row (dora_layers.py weight_magnitude (d,)).
            n += d(job.lora_dim) * (base[i].k + base[i].n) + (job.peft == Peft::dora ? base[i].n : 0.0);
        }
    }
    return n;
}

StateBytes
lora_model_states(const JobSpec& job, double frozen, double adapters, int zero, int64_t shard) {
    // The adapters are Megatron-Core's own 16-bit linears, whatever the base's storage (FP8).
    JobSpec adapter_job = job;
    adapter_job.weights = unquantised(job.weights);
    StateBytes s = model_states(adapter_job, adapters, zero, shard);
    s.weights +=
        bytes(frozen * bytes_of(job.weights) / (zero >= 3 ? d(std::max<int64_t>(1, shard)) : 1.0));
    return s;
}

Bytes lora_activation_per_layer(const ModelSpec& m,
                                const JobSpec& job,
                                const Plan& p,
                                Recompute r) {
    if (job.peft == Peft::none || r == Recompute::full) {
        return {};
    }
    const LoraLayerGemms g = lora_layer_gemms(m, job, p);
    const double ab = activation_bytes(job);
    const double tok = tokens_per_gpu(job, p);
    double total = 0.0;
    for (const LoraAdapterGemms& a : g.linear) {
        if (a.b.count <= 0.0) {
            continue;
        }
        total += ab * tok * d(job.lora_dim);
        if (a.column) {
            total += ab * tok * d(m.hidden);  // its whole (gathered) input: the base keeps none
        }
        if (job.peft == Peft::dora) {
            // The scale's product keeps the sum it multiplies (base + adapter output) for the
            // magnitude's gradient: the base output as this GPU holds it.
            total += ab * dora_output_elements(a, p);
        }
    }
    return bytes(total);
}

Seconds lora_gemm_time(const GpuSpec& gpu, Dtype dt, const GemmShape& g, GemmPass pass) {
    if (g.count <= 0.0 || gemm_flops(g).value() <= 0.0) {
        return {};
    }
    const Seconds math = gemm_time(gpu, dt, g, pass);
    const Seconds stream = memory_time(
        gpu, KernelClass::elementwise, bytes(gemm_pass_bytes(g, pass, bytes_of(dt)) * g.count));
    return max(max(math, stream), gpu.kernel_floor);
}

namespace {

// One adapter's TP collectives (peft.hpp LoraTimes), added to lt.
void add_lora_tp(LoraTimes& lt,
                 const LoraAdapterGemms& a,
                 const JobSpec& job,
                 const Plan& p,
                 const PlanLinks& links,
                 double S_B,
                 double s_B) {
    const int64_t t = p.tp;
    const auto run = [&](Collective k, double size_B, bool fwd) {
        const Bytes b = bytes(size_B);
        (fwd ? lt.tp_fwd : lt.tp_bwd) += collective_time(k, b, t, links.tp);
        lt.tp_bytes += collective_bytes_sent(k, b, t);
    };
    if (!a.column) {
        run(Collective::all_reduce, s_B, true);
        run(Collective::all_gather, S_B, true);
        if (p.sp) {
            run(Collective::all_gather, S_B, false);
        }
        run(Collective::all_reduce, s_B, false);
        return;
    }
    run(Collective::all_gather, s_B, true);
    run(Collective::all_reduce, s_B, false);
    if (p.sp && job.stack.tp_comm_overlap) {
        run(Collective::all_gather, S_B, true);
        run(Collective::reduce_scatter, S_B, false);
    } else if (!p.sp) {
        run(Collective::all_reduce, S_B, false);
    }
}

}  // namespace

double dora_output_elements(const LoraAdapterGemms& a, const Plan& p) {
    // a.b.n is out / t either way.
    return a.column ? a.b.m * a.b.n : a.b.m * a.b.n * d(p.tp) / (p.sp ? d(p.tp) : 1.0);
}

double dora_weight_elements(const LoraAdapterGemms& a, const Plan& p) {
    // a.a.k is in for a column base, in / t for a row one; a.b.n is out / t.
    return a.column ? a.a.k * a.b.n : a.a.k * a.b.n * d(p.tp);
}

LoraTimes lora_layer_times(const ModelSpec& m,
                           const GpuSpec& gpu,
                           const JobSpec& job,
                           const Plan& p,
                           const PlanLinks& links) {
    LoraTimes lt;
    if (job.peft == Peft::none) {
        return lt;
    }
    // Bridge's adapters are Megatron-Core's own (non-TE) linears: 16-bit GEMMs under FP8 too.
    const Dtype dt = unquantised(job.compute);
    const double ab = activation_bytes(job);
    const LoraLayerGemms g = lora_layer_gemms(m, job, p);
    KernelBytes fwd;
    KernelBytes bwd;
    KernelLaunches fwd_n;
    KernelLaunches bwd_n;
    for (const LoraAdapterGemms& a : g.linear) {
        if (a.b.count <= 0.0) {
            continue;
        }
        for (const GemmShape* s : {&a.a, &a.b}) {
            lt.fwd_gemm += lora_gemm_time(gpu, dt, *s, GemmPass::fprop);
            lt.bwd_gemm += lora_gemm_time(gpu, dt, *s, GemmPass::dgrad) +
                           lora_gemm_time(gpu, dt, *s, GemmPass::wgrad);
        }
        const double out = a.b.m * a.b.n;  // the adapter's output on this GPU
        const double in = a.a.m * a.a.k;   // its input on this GPU
        fwd.elementwise += bytes(5.0 * ab * out);
        bwd.elementwise += bytes(ab * (2.0 * out + 3.0 * in));
        fwd_n.elementwise += 2.0;
        bwd_n.elementwise += 2.0;
        if (p.tp > 1) {
            const double tok = a.b.m;
            add_lora_tp(lt, a, job, p, links, ab * tok * d(m.hidden), ab * tok * d(job.lora_dim));
        }
        if (job.peft == Peft::dora) {
            // DoRALinear.forward (dora_layers.py @067f987d): every forward rebuilds W + s B A to
            // take its row norms (_get_weight_norm, detached: no backward through it): B A
            // written, scaled, added to W, read by the norm: 2 + 4 + 6 + 2 = 14 B a weight
            // element, 4 launches; its split factor gathered first (A for a column base, B for
            // a row one: r x in or out x r, 16-bit). The output scaled by magnitude / norm: 4 B
            // an output element and a launch (with the tiny division, 2); backward that
            // product's two gradients (the input's 4 B, the magnitude's product and token sum
            // 6 B), 2 launches.
            const double w = dora_weight_elements(a, p);
            const double o = dora_output_elements(a, p);
            fwd.elementwise += bytes(7.0 * ab * w + 2.0 * ab * o);
            bwd.elementwise += bytes(5.0 * ab * o);
            fwd_n.elementwise += 6.0;
            bwd_n.elementwise += 2.0;
            if (p.tp > 1) {
                const double factor = a.column ? a.a.k : a.b.n * d(p.tp);  // in, or out
                const Bytes b = bytes(ab * d(job.lora_dim) * factor);
                lt.tp_fwd += collective_time(Collective::all_gather, b, p.tp, links.tp);
                lt.tp_bytes += collective_bytes_sent(Collective::all_gather, b, p.tp);
            }
        }
    }
    lt.fwd_memory = memory_time(gpu, fwd, fwd_n);
    lt.bwd_memory = memory_time(gpu, bwd, bwd_n);
    return lt;
}

}  // namespace cleave
