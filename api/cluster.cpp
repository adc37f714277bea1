// The shipped hardware profiles and one profile's values in display units (the same
// unit-suffixed names as the profile TOML, STYLE S3.3): cleave hw list | show (api/cleave.hpp).
#include "api/cleave.hpp"
#include "core/calibration.hpp"
#include "core/cluster.hpp"
#include "core/load.hpp"

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cleave::api {

namespace {

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

nlohmann::json curve_json(const std::vector<GemmEfficiencyPoint>& curve) {
    nlohmann::json sizes = nlohmann::json::array();
    nlohmann::json effs = nlohmann::json::array();
    for (const auto& p : curve) {
        sizes.push_back(p.size.value() / 1e9);
        effs.push_back(p.efficiency);
    }
    return {{"size_gflop", sizes}, {"efficiency", effs}};
}

/// Where a profile's numbers come from: the trailing comment of each `key = value  # ...` line
/// (keyed "table.key" as in profile_json), the comment lines that open a table (keyed by the
/// table), and the header's source list (lines "#   Sxx = ..."). Empty for a profile that is not
/// a readable file.
struct ProfileSources {
    std::map<std::string, std::string> by_key;
    std::map<std::string, std::string> by_table;
    std::vector<std::string> ids;
};

// The comment part of a TOML line: from the first '#' outside a double-quoted string.
std::string::size_type comment_start(const std::string& line) {
    bool quoted = false;
    for (std::string::size_type i = 0; i < line.size(); ++i) {
        if (line[i] == '"' && (i == 0 || line[i - 1] != '\\')) {
            quoted = !quoted;
        } else if (line[i] == '#' && !quoted) {
            return i;
        }
    }
    return std::string::npos;
}

std::string trim(const std::string& s) {
    const auto a = s.find_first_not_of(" \t");
    const auto b = s.find_last_not_of(" \t\r");
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

ProfileSources profile_sources(const std::string& file) {
    ProfileSources src;
    std::ifstream in(file);
    std::string line;
    std::string table;
    bool opening = false;  // right after a table header: its comment lines describe it
    while (std::getline(in, line)) {
        const std::string t = trim(line);
        if (t.rfind('[', 0) == 0) {
            table = trim(t.substr(1, t.find(']') - 1));
            opening = true;
        } else if (t.rfind('#', 0) == 0) {
            const std::string text = trim(t.substr(1));
            if (table.empty() && text.size() > 4 && text[0] == 'S' &&
                text.find(" = ") != std::string::npos) {
                src.ids.push_back(text);
            } else if (opening && !table.empty()) {
                std::string& note = src.by_table[table];
                note += (note.empty() ? "" : " ") + text;
            }
        } else if (const auto eq = t.find('='); eq != std::string::npos) {
            opening = false;
            const auto hash = comment_start(t);
            if (hash != std::string::npos) {
                src.by_key[table + "." + trim(t.substr(0, eq))] = trim(t.substr(hash + 1));
            }
        }
    }
    return src;
}

nlohmann::json profile_json(const ClusterSpec& c) {
    const GpuSpec& g = c.gpu;
    nlohmann::json j = {
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
          {"peak_clock_mhz", g.peak_clock_mhz},
          {"sustained_clock_mhz", g.sustained_clock_mhz},
          {"tensor_clock_ceiling", tensor_clock_ceiling(g)},
          {"throughput_spread", g.throughput_spread},
          {"sm_count", g.sm_count},
          {"kernel_floor_us", to_us(g.kernel_floor)},
          {"launch_gap_us", to_us(g.launch_gap)},
          {"gemm_tensor_efficiency_fp8", g.gemm_tensor_efficiency_fp8},
          {"quantize_efficiency_tensorwise", g.quantize_efficiency_tensorwise},
          {"quantize_efficiency_delayed", g.quantize_efficiency_delayed},
          {"quantize_efficiency_blockwise", g.quantize_efficiency_blockwise},
          {"quantize_efficiency_mxfp8", g.quantize_efficiency_mxfp8},
          {"quantize_efficiency_nvfp4", g.quantize_efficiency_nvfp4},
          {"peak_tflops_fp32", to_tflops(g.peak_fp32)},
          {"peak_tflops_tf32", to_tflops(g.peak_tf32)},
          {"peak_tflops_bf16", to_tflops(g.peak_bf16)},
          {"peak_tflops_fp16", to_tflops(g.peak_fp16)},
          {"peak_tflops_fp8", to_tflops(g.peak_fp8)},
          {"peak_tflops_mxfp8", to_tflops(g.peak_mxfp8)},
          {"peak_tflops_nvfp4", to_tflops(g.peak_nvfp4)},
          {"gemm_efficiency", curve_json(g.gemm_efficiency)}}},
        {"node",
         {{"gpus_per_node", c.node.gpus_per_node},
          {"nvlink_domain_gpus", nvlink_domain(c.node)},
          {"intra_link", name_of(c.node.intra_link)},
          {"intra_bandwidth_gbps", to_gbps(c.node.intra_bw)},
          {"intra_latency_us", to_us(c.node.intra_latency)},
          {"pcie_bandwidth_gbps", to_gbps(c.node.pcie_bw)},
          {"sync_wait_us", to_us(c.node.sync_wait)},
          {"sync_wait_fraction", c.node.sync_wait_fraction},
          {"quantised_expert_overhead_us", to_us(c.node.quantised_expert_overhead)},
          {"quantised_expert_recipe", c.node.quantised_expert_recipe},
          {"quantised_expert_release", c.node.quantised_expert_release},
          {"all_reduce_bandwidth_gbps", to_gbps(c.node.collective_bw.all_reduce)},
          {"all_gather_bandwidth_gbps", to_gbps(c.node.collective_bw.all_gather)},
          {"reduce_scatter_bandwidth_gbps", to_gbps(c.node.collective_bw.reduce_scatter)},
          {"send_recv_bandwidth_gbps", to_gbps(c.node.collective_bw.send_recv)}}},
        {"network",
         {{"kind", c.network.kind},
          {"inter_bandwidth_gbps", to_gbps(c.network.inter_bw)},
          {"inter_latency_us", to_us(c.network.inter_latency)}}},
    };
    for (const auto& e : c.node.quantised_expert_from_release) {
        j["node"]["quantised_expert_overhead_us_from_" + e.release] = to_us(e.value);
    }
    for (auto [key, curve] : {std::pair{"gemm_efficiency_fp8", &g.gemm_efficiency_fp8},
                              std::pair{"gemm_efficiency_mxfp8", &g.gemm_efficiency_mxfp8},
                              std::pair{"gemm_efficiency_nvfp4", &g.gemm_efficiency_nvfp4}}) {
        if (!curve->empty()) {
            j["gpu"][key] = curve_json(*curve);
        }
    }
    return j;
}

std::string num(double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", x);
    return b;
}

void print_rows(std::ostream& out,
                const std::string& prefix,
                const nlohmann::json& j,
                const ProfileSources& src) {
    for (const auto& [k, v] : j.items()) {
        const std::string key = prefix.empty() ? k : prefix + "." + k;
        if (v.is_object()) {
            print_rows(out, key, v, src);
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
        out << key << std::string(key.size() < 36 ? 36 - key.size() : 1, ' ') << text;
        if (const auto it = src.by_key.find(key); it != src.by_key.end()) {
            out << std::string(text.size() < 12 ? 12 - text.size() : 1, ' ') << "# " << it->second;
        }
        out << "\n";
    }
}

/// Marks the values a calibration overlay changed as FITTED, ahead of the profile's own note.
void mark_calibrated(const ClusterSpec& c, ProfileSources& src) {
    if (c.calibration.empty()) {
        return;
    }
    const auto cal = find_calibration(c.name);
    if (!cal) {
        return;
    }
    auto mark = [&](const std::string& key, const std::string& what) {
        std::string& note = src.by_key[key];
        note = "FITTED " + what + " (" + cal->source + ")" +
               (note.empty() ? "" : "; profile: " + note);
    };
    if (cal->gemm_efficiency_factor != 1.0) {
        const std::string f = "x " + num(cal->gemm_efficiency_factor);
        for (const char* t : {"gemm_efficiency",
                              "gemm_efficiency_fp8",
                              "gemm_efficiency_mxfp8",
                              "gemm_efficiency_nvfp4"}) {
            if (src.by_key.count(std::string("gpu.") + t + ".efficiency") != 0) {
                mark(std::string("gpu.") + t + ".efficiency", f);
            }
        }
    }
    for (const auto& [key, value] : cal->efficiencies) {
        mark("gpu." + key, "= " + num(value));
    }
}

}  // namespace

nlohmann::json cluster_to_json(const ClusterSpec& c) {
    nlohmann::json j = profile_json(c);
    ProfileSources src = profile_sources(c.source);
    mark_calibrated(c, src);
    j["sources"] = {{"keys", src.by_key}, {"tables", src.by_table}, {"ids", src.ids}};
    return j;
}

void print_cluster_table(std::ostream& os, const ClusterSpec& c) {
    const nlohmann::json j = profile_json(c);
    ProfileSources src = profile_sources(c.source);
    mark_calibrated(c, src);
    os << "# cleave hw show: "<< j["name"].get<std::string>() << " ("
            << j["display_name"].get<std::string>() << ")\n";
    os << "# key (unit suffix as in the profile TOML)  value  # [tag] source: note (from "
            << c.source << "; a value with none is derived or defaulted)\n";
    print_rows(os, "", j, src);
    for (const auto& [table, note] : src.by_table) {
        os << "# [" << table << "] " << note << "\n";
    }
    if (!src.ids.empty()) {
        os << "# sources:\n";
        for (const auto& id : src.ids) {
            os << "#   " << id << "\n";
        }
    }
}

nlohmann::json cluster_list_json() {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& name : shipped_profiles()) {
        const ClusterSpec c = load_cluster(name);
        list.push_back({{"name", c.name},
                        {"display_name", c.display_name},
                        {"gpu", c.gpu.name},
                        {"gpus_per_node", c.node.gpus_per_node},
                        {"nvlink_domain_gpus", nvlink_domain(c.node)},
                        {"hbm_capacity_gib", to_gib(c.gpu.memory)},
                        {"peak_tflops_bf16", to_tflops(c.gpu.peak_bf16)},
                        {"intra_bandwidth_gbps", to_gbps(c.node.intra_bw)},
                        {"inter_bandwidth_gbps", to_gbps(c.network.inter_bw)},
                        {"source", c.source}});
    }
    return list;
}

void print_cluster_list(std::ostream& os) {
    const nlohmann::json list = cluster_list_json();
    char line[256];
    std::snprintf(line,
                  sizeof line,
                  "# %-16s %5s %6s %9s %10s %11s %11s  %s\n",
                  "name",
                  "gpus",
                  "nvlink",
                  "mem(GiB)",
                  "bf16(TF/s)",
                  "intra(GB/s)",
                  "inter(GB/s)",
                  "gpu");
    os << line;
    for (const auto& p : list) {
        std::snprintf(line,
                      sizeof line,
                      "%-18s %5lld %6lld %9.2f %10.1f %11.2f %11.4g  %s\n",
                      p["name"].get<std::string>().c_str(),
                      static_cast<long long>(p["gpus_per_node"].get<int64_t>()),
                      static_cast<long long>(p["nvlink_domain_gpus"].get<int64_t>()),
                      p["hbm_capacity_gib"].get<double>(),
                      p["peak_tflops_bf16"].get<double>(),
                      p["intra_bandwidth_gbps"].get<double>(),
                      p["inter_bandwidth_gbps"].get<double>(),
                      p["gpu"].get<std::string>().c_str());
        os << line;
    }
}


}  // namespace cleave::api
