#include "calibrate/profile.hpp"

#include "core/errors.hpp"
#include "costmodel/flops.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

namespace cleave::calibrate {

namespace {

std::string num(double v, int digits = 6) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    std::string s = buf;
    // TOML needs a float to look like one ("1e-05" is fine, "3" is an integer but also accepted).
    return s;
}

std::string list(const std::vector<double>& v, int digits = 6) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) {
        out += (i ? ", " : "") + num(v[i], digits);
    }
    return out + "]";
}

std::string quoted(const std::string& s) {
    std::string out = "\"";
    for (const char ch : s) {
        if (ch == '"' || ch == '\\') {
            out += '\\';
        }
        out += ch;
    }
    return out + "\"";
}

}  // namespace

std::vector<AlphaBetaSample> alpha_beta_samples(const std::vector<CollectiveSample>& samples) {
    std::vector<AlphaBetaSample> out;
    for (const auto& s : samples) {
        out.push_back({static_cast<double>(ring_steps(s.op, s.ranks)),
                       s.size_B * busbw_factor(s.op, s.ranks),
                       s.t_s});
    }
    return out;
}

std::optional<KernelClass> kernel_class_of(std::string_view kernel) {
    const auto starts = [&](std::string_view p) { return kernel.substr(0, p.size()) == p; };
    if (starts("norm_")) {
        return KernelClass::norm;
    }
    if (starts("bias_residual_")) {
        return KernelClass::elementwise;
    }
    if (starts("gelu_")) {
        return KernelClass::activation;
    }
    if (starts("swiglu_")) {
        return KernelClass::gated_activation;
    }
    if (kernel == "attention") {
        return KernelClass::softmax;
    }
    if (kernel == "cross_entropy") {
        return KernelClass::cross_entropy;
    }
    if (kernel == "adam") {
        return KernelClass::optimizer;
    }
    if (kernel == "ssm") {
        return KernelClass::ssm;
    }
    return std::nullopt;
}

namespace {

[[noreturn]] void different_sweeps(const char* what) {
    throw ConfigError(std::string("calibrate: cannot average two calibrations whose ") + what +
                      " samples differ");
}

template <class Sample, class Same>
std::vector<Sample> mean_samples(const std::vector<Sample>& a,
                                 const std::vector<Sample>& b,
                                 const char* what,
                                 Same same) {
    if (a.size() != b.size()) {
        different_sweeps(what);
    }
    std::vector<Sample> out = a;
    for (size_t i = 0; i < a.size(); ++i) {
        if (!same(a[i], b[i])) {
            different_sweeps(what);
        }
        out[i].t_s = 0.5 * (a[i].t_s + b[i].t_s);
    }
    return out;
}

}  // namespace

Calibration mean_of(const Calibration& a, const Calibration& b) {
    Calibration c = a;
    c.gemm = mean_samples(a.gemm, b.gemm, "GEMM", [](const GemmSample& x, const GemmSample& y) {
        return x.m == y.m && x.n == y.n && x.k == y.k;
    });
    const auto same_stream = [](const StreamSample& x, const StreamSample& y) {
        return x.kernel == y.kernel && x.elems == y.elems && x.bytes_per_elem == y.bytes_per_elem;
    };
    c.memory = mean_samples(a.memory, b.memory, "memory", same_stream);
    c.kernels = mean_samples(a.kernels, b.kernels, "kernel", same_stream);
    c.collectives =
        mean_samples(a.collectives,
                     b.collectives,
                     "collective",
                     [](const CollectiveSample& x, const CollectiveSample& y) {
                         return x.op == y.op && x.ranks == y.ranks && x.size_B == y.size_B;
                     });
    return c;
}

double attention_gemm_s(const std::string& backend,
                        FlopsPerSecond peak,
                        const std::vector<GemmEfficiencyPoint>& curve) {
    GpuSpec g;
    g.peak_fp32 = peak;
    g.gemm_efficiency = curve;
    g.batched_gemm_fused = backend != "cpu";
    const AttentionShape a = attention_bench_shape;
    const auto d = [](int64_t v) { return static_cast<double>(v); };
    const double count = d(a.batch * a.heads);
    const GemmShape score{d(a.seq), d(a.seq), d(a.head_dim), count};
    const GemmShape attn_v{d(a.seq), d(a.head_dim), d(a.seq), count};
    // Forward Q K^T and P V; backward a data- and a weight-gradient GEMM of each (as
    // costmodel/compute.cpp layer_cost prices the attention core).
    return 3.0 * (gemm_time(g, Dtype::fp32, score) + gemm_time(g, Dtype::fp32, attn_v)).value();
}

namespace {

// A Mamba-2 layer of ssm_bench_shape, as the cost model sees it (fp32, one rank).
struct SsmBench {
    ModelSpec m;
    JobSpec job;
    Plan p;
};

SsmBench ssm_bench() {
    const SsmShape sh = ssm_bench_shape;
    SsmBench b;
    b.m.hidden = sh.d_inner();  // the pre-norm and residual are not the ssm class: any width
    b.m.mamba.heads = sh.heads;
    b.m.mamba.head_dim = sh.head_dim;
    b.m.mamba.groups = sh.groups;
    b.m.mamba.state = sh.state;
    b.m.mamba.chunk = sh.chunk;
    b.m.mamba.conv_kernel = sh.conv_kernel;
    b.job.compute = Dtype::fp32;
    b.job.seq_len = sh.seq;
    b.p.mbs = sh.batch;
    return b;
}

}  // namespace

double ssm_bench_bytes_per_token() {
    const SsmBench b = ssm_bench();
    const LayerTraffic tr = mamba_traffic(b.m, b.job, b.p);
    return (tr.fwd_by_class.ssm + tr.bwd_by_class.ssm).value() /
           static_cast<double>(ssm_bench_shape.tokens());
}

double ssm_gemm_s(const std::string& backend,
                  FlopsPerSecond peak,
                  const std::vector<GemmEfficiencyPoint>& curve) {
    GpuSpec g;
    g.peak_fp32 = peak;
    g.gemm_efficiency = curve;
    g.batched_gemm_fused = backend != "cpu";
    const SsmBench b = ssm_bench();
    const MambaGemms mg = mamba_gemms(b.m, b.job, b.p);
    const Seconds scan = gemm_time(g, Dtype::fp32, mg.cb) + gemm_time(g, Dtype::fp32, mg.scan_x) +
                         gemm_time(g, Dtype::fp32, mg.states) +
                         gemm_time(g, Dtype::fp32, mg.state_out);
    return 3.0 * scan.value();
}

Summary summarize(const Calibration& c) {
    if (c.gemm.empty() || c.memory.empty()) {
        throw ConfigError("calibration holds no GEMM or memory samples");
    }
    Summary s;
    s.sync_wait_fraction = c.sync.wait_fraction();
    double peak = 0.0;
    for (const auto& g : c.gemm) {
        peak = std::max(peak, g.flop_per_s());
    }
    s.peak = FlopsPerSecond{peak};
    std::map<double, std::pair<double, int>> by_size;  // FLOPs -> (sum of efficiencies, count)
    for (const auto& g : c.gemm) {
        auto& e = by_size[g.flop()];
        e.first += g.flop_per_s() / peak;
        e.second += 1;
    }
    for (const auto& [f, e] : by_size) {
        s.curve.push_back({flop(f), e.first / e.second});
    }
    double mem_peak = 0.0;
    for (const auto& m : c.memory) {
        mem_peak = std::max(mem_peak, m.bytes_per_s());
    }
    // The executor's kernels in the cost model's byte accounting, per class and all together:
    // sum of bytes / sum of times (weighted by how long each takes). On small activations that
    // stay in cache they can beat the DRAM stream; then they set the peak.
    std::map<KernelClass, std::pair<double, double>> by_class;  // class -> (bytes, seconds)
    double kernel_B = 0.0;
    double kernel_s = 0.0;
    for (const auto& k : c.kernels) {
        const std::optional<KernelClass> cls = kernel_class_of(k.kernel);
        if (!cls) {
            continue;
        }
        double t = k.t_s;
        if (*cls == KernelClass::softmax) {
            // The attention core less what the cost model charges its GEMMs: the softmax.
            s.attention_s = k.t_s;
            s.attention_gemm_s = attention_gemm_s(c.backend, s.peak, s.curve);
            t = k.t_s - s.attention_gemm_s;
            if (t < 0.05 * k.t_s) {
                continue;  // the GEMM price explains it all: nothing left to measure
            }
        }
        if (*cls == KernelClass::ssm) {
            // The Mamba-2 kernels less what the cost model charges the scan's products.
            s.ssm_s = k.t_s;
            s.ssm_gemm_s = ssm_gemm_s(c.backend, s.peak, s.curve);
            t = k.t_s - s.ssm_gemm_s;
            if (t < 0.05 * k.t_s) {
                continue;
            }
        }
        const double b = k.bytes_per_elem * static_cast<double>(k.elems);
        auto& e = by_class[*cls];
        e.first += b;
        e.second += t;
        if (*cls == KernelClass::ssm) {
            continue;  // a hybrid model's own kernels: kept out of the mix every class shares
        }
        kernel_B += b;
        kernel_s += t;
    }
    const double kernels = kernel_s > 0.0 ? kernel_B / kernel_s : mem_peak;
    s.kernels_bw = BytesPerSecond{kernels};
    double peak_bw = std::max(mem_peak, kernels);
    for (const auto& [cls, e] : by_class) {
        s.classes.push_back({cls, BytesPerSecond{e.first / e.second}, 0.0});
        peak_bw = std::max(peak_bw, e.first / e.second);
    }
    s.memory_peak = BytesPerSecond{peak_bw};
    s.memory_efficiency = kernels / peak_bw;
    for (auto& cb : s.classes) {
        cb.efficiency = cb.bw.value() / peak_bw;
    }
    for (const Collective op : {Collective::all_reduce,
                                Collective::all_gather,
                                Collective::reduce_scatter,
                                Collective::send_recv}) {
        std::vector<CollectiveSample> mine;
        std::copy_if(c.collectives.begin(),
                     c.collectives.end(),
                     std::back_inserter(mine),
                     [op](const CollectiveSample& x) { return x.op == op; });
        if (mine.size() >= 2) {
            s.per_collective.push_back({op, fit_alpha_beta(alpha_beta_samples(mine))});
        }
    }
    if (c.collectives.size() >= 2) {
        s.link = fit_alpha_beta(alpha_beta_samples(c.collectives));
        s.link_measured = true;
    } else {
        // One rank: nothing to measure. A copy between two ranks through shared memory reads
        // and writes every byte once, so its bus bandwidth is about half the copy bandwidth.
        s.link.alpha = us(1.0);
        s.link.beta = s.memory_peak / 2.0;
    }
    return s;
}

ClusterSpec to_cluster(const Calibration& c, const Summary& s, const std::string& name) {
    ClusterSpec k;
    k.name = name;
    k.display_name = c.device + ", " + std::to_string(c.ranks_per_host) + " ranks per host (" +
                     c.backend + " backend, cleave calibrate)";
    GpuSpec& g = k.gpu;
    g.name = c.device;
    const double per_rank =
        c.host_memory_B / static_cast<double>(std::max<int64_t>(c.ranks_per_host, 1));
    g.memory = bytes(per_rank);
    g.reserved_memory = Bytes{};
    g.hbm_bw = s.memory_peak;
    g.hbm_efficiency = s.memory_efficiency;
    for (const auto& cb : s.classes) {
        kernel_efficiency_field(g, cb.cls) = cb.efficiency;
    }
    g.batched_gemm_fused = c.backend != "cpu";
    g.peak_fp32 = s.peak;
    g.gemm_efficiency = s.curve;
    NodeSpec& n = k.node;
    n.gpus_per_node = std::max<int64_t>(c.ranks_per_host, 1);
    n.intra_link = IntraLink::nvswitch;
    n.intra_bw = s.link.beta;
    n.intra_latency = s.link.alpha;
    n.sync_wait_fraction = s.sync_wait_fraction;
    for (const auto& f : s.per_collective) {
        BytesPerSecond* bw = bandwidth_of(n.collective_bw, f.op);
        if (bw != nullptr && f.fit.beta.value() > 0.0) {
            *bw = f.fit.beta;
        }
    }
    n.pcie_bw = s.memory_peak;
    NetworkSpec& w = k.network;
    w.kind = "none";
    w.inter_bw = s.link.beta;
    w.inter_latency = s.link.alpha;
    return k;
}

namespace {

std::string class_source(KernelClass k, const Summary& s) {
    switch (k) {
    case KernelClass::norm:
        return "layernorm forward + backward";
    case KernelClass::elementwise:
        return "add_bias + residual axpy, bias_grad + residual axpy";
    case KernelClass::activation:
        return "GeLU forward + backward";
    case KernelClass::gated_activation:
        return "SwiGLU forward + backward";
    case KernelClass::softmax:
        return "attention forward + backward " + num(s.attention_s * 1e3, 4) + " ms less " +
               num(s.attention_gemm_s * 1e3, 4) + " ms the cost model charges its GEMMs";
    case KernelClass::cross_entropy:
        return "cross-entropy row max + exp-sum + gradient";
    case KernelClass::optimizer:
        return "Adam";
    case KernelClass::ssm:
        return "Mamba-2 conv + SiLU, SSD scan, gated RMSNorm forward + backward " +
               num(s.ssm_s * 1e3, 4) + " ms less " + num(s.ssm_gemm_s * 1e3, 4) +
               " ms the cost model charges the scan's products";
    }
    return "";
}

void header(std::ostringstream& o,
            const Calibration& c,
            const Summary& s,
            const ClusterSpec& k,
            const Provenance& p) {
    o << "# " << k.name << ": measured by cleave calibrate on " << p.date_utc << "\n"
      << "#   command: " << p.command << "\n"
      << "#   host " << c.host << ", " << c.ranks << " rank(s), " << c.ranks_per_host
      << " per host, backend " << c.backend << " (" << c.device << ")"
      << (c.quick ? ", --quick (short timings)" : "") << "\n#\n"
      << "# A \"gpu\" is one rank: its GEMM peak is the best fp32 GEMM throughput of the sweep\n"
      << "# (all ranks computing at once), the curve is relative to that peak, and \"HBM\" is\n"
      << "# the memory bandwidth one rank gets while every rank streams. The intra-node link is\n"
      << "# one alpha-beta fit t = alpha * steps + S * busbw_factor / beta over every timed\n"
      << "# collective (docs/calibrate.md); busbw as nccl-tests doc/PERFORMANCE.md defines it.\n#\n"
      << "# GEMM sweep (m x n x k, mean of NN / NT / TN; GFLOP/s per rank):\n";
    for (const auto& g : c.gemm) {
        o << "#   " << g.m << " x " << g.n << " x " << g.k << ": " << num(g.flop_per_s() / 1e9, 4)
          << "\n";
    }
    o << "# Memory (GB/s per rank, all ranks at once):";
    for (const auto& m : c.memory) {
        o << " " << m.kernel << " " << num(m.bytes_per_s() / 1e9, 4);
    }
    o << "\n# Executor kernels (GB/s in the cost model's bytes):";
    for (const auto& m : c.kernels) {
        o << " " << m.kernel << " " << num(m.bytes_per_s() / 1e9, 4);
    }
    o << "\n";
    if (!s.per_collective.empty()) {
        o << "# Collective fits (alpha per ring step, beta = bus bandwidth, rms relative error):\n";
        for (const auto& f : s.per_collective) {
            o << "#   " << to_string(f.op) << ": alpha " << num(to_us(f.fit.alpha), 4)
              << " us, beta " << num(to_gbps(f.fit.beta), 4) << " GB/s, rms "
              << num(100.0 * f.fit.rms_rel_error, 3) << "% over " << f.fit.samples << " samples\n";
        }
    }
    o << "\n";
}

}  // namespace

std::string
profile_toml(const Calibration& c, const Summary& s, const ClusterSpec& k, const Provenance& p) {
    std::ostringstream o;
    const std::string by = "[M] cleave calibrate " + p.date_utc;
    header(o, c, s, k, p);
    o << "[cluster]\nname = " << quoted(k.name) << "\ndisplay_name = " << quoted(k.display_name)
      << "\n\n[gpu]\nname = " << quoted(k.gpu.name) << "\n"
      << "hbm_capacity_gib = " << num(to_gib(k.gpu.memory), 6) << "  # [M] host memory "
      << num(c.host_memory_B / 1073741824.0, 6) << " GiB / " << c.ranks_per_host
      << " ranks per host\n"
      << "reserved_memory_gib = 0.0  # [E] the executor tracks its own allocations only\n"
      << "hbm_bandwidth_gbps = " << num(to_gbps(k.gpu.hbm_bw)) << "  # " << by
      << ": best streaming kernel per rank, all ranks at once\n"
      << "hbm_efficiency = " << num(k.gpu.hbm_efficiency, 4) << "  # " << by
      << ": all the executor's memory-bound kernels below, bytes as the cost model counts them "
         "per second ("
      << num(to_gbps(s.kernels_bw), 4) << " GB/s), / hbm_bandwidth_gbps\n";
    for (const auto& cb : s.classes) {
        o << to_string(cb.cls) << "_efficiency = " << num(cb.efficiency, 4) << "  # " << by << ": "
          << class_source(cb.cls, s) << " (" << num(to_gbps(cb.bw), 4)
          << " GB/s in the cost model's bytes), / hbm_bandwidth_gbps\n";
    }
    o << "batched_gemm_fused = " << (k.gpu.batched_gemm_fused ? "true" : "false") << "  # "
      << (k.gpu.batched_gemm_fused
              ? "[D] the cuda backend runs a batch of attention GEMMs as one strided-batched "
                "cuBLAS call"
              : "[D] the cpu backend runs the attention GEMMs one batch element and head at a "
                "time")
      << "\n"
      << "peak_tflops_fp32 = " << num(to_tflops(k.gpu.peak_fp32)) << "  # " << by
      << ": best fp32 GEMM of the sweep (" << num(to_tflops(k.gpu.peak_fp32) * 1e3, 4)
      << " GFLOP/s)\n\n[gpu.gemm_efficiency]\n# " << by
      << ": one point per GEMM size of the sweep, throughput / peak_tflops_fp32\n";
    std::vector<double> sizes;
    std::vector<double> effs;
    for (const auto& pt : k.gpu.gemm_efficiency) {
        sizes.push_back(pt.size.value() / 1e9);
        effs.push_back(pt.efficiency);
    }
    o << "size_gflop = " << list(sizes, 6) << "  # [M] 2 m n k / 1e9\n"
      << "efficiency = " << list(effs, 4) << "  # " << by << "\n\n";
    const std::string link_src =
        s.link_measured
            ? by + ": alpha-beta fit over " + std::to_string(s.link.samples) +
                  " collective timings, rms error " + num(100.0 * s.link.rms_rel_error, 3) + "%"
            : std::string("[E] one rank, nothing measured: half the copy bandwidth");
    o << "[node]\ngpus_per_node = " << k.node.gpus_per_node << "  # [M] ranks on " << c.host
      << "\nintra_link = \"nvswitch\"  # shared memory: every rank pair at full bandwidth\n"
      << "intra_bandwidth_gbps = " << num(to_gbps(k.node.intra_bw)) << "  # " << link_src << "\n"
      << "intra_latency_us = " << num(to_us(k.node.intra_latency)) << "  # " << link_src << "\n"
      << "pcie_bandwidth_gbps = " << num(to_gbps(k.node.pcie_bw))
      << "  # [E] host memory: the best streaming kernel\n";
    for (const auto& f : s.per_collective) {
        if (f.fit.beta.value() > 0.0) {
            o << to_string(f.op) << "_bandwidth_gbps = " << num(to_gbps(f.fit.beta)) << "  # " << by
              << ": alpha-beta fit over its " << f.fit.samples << " timings, rms error "
              << num(100.0 * f.fit.rms_rel_error, 3) << "%\n";
        }
    }
    // Written only when positive: 0 is the key's absence (the loader reads it as a fraction in
    // (0, 1]).
    if (c.sync.segments > 0 && k.node.sync_wait_fraction > 0.0) {
        o << "sync_wait_fraction = " << num(k.node.sync_wait_fraction) << "  # " << by << ": "
          << c.sync.segments << " ~1 ms GEMM segments in " << c.sync.round_fractions.size()
          << " rounds, each followed by a 1-element all-reduce, less the segments and the "
             "all-reduces alone, over the segments alone: the median round\n";
    }
    o << "\n"
      << "[network]\nkind = " << quoted(k.network.kind)
      << "  # one host: no rank pair crosses a network\n"
      << "inter_bandwidth_gbps = " << num(to_gbps(k.network.inter_bw))
      << "  # [E] not measured (one host): the intra-node fit\n"
      << "inter_latency_us = " << num(to_us(k.network.inter_latency))
      << "  # [E] not measured (one host): the intra-node fit\n";
    return o.str();
}

}  // namespace cleave::calibrate
