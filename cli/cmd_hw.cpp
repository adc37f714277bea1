// cleave hw list | cleave hw show NAME|FILE: the shipped hardware profiles and one profile's
// values in display units (the same unit-suffixed names as the profile TOML, STYLE S3.3).
#include "cli/commands.hpp"
#include "core/cluster.hpp"
#include "core/load.hpp"

#include <cstdio>
#include <memory>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace cleave::cli {

namespace {

struct HwShowOptions {
    std::string profile;
    std::string format = "table";
};

struct HwListOptions {
    std::string format = "table";
};

const char* name_of(IntraLink l) {
    switch (l) {
    case IntraLink::nvswitch:
        return "nvswitch";
    case IntraLink::nvlink_mesh:
        return "nvlink-mesh";
    case IntraLink::xgmi:
        return "xgmi";
    case IntraLink::pcie:
        return "pcie";
    }
    return "?";
}

nlohmann::json profile_json(const ClusterSpec& c) {
    const GpuSpec& g = c.gpu;
    nlohmann::json curve_sizes = nlohmann::json::array();
    nlohmann::json curve_effs = nlohmann::json::array();
    for (const auto& p : g.gemm_efficiency) {
        curve_sizes.push_back(p.size.value() / 1e9);
        curve_effs.push_back(p.efficiency);
    }
    return {
        {"name", c.name},
        {"display_name", c.display_name},
        {"source", c.source},
        {"calibration", c.calibration},  // the fitted overlay applied (hwprofiles/calibration/)
        {"price_per_gpu_hour_usd", c.price_per_gpu_hour_usd},
        {"gpu",
         {{"name", g.name},
          {"hbm_capacity_gib", to_gib(g.memory)},
          {"reserved_memory_gib", to_gib(g.reserved_memory)},
          {"usable_memory_gib", to_gib(usable_memory(g))},
          {"hbm_bandwidth_gbps", to_gbps(g.hbm_bw)},
          {"hbm_efficiency", g.hbm_efficiency},
          {"peak_tflops_fp32", to_tflops(g.peak_fp32)},
          {"peak_tflops_tf32", to_tflops(g.peak_tf32)},
          {"peak_tflops_bf16", to_tflops(g.peak_bf16)},
          {"peak_tflops_fp16", to_tflops(g.peak_fp16)},
          {"peak_tflops_fp8", to_tflops(g.peak_fp8)},
          {"gemm_efficiency", {{"size_gflop", curve_sizes}, {"efficiency", curve_effs}}}}},
        {"node",
         {{"gpus_per_node", c.node.gpus_per_node},
          {"intra_link", name_of(c.node.intra_link)},
          {"intra_bandwidth_gbps", to_gbps(c.node.intra_bw)},
          {"intra_latency_us", to_us(c.node.intra_latency)},
          {"pcie_bandwidth_gbps", to_gbps(c.node.pcie_bw)},
          {"sync_wait_us", to_us(c.node.sync_wait)},
          {"all_reduce_bandwidth_gbps", to_gbps(c.node.collective_bw.all_reduce)},
          {"all_gather_bandwidth_gbps", to_gbps(c.node.collective_bw.all_gather)},
          {"reduce_scatter_bandwidth_gbps", to_gbps(c.node.collective_bw.reduce_scatter)},
          {"send_recv_bandwidth_gbps", to_gbps(c.node.collective_bw.send_recv)}}},
        {"network",
         {{"kind", c.network.kind},
          {"inter_bandwidth_gbps", to_gbps(c.network.inter_bw)},
          {"inter_latency_us", to_us(c.network.inter_latency)}}},
    };
}

std::string num(double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", x);
    return b;
}

void print_rows(std::ostream& out, const std::string& prefix, const nlohmann::json& j) {
    for (const auto& [k, v] : j.items()) {
        const std::string key = prefix.empty() ? k : prefix + "." + k;
        if (v.is_object()) {
            print_rows(out, key, v);
            continue;
        }
        std::string text;
        if (v.is_string()) {
            text = v.get<std::string>();
        } else if (v.is_array()) {
            for (const auto& e : v) {
                text += (text.empty() ? "" : ",") + num(e.get<double>());
            }
        } else if (v.is_number_float()) {
            text = num(v.get<double>());
        } else {
            text = v.dump();
        }
        out << key << std::string(key.size() < 36 ? 36 - key.size() : 1, ' ') << text << "\n";
    }
}

void run_show(const HwShowOptions& o, CliContext& ctx) {
    const nlohmann::json j = profile_json(load_cluster(o.profile));
    if (o.format == "json") {
        ctx.out << j.dump(2) << "\n";
        return;
    }
    ctx.out << "# cleave hw show: " << j["name"].get<std::string>() << " ("
            << j["display_name"].get<std::string>() << ")\n";
    ctx.out << "# key (unit suffix as in the profile TOML)  value\n";
    print_rows(ctx.out, "", j);
}

void run_list(const HwListOptions& o, CliContext& ctx) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& name : shipped_profiles()) {
        const ClusterSpec c = load_cluster(name);
        list.push_back({{"name", c.name},
                        {"display_name", c.display_name},
                        {"gpu", c.gpu.name},
                        {"gpus_per_node", c.node.gpus_per_node},
                        {"hbm_capacity_gib", to_gib(c.gpu.memory)},
                        {"peak_tflops_bf16", to_tflops(c.gpu.peak_bf16)},
                        {"intra_bandwidth_gbps", to_gbps(c.node.intra_bw)},
                        {"inter_bandwidth_gbps", to_gbps(c.network.inter_bw)},
                        {"source", c.source}});
    }
    if (o.format == "json") {
        ctx.out << list.dump(2) << "\n";
        return;
    }
    char line[256];
    std::snprintf(line,
                  sizeof line,
                  "# %-16s %5s %9s %10s %11s %11s  %s\n",
                  "name",
                  "gpus",
                  "mem(GiB)",
                  "bf16(TF/s)",
                  "intra(GB/s)",
                  "inter(GB/s)",
                  "gpu");
    ctx.out << line;
    for (const auto& p : list) {
        std::snprintf(line,
                      sizeof line,
                      "%-18s %5lld %9.2f %10.1f %11.2f %11.4g  %s\n",
                      p["name"].get<std::string>().c_str(),
                      static_cast<long long>(p["gpus_per_node"].get<int64_t>()),
                      p["hbm_capacity_gib"].get<double>(),
                      p["peak_tflops_bf16"].get<double>(),
                      p["intra_bandwidth_gbps"].get<double>(),
                      p["inter_bandwidth_gbps"].get<double>(),
                      p["gpu"].get<std::string>().c_str());
        ctx.out << line;
    }
}

}  // namespace

void setup_hw(CLI::App& app, CliContext& ctx) {
    auto* hw = app.add_subcommand("hw", "List the shipped hardware profiles or show one");
    hw->require_subcommand(1);

    auto list = std::make_shared<HwListOptions>();
    auto* ls = hw->add_subcommand("list", "List the shipped hardware profiles");
    ls->add_option("--format", list->format, "Output: table or json")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    ls->callback([list, &ctx] { run_list(*list, ctx); });

    auto show = std::make_shared<HwShowOptions>();
    auto* sh = hw->add_subcommand("show", "Show one profile's values in display units");
    sh->add_option("PROFILE", show->profile, "A shipped profile name or a profile TOML path")
        ->required();
    sh->add_option("--format", show->format, "Output: table or json")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    sh->callback([show, &ctx] { run_show(*show, ctx); });
}

}  // namespace cleave::cli
