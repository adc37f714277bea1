// For every row of a public-runs CSV (../shared/validation/public_runs.csv) whose hardware has a
// shipped profile: is the authors' plan feasible in cleave, where does it rank among all
// feasible plans (fastest iteration first), and is cleave's top plan predicted no slower?
//   build/<dir>/bench/planner_public_runs /work/shared/validation/public_runs.csv [hwprofiles]
// Prints one '#'-commented table; exit 1 when a describable row fails the check.
#include "core/load.hpp"
#include "planner/search.hpp"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Row = std::map<std::string, std::string>;

std::vector<std::string> split_csv_line(const std::string& line) {
    std::vector<std::string> out(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (c == '"' && quoted && i + 1 < line.size() && line[i + 1] == '"') {
            out.back() += '"';
            ++i;
        } else if (c == '"') {
            quoted = !quoted;
        } else if (c == ',' && !quoted) {
            out.emplace_back();
        } else {
            out.back() += c;
        }
    }
    return out;
}

std::vector<Row> read_csv(const std::string& path) {
    std::ifstream in(path);
    if (!in) {
        throw std::runtime_error("cannot open " + path);
    }
    std::string line;
    std::getline(in, line);
    const std::vector<std::string> header = split_csv_line(line);
    std::vector<Row> rows;
    while (std::getline(in, line)) {
        if (line.empty()) {
            continue;
        }
        const auto cells = split_csv_line(line);
        Row r;
        for (std::size_t i = 0; i < header.size() && i < cells.size(); ++i) {
            r[header[i]] = cells[i];
        }
        rows.push_back(std::move(r));
    }
    return rows;
}

int64_t num(const Row& r, const char* key, int64_t fallback) {
    const auto it = r.find(key);
    return it == r.end() || it->second.empty() ? fallback : std::stoll(it->second);
}

bool has(const Row& r, const char* key, const char* what) {
    const auto it = r.find(key);
    return it != r.end() && it->second.find(what) != std::string::npos;
}

/// The shipped profile for the row's hardware, or "" when cleave has none.
std::string profile_for(const Row& r) {
    if (!has(r, "gpu_type", "A100-SXM4")) {
        return "";  // V100 rows ran on a DGX-2 (16 GPUs on NVSwitch): no shipped profile
    }
    return has(r, "gpu_memory_gb", "80") ? "dgx-a100-80g" : "dgx-a100-40g";
}

cleave::ModelSpec model_of(const Row& r) {
    cleave::ModelSpec m;
    m.name = r.at("model");
    m.layers = num(r, "num_layers", 0);
    m.hidden = num(r, "hidden_size", 0);
    m.heads = num(r, "num_attention_heads", 0);
    m.kv_heads = num(r, "num_kv_heads", m.heads);
    m.ffn_hidden = num(r, "ffn_hidden_size", 4 * m.hidden);
    m.vocab = num(r, "vocab_size", 51200);
    m.seq_len = num(r, "seq_length", 2048);
    return m;  // GPT-style: GeLU, LayerNorm, learned positions, tied embeddings, biases
}

cleave::JobSpec job_of(const Row& r, const cleave::ModelSpec& m) {
    cleave::JobSpec j;
    j.gpus = num(r, "num_gpus", 0);
    j.global_batch = num(r, "global_batch_size", 0);
    j.seq_len = m.seq_len;
    j.compute = has(r, "precision", "fp16") ? cleave::Dtype::fp16 : cleave::Dtype::bf16;
    j.weights = j.compute;
    return j;
}

cleave::Plan plan_of(const Row& r) {
    cleave::Plan p;
    p.tp = num(r, "tp", 1);
    p.pp = num(r, "pp", 1);
    p.dp = num(r, "dp", 1);
    p.cp = num(r, "cp", 1);
    p.ep = num(r, "ep", 1);
    p.vpp = num(r, "vpp", 1);
    p.mbs = num(r, "micro_batch_size", 1);
    p.schedule = p.vpp > 1 ? cleave::Schedule::interleaved : cleave::Schedule::one_f_one_b;
    p.sp = has(r, "sequence_parallel", "yes");
    // Unstated recomputation (the 2020 README rows) is taken as full: Megatron-LM's example
    // scripts of that time pass --checkpoint-activations.
    const bool stated = !r.at("activation_recompute").empty();
    p.recompute = !stated || has(r, "activation_recompute", "full") ? cleave::Recompute::full
                  : has(r, "activation_recompute", "selective")     ? cleave::Recompute::selective
                                                                    : cleave::Recompute::none;
    p.zero = has(r, "dp_sharding", "ZeRO-3") ? 3 : (has(r, "dp_sharding", "distributed") ? 1 : 0);
    return p;
}

struct Outcome {
    bool ok = false;
    std::string line;
};

Outcome check_row(const Row& r, const std::string& profiles) {
    const std::string prof = profile_for(r);
    std::array<char, 400> b{};
    if (prof.empty()) {
        std::snprintf(b.data(),
                      b.size(),
                      "%4s  %-24s skipped: no shipped profile for %s",
                      r.at("row_id").c_str(),
                      r.at("model").substr(0, 24).c_str(),
                      r.at("gpu_type").c_str());
        return {true, b.data()};
    }
    const cleave::ModelSpec m = model_of(r);
    const cleave::ClusterSpec c = cleave::load_cluster(profiles + "/" + prof + ".toml");
    const cleave::JobSpec j = job_of(r, m);
    const cleave::Plan authors = plan_of(r);
    cleave::SearchOptions o;
    o.top_k = 1;
    const cleave::SearchResult res = cleave::search(m, c, j, o);
    const int64_t rank = cleave::rank_of(m, c, j, o, authors);
    const auto problems = cleave::check_plan(m, j, authors);
    const double t_auth =
        problems.empty() ? cleave::estimate(m, c, j, authors).iteration_time.value() : -1.0;
    const double t_top = res.plans.empty() ? -1.0 : res.plans[0].estimate.iteration_time.value();
    const bool ok = rank > 0 && t_top > 0 && t_top <= t_auth;
    std::snprintf(b.data(),
                  b.size(),
                  "%4s  %-24s %5lld %-12s %-32s %6lld %8lld %9.2f %9.2f  %s",
                  r.at("row_id").c_str(),
                  r.at("model").substr(0, 24).c_str(),
                  static_cast<long long>(j.gpus),
                  prof.c_str(),
                  cleave::to_string(authors).substr(0, 32).c_str(),
                  static_cast<long long>(rank),
                  static_cast<long long>(res.feasible),
                  t_auth,
                  t_top,
                  res.plans.empty() ? "-" : cleave::to_string(res.plans[0].plan).c_str());
    return {ok, b.data()};
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << "usage: planner_public_runs public_runs.csv [hwprofiles dir]\n";
        return 2;
    }
    const std::string profiles = argc > 2 ? argv[2] : CLEAVE_SOURCE_DIR "/hwprofiles";
    std::cout << "# row model                    gpus profile      authors' plan (dp tp pp cp ep "
                 "vpp mbs ...)  rank feasible  t_auth(s)  t_top(s)  top plan\n";
    int failed = 0;
    for (const Row& r : read_csv(argv[1])) {
        const Outcome o = check_row(r, profiles);
        std::cout << o.line << (o.ok ? "" : "  <-- FAIL") << "\n";
        failed += o.ok ? 0 : 1;
    }
    std::cout << "# rank: position of the authors' plan among all feasible plans, fastest first "
                 "(0 = not feasible in cleave); unstated recompute taken as full\n";
    std::cout << "# rows failing (authors' plan infeasible, or top slower): " << failed << "\n";
    return failed == 0 ? 0 : 1;
}
