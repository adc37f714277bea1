// Hardware-profile TOML -> ClusterSpec, and finding shipped profiles by name.
// Keys carry their unit as a suffix (STYLE S3.3); only this file converts them to SI.
#include "core/calibration.hpp"
#include "core/load.hpp"
#include "core/load_detail.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>

namespace cleave {

namespace {

namespace fs = std::filesystem;
using detail::Need;
using detail::TableReader;

template <class T>
void set(T& field, const std::optional<T>& v) {
    if (v) {
        field = *v;
    }
}

void read_curve(TableReader& r, std::vector<GemmEfficiencyPoint>& curve) {
    const auto sizes = r.numbers("size_gflop", Need::required, false);
    const auto effs = r.numbers("efficiency", Need::required, true);
    if (sizes && sizes->empty()) {
        r.bad_value("size_gflop", "must hold at least one point");
        return;
    }
    if (sizes &&
        std::adjacent_find(sizes->begin(), sizes->end(), std::greater_equal<>()) != sizes->end()) {
        r.bad_value("size_gflop", "must be strictly increasing");
        return;
    }
    if (!sizes || !effs) {
        return;
    }
    if (sizes->size() != effs->size()) {
        r.bad_value("efficiency",
                    "has " + std::to_string(effs->size()) + " values but " +
                        r.quoted("size_gflop") + " has " + std::to_string(sizes->size()));
        return;
    }
    for (size_t i = 0; i < sizes->size(); ++i) {
        curve.push_back({flop((*sizes)[i] * 1e9), (*effs)[i]});
    }
}

FlopsPerSecond peak(TableReader& r, std::string_view key, Need need) {
    const auto v = r.quantity(key, need, need == Need::optional);
    return v ? tflops(*v) : FlopsPerSecond{};
}

void read_gpu(TableReader& r, GpuSpec& g, detail::DiagnosticSink& sink) {
    set(g.name, r.text("name", Need::required));
    const auto capacity = r.quantity("hbm_capacity_gib", Need::required);
    const auto reserved = r.quantity("reserved_memory_gib", Need::required, true);
    if (capacity) {
        g.memory = gib(*capacity);
    }
    if (reserved) {
        g.reserved_memory = gib(*reserved);
    }
    if (capacity && reserved && *reserved >= *capacity) {
        r.bad_value("reserved_memory_gib", "must be less than " + r.quoted("hbm_capacity_gib"));
    }
    if (const auto bw = r.quantity("hbm_bandwidth_gbps", Need::required)) {
        g.hbm_bw = gbps(*bw);
    }
    set(g.hbm_efficiency, r.fraction("hbm_efficiency", Need::required));
    set(g.tdp_w, r.quantity("tdp_w", Need::optional));
    set(g.peak_clock_mhz, r.quantity("peak_clock_mhz", Need::optional));
    set(g.sustained_clock_mhz, r.quantity("sustained_clock_mhz", Need::optional));
    set(g.throughput_spread, r.fraction("throughput_spread", Need::optional));
    if (g.sustained_clock_mhz > 0.0 && g.peak_clock_mhz <= 0.0) {
        r.bad_value("sustained_clock_mhz", "needs " + r.quoted("peak_clock_mhz") +
                                               " (the clock the peaks assume) beside it");
    }
    // Per-class memory efficiencies (optional; absent = 0 = hbm_efficiency, costmodel/compute.hpp).
    set(g.norm_efficiency, r.fraction("norm_efficiency", Need::optional));
    set(g.elementwise_efficiency, r.fraction("elementwise_efficiency", Need::optional));
    set(g.activation_efficiency, r.fraction("activation_efficiency", Need::optional));
    set(g.gated_activation_efficiency, r.fraction("gated_activation_efficiency", Need::optional));
    set(g.softmax_efficiency, r.fraction("softmax_efficiency", Need::optional));
    set(g.cross_entropy_efficiency, r.fraction("cross_entropy_efficiency", Need::optional));
    set(g.optimizer_efficiency, r.fraction("optimizer_efficiency", Need::optional));
    set(g.ssm_efficiency, r.fraction("ssm_efficiency", Need::optional));
    set(g.quantize_efficiency_tensorwise,
        r.fraction("quantize_efficiency_tensorwise", Need::optional));
    set(g.quantize_efficiency_delayed, r.fraction("quantize_efficiency_delayed", Need::optional));
    set(g.quantize_efficiency_blockwise,
        r.fraction("quantize_efficiency_blockwise", Need::optional));
    set(g.quantize_efficiency_mxfp8, r.fraction("quantize_efficiency_mxfp8", Need::optional));
    set(g.quantize_efficiency_nvfp4, r.fraction("quantize_efficiency_nvfp4", Need::optional));
    set(g.gemm_tensor_efficiency_fp8, r.fraction("gemm_tensor_efficiency_fp8", Need::optional));
    set(g.sm_count, r.count("sm_count", Need::optional));
    if (const auto f = r.quantity("launch_gap_us", Need::optional, true)) {
        g.launch_gap = us(*f);
    }
    if (const auto f = r.quantity("kernel_floor_us", Need::optional, true)) {
        g.kernel_floor = us(*f);
    }
    set(g.batched_gemm_fused, r.flag("batched_gemm_fused", Need::optional));
    g.peak_fp32 = peak(r, "peak_tflops_fp32", Need::required);
    g.peak_tf32 = peak(r, "peak_tflops_tf32", Need::optional);
    g.peak_bf16 = peak(r, "peak_tflops_bf16", Need::optional);
    g.peak_fp16 = peak(r, "peak_tflops_fp16", Need::optional);
    g.peak_fp8 = peak(r, "peak_tflops_fp8", Need::optional);
    g.peak_mxfp8 = peak(r, "peak_tflops_mxfp8", Need::optional);
    g.peak_nvfp4 = peak(r, "peak_tflops_nvfp4", Need::optional);
    for (auto [key, curve] : {std::pair{"gemm_efficiency", &g.gemm_efficiency},
                              std::pair{"gemm_efficiency_fp8", &g.gemm_efficiency_fp8},
                              std::pair{"gemm_efficiency_mxfp8", &g.gemm_efficiency_mxfp8},
                              std::pair{"gemm_efficiency_nvfp4", &g.gemm_efficiency_nvfp4}}) {
        const Need need = curve == &g.gemm_efficiency ? Need::required : Need::optional;
        if (const toml::table* t = r.table(key, need)) {
            TableReader c(*t, std::string("gpu.") + key, sink);
            read_curve(c, *curve);
            c.finish();
        }
    }
}

void read_node(TableReader& r, NodeSpec& n) {
    set(n.gpus_per_node, r.count("gpus_per_node", Need::required));
    // The NVLink domain holds whole hosts (GB200 NVL72: 18 trays of 4); default one host.
    n.nvlink_domain_gpus = n.gpus_per_node;
    set(n.nvlink_domain_gpus, r.count("nvlink_domain_gpus", Need::optional));
    if (n.gpus_per_node > 0 && n.nvlink_domain_gpus % n.gpus_per_node != 0) {
        r.bad_value("nvlink_domain_gpus",
                    "must be a multiple of " + r.quoted("gpus_per_node") + " (" +
                        std::to_string(n.gpus_per_node) + ")");
    }
    set(n.intra_link,
        r.choice<IntraLink>("intra_link",
                            Need::required,
                            {{"nvswitch", IntraLink::nvswitch},
                             {"nvlink-mesh", IntraLink::nvlink_mesh},
                             {"xgmi", IntraLink::xgmi},
                             {"pcie", IntraLink::pcie}}));
    if (const auto bw = r.quantity("intra_bandwidth_gbps", Need::required)) {
        n.intra_bw = gbps(*bw);
    }
    if (const auto lat = r.quantity("intra_latency_us", Need::required, true)) {
        n.intra_latency = us(*lat);
    }
    if (const auto bw = r.quantity("pcie_bandwidth_gbps", Need::required)) {
        n.pcie_bw = gbps(*bw);
    }
    if (const auto w = r.quantity("sync_wait_us", Need::optional, true)) {
        n.sync_wait = us(*w);
    }
    if (const auto f = r.fraction("sync_wait_fraction", Need::optional)) {
        n.sync_wait_fraction = *f;
    }
    for (auto [key, field] :
         {std::pair{"all_reduce_bandwidth_gbps", &n.collective_bw.all_reduce},
          std::pair{"all_gather_bandwidth_gbps", &n.collective_bw.all_gather},
          std::pair{"reduce_scatter_bandwidth_gbps", &n.collective_bw.reduce_scatter},
          std::pair{"send_recv_bandwidth_gbps", &n.collective_bw.send_recv}}) {
        if (const auto bw = r.quantity(key, Need::optional)) {
            *field = gbps(*bw);
        }
    }
}

// The per-GPU inter-node bandwidth is given in GB/s or, for Ethernet-class links that are
// quoted in bits, in Gbit/s: exactly one of the two keys.
void read_network(TableReader& r, NetworkSpec& n) {
    set(n.kind, r.text("kind", Need::required));
    const bool has_bytes = r.has("inter_bandwidth_gbps");
    const bool has_bits = r.has("inter_bandwidth_gbit_s");
    if (has_bytes && has_bits) {
        r.bad_value("inter_bandwidth_gbit_s",
                    "and " + r.quoted("inter_bandwidth_gbps") + " both set: give exactly one");
        r.accept("inter_bandwidth_gbps");
        r.accept("inter_bandwidth_gbit_s");
    } else if (has_bits) {
        if (const auto bw = r.quantity("inter_bandwidth_gbit_s", Need::required)) {
            n.inter_bw = gbit_per_s(*bw);
        }
    } else if (const auto bw = r.quantity("inter_bandwidth_gbps", Need::required)) {
        n.inter_bw = gbps(*bw);
    }
    if (const auto lat = r.quantity("inter_latency_us", Need::required, true)) {
        n.inter_latency = us(*lat);
    }
}

}  // namespace

ClusterSpec parse_cluster_toml(std::string_view text, const std::string& source_name) {
    const toml::table root = detail::parse_toml(text, source_name);
    detail::DiagnosticSink sink(source_name);
    TableReader top(root, "", sink);
    ClusterSpec c;
    c.source = source_name;
    c.name = fs::path(source_name).stem().string();
    if (const toml::table* t = top.table("cluster", Need::required)) {
        TableReader r(*t, "cluster", sink);
        set(c.name, r.text("name", Need::required));
        c.display_name = c.name;
        set(c.display_name, r.text("display_name", Need::optional));
        set(c.price_per_gpu_hour_usd, r.quantity("price_per_gpu_hour_usd", Need::optional, true));
        r.finish();
    }
    if (const toml::table* t = top.table("gpu", Need::required)) {
        TableReader r(*t, "gpu", sink);
        read_gpu(r, c.gpu, sink);
        r.finish();
    }
    if (const toml::table* t = top.table("node", Need::required)) {
        TableReader r(*t, "node", sink);
        read_node(r, c.node);
        r.finish();
    }
    if (const toml::table* t = top.table("network", Need::required)) {
        TableReader r(*t, "network", sink);
        read_network(r, c.network);
        r.finish();
    }
    top.finish();
    sink.throw_if_any();
    return c;
}

std::vector<fs::path> hwprofile_dirs() {
    return detail::data_dirs(
        "CLEAVE_HWPROFILES", CLEAVE_SOURCE_HWPROFILES, CLEAVE_INSTALL_HWPROFILES);
}

std::vector<std::string> shipped_profiles() {
    return detail::toml_stems(hwprofile_dirs());
}

ClusterSpec load_cluster(const std::string& name_or_path) {
    ClusterSpec c = load_cluster_uncalibrated(name_or_path);
    if (const auto cal = find_calibration(c.name)) {
        apply_calibration(*cal, c);
    }
    return c;
}

ClusterSpec load_cluster_uncalibrated(const std::string& name_or_path) {
    if (const auto path = detail::find_toml(name_or_path, hwprofile_dirs())) {
        return parse_cluster_toml(detail::read_text_file(*path), path->string());
    }
    throw ConfigError("unknown hardware profile '" + name_or_path +
                      "': not a file, and not one of the shipped profiles (" +
                      detail::comma_list(shipped_profiles(), "none found") +
                      "); set CLEAVE_HWPROFILES to a folder of profiles");
}

}  // namespace cleave
