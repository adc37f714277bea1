#include "core/plan.hpp"

#include "core/errors.hpp"

#include <algorithm>
#include <cctype>

namespace cleave {

int64_t num_microbatches(const Plan& p, const JobSpec& job) {
    const int64_t per_step = p.mbs * p.dp;
    return per_step > 0 ? job.global_batch / per_step : 0;
}

int64_t plan_gpus(const Plan& p) {
    return p.dp * p.tp * p.pp * p.cp;
}

const char* to_string(Schedule s) {
    switch (s) {
    case Schedule::one_f_one_b:
        return "1f1b";
    case Schedule::gpipe:
        return "gpipe";
    case Schedule::interleaved:
        return "interleaved";
    case Schedule::dualpipe:
        return "dualpipe";
    case Schedule::dualpipev:
        return "dualpipev";
    }
    return "?";
}

std::optional<Schedule> parse_schedule(const std::string& name) {
    for (const Schedule s :
         {Schedule::one_f_one_b, Schedule::gpipe, Schedule::interleaved, Schedule::dualpipe,
          Schedule::dualpipev}) {
        if (name == to_string(s)) {
            return s;
        }
    }
    return std::nullopt;
}

const char* to_string(Recompute r) {
    switch (r) {
    case Recompute::none:
        return "none";
    case Recompute::selective:
        return "selective";
    case Recompute::full:
        return "full";
    }
    return "?";
}

const char* to_string(Dtype d) {
    switch (d) {
    case Dtype::fp32:
        return "fp32";
    case Dtype::tf32:
        return "tf32";
    case Dtype::bf16:
        return "bf16";
    case Dtype::fp16:
        return "fp16";
    case Dtype::fp8:
        return "fp8";
    case Dtype::mxfp8:
        return "mxfp8";
    case Dtype::nvfp4:
        return "nvfp4";
    }
    return "?";
}

const char* to_string(Fp8Recipe r) {
    switch (r) {
    case Fp8Recipe::delayed:
        return "delayed";
    case Fp8Recipe::tensorwise:
        return "tensorwise";
    case Fp8Recipe::blockwise:
        return "blockwise";
    }
    return "?";
}

std::string to_string(const Plan& p) {
    return "dp" + std::to_string(p.dp) + " tp" + std::to_string(p.tp) + " pp" +
           std::to_string(p.pp) + " cp" + std::to_string(p.cp) + " ep" + std::to_string(p.ep) +
           " vpp" + std::to_string(p.vpp) + " mbs" + std::to_string(p.mbs) + " " +
           to_string(p.schedule) + " " + to_string(p.recompute) + " sp" + (p.sp ? "1" : "0") +
           " zero" + std::to_string(p.zero) +
           (p.first_layers > 0 ? " first" + std::to_string(p.first_layers) : "") +
           (p.last_layers > 0 ? " last" + std::to_string(p.last_layers) : "") +
           (p.recompute_layers > 0 ? " rl" + std::to_string(p.recompute_layers) : "") +
           (p.recompute_method == RecomputeMethod::block ? " block" : "") +
           (p.recompute_modules != 0 ? " rm[" + recompute_modules_string(p.recompute_modules) + "]"
                                     : "") +
           (p.offload_layers > 0 ? " off" + std::to_string(p.offload_layers) : "") +
           (p.etp > 0 ? " etp" + std::to_string(p.etp) : "");
}

std::string to_flags(const Plan& p) {
    std::string s = "--dp " + std::to_string(p.dp) + " --tp " + std::to_string(p.tp) + " --pp " +
                    std::to_string(p.pp);
    if (p.cp > 1) {
        s += " --cp " + std::to_string(p.cp);
    }
    if (p.ep > 1) {
        s += " --ep " + std::to_string(p.ep);
    }
    if (p.etp > 0) {
        s += " --etp " + std::to_string(p.etp);
    }
    s += " --mbs " + std::to_string(p.mbs);
    if (p.vpp > 1) {
        s += " --vpp " + std::to_string(p.vpp);
    }
    s += std::string(" --schedule ") + to_string(p.schedule) + " --recompute " +
         to_string(p.recompute);
    if (p.recompute_modules != 0) {
        std::string mods = recompute_modules_string(p.recompute_modules);
        std::replace(mods.begin(), mods.end(), ' ', ',');
        s += " --recompute-modules " + mods;
    }
    if (p.offload_layers > 0) {
        s += " --cpu-offloading-num-layers " + std::to_string(p.offload_layers);
    }
    if (p.sp) {
        s += " --sp";
    }
    s += " --zero " + std::to_string(p.zero);
    if (p.first_layers > 0) {
        s += " --first-stage-layers " + std::to_string(p.first_layers);
    }
    if (p.last_layers > 0) {
        s += " --last-stage-layers " + std::to_string(p.last_layers);
    }
    if (p.recompute_layers > 0) {
        s += " --recompute-num-layers " + std::to_string(p.recompute_layers);
    }
    if (p.recompute_method == RecomputeMethod::block) {
        s += " --recompute-method block";
    }
    return s;
}

StageLayers stage_layers(int64_t layers, const Plan& p) {
    if (p.pp <= 1) {
        return {layers, 0, layers};
    }
    const int64_t open = p.pp - (p.first_layers > 0 ? 1 : 0) - (p.last_layers > 0 ? 1 : 0);
    const int64_t rest = layers - p.first_layers - p.last_layers;
    const int64_t share = open > 0 ? rest / open : 0;
    StageLayers sl;
    sl.first = p.first_layers > 0 ? p.first_layers : share;
    sl.last = p.last_layers > 0 ? p.last_layers : share;
    sl.middle = p.pp > 2 ? share : 0;
    return sl;
}

int64_t layers_on_stage(int64_t layers, const Plan& p, int64_t s) {
    const StageLayers sl = stage_layers(layers, p);
    if (s == 0) {
        return sl.first;
    }
    return s == p.pp - 1 ? sl.last : sl.middle;
}

namespace {

/// Layers of chunk `c` of a stage holding `n` layers in `v` chunks; `last` for the last stage
/// of a pipeline of more than one.
int64_t chunk_of(int64_t n, int64_t v, bool last, int64_t c) {
    const int64_t q = n / v;
    const int64_t r = n % v;
    if (last) {
        return q + (c < r ? 1 : 0);  // the last chunk short: it holds the loss
    }
    return q + (c >= v - r ? 1 : 0);  // the first chunk short (stage 0: it holds the embedding)
}

}  // namespace

int64_t chunk_layers(int64_t layers, const Plan& p, int64_t s, int64_t c) {
    const int64_t n = layers_on_stage(layers, p, s);
    return chunk_of(n, std::max<int64_t>(1, p.vpp), s == p.pp - 1 && s > 0, c);
}

int64_t chunk_first_layer(int64_t layers, const Plan& p, int64_t s, int64_t c) {
    // Layers run in virtual-stage order cc * pp + ss: every stage's chunks before c, then chunk
    // c of the stages before s. Stages 1 .. pp - 2 are alike (the middle share), so each sum is
    // first + (middle stages) x middle + last, in O(c).
    const StageLayers sl = stage_layers(layers, p);
    const int64_t v = std::max<int64_t>(1, p.vpp);
    const int64_t mids = std::max<int64_t>(0, p.pp - 2);
    const auto first = [&](int64_t cc) { return chunk_of(sl.first, v, false, cc); };
    const auto middle = [&](int64_t cc) { return chunk_of(sl.middle, v, false, cc); };
    const auto last = [&](int64_t cc) { return chunk_of(sl.last, v, true, cc); };
    int64_t at = 0;
    for (int64_t cc = 0; cc < c; ++cc) {
        at += p.pp == 1 ? first(cc) : first(cc) + mids * middle(cc) + last(cc);
    }
    if (s >= 1) {
        at += first(c) + (s - 1) * middle(c);  // stages 1 .. s-1 < pp-1 are middle stages
    }
    return at;
}

bool uneven_stages(int64_t layers, const Plan& p) {
    const StageLayers sl = stage_layers(layers, p);
    return p.pp > 1 && (sl.first != sl.last || (p.pp > 2 && sl.first != sl.middle));
}

namespace {

void put_run(std::string& out, char what, int64_t n) {
    if (n == 1) {
        out += what;
    } else if (n > 1) {
        out += what;
        out += "*" + std::to_string(n);
    }
}

/// Reads the "*n" count at s[at] (at points at '*'); moves `at` past it.
int64_t read_count(const std::string& s, std::size_t& at) {
    if (at >= s.size() || s[at] != '*') {
        throw ConfigError("--pipeline-layout: expected '*n' after '(...)' in '" + s + "'");
    }
    const std::size_t begin = ++at;
    int64_t n = 0;
    while (at < s.size() && std::isdigit(static_cast<unsigned char>(s[at])) != 0 && n < 100000) {
        n = n * 10 + (s[at++] - '0');
    }
    if (at == begin) {
        throw ConfigError("--pipeline-layout: '*' without a count in '" + s + "'");
    }
    return n;
}

/// Megatron's unrolling (parse_str_to_list): commas dropped, then every "(X)*n", then every
/// "x*n" written out; no nesting.
std::string unroll(std::string s) {
    s.erase(std::remove(s.begin(), s.end(), ','), s.end());
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        if (s[i] != '(') {
            out += s[i++];
            continue;
        }
        const std::size_t close = s.find(')', i);
        if (close == std::string::npos) {
            throw ConfigError("--pipeline-layout: '(' without ')' in '" + s + "'");
        }
        std::size_t at = close + 1;
        const int64_t n = read_count(s, at);
        for (int64_t k = 0; k < n; ++k) {
            out.append(s, i + 1, close - i - 1);
        }
        i = at;
    }
    std::string flat;
    for (std::size_t i = 0; i < out.size();) {
        const char ch = out[i++];
        const int64_t n = i < out.size() && out[i] == '*' ? read_count(out, i) : 1;
        flat.append(static_cast<std::size_t>(n), ch);
    }
    return flat;
}

}  // namespace

std::string to_layout(int64_t layers, const Plan& p) {
    std::string out;
    const int64_t v = std::max<int64_t>(1, p.vpp);
    for (int64_t c = 0; c < v; ++c) {
        for (int64_t s = 0; s < p.pp; ++s) {
            if (!out.empty()) {
                out += '|';
            }
            if (c == 0 && s == 0) {
                out += 'E';
            }
            put_run(out, 't', chunk_layers(layers, p, s, c));
            if (c == v - 1 && s == p.pp - 1) {
                out += 'L';
            }
        }
    }
    return out;
}

void apply_layout(const std::string& layout, int64_t layers, Plan& p) {
    const std::string flat = unroll(layout);
    std::vector<std::string> stages(1);
    for (char ch : flat) {
        if (ch == '|') {
            stages.emplace_back();
        } else if (ch == 'E' || ch == 'L' || ch == 't') {
            stages.back() += ch;
        } else {
            throw ConfigError(std::string("--pipeline-layout: '") + ch +
                              "' is not a layer cleave knows (E embedding, t transformer layer, "
                              "L loss; MTP 'm' is not modelled)");
        }
    }
    const auto n = static_cast<int64_t>(stages.size());
    if (p.pp < 1 || n % p.pp != 0) {
        throw ConfigError("--pipeline-layout: " + std::to_string(n) +
                          " virtual stages are not a multiple of pp=" + std::to_string(p.pp));
    }
    if (stages.front().find('E') != 0 || stages.back().empty() || stages.back().back() != 'L' ||
        std::count(flat.begin(), flat.end(), 'E') != 1 ||
        std::count(flat.begin(), flat.end(), 'L') != 1) {
        throw ConfigError("--pipeline-layout: needs one E at the start of the first virtual stage "
                          "and one L at the end of the last");
    }
    std::vector<int64_t> per_stage(static_cast<std::size_t>(p.pp), 0);
    for (int64_t i = 0; i < n; ++i) {
        const std::string& st = stages[static_cast<std::size_t>(i)];
        per_stage[static_cast<std::size_t>(i % p.pp)] += std::count(st.begin(), st.end(), 't');
    }
    int64_t total = 0;
    for (int64_t k : per_stage) {
        total += k;
    }
    if (total != layers) {
        throw ConfigError("--pipeline-layout: holds " + std::to_string(total) +
                          " transformer layers, the model has " + std::to_string(layers));
    }
    for (std::size_t s = 2; s + 1 < per_stage.size(); ++s) {
        if (per_stage[s] != per_stage[1]) {
            throw ConfigError("--pipeline-layout: middle stages hold " +
                              std::to_string(per_stage[1]) + " and " +
                              std::to_string(per_stage[s]) +
                              " layers; cleave prices layouts whose middle stages are equal");
        }
    }
    p.vpp = n / p.pp;
    p.first_layers = per_stage.front();
    p.last_layers = per_stage.back();
    if (!uneven_stages(layers, p)) {
        p.first_layers = 0;
        p.last_layers = 0;
    }
}

}  // namespace cleave

namespace cleave {

namespace {

constexpr std::pair<const char*, uint16_t> module_names[] = {
    {"core_attn", recompute_module::core_attn},
    {"mlp", recompute_module::mlp},
    {"layernorm", recompute_module::layernorm},
    {"moe", recompute_module::moe},
    {"moe_act", recompute_module::moe_act},
    {"mla_up_proj", recompute_module::mla_up_proj},
    {"shared_experts", recompute_module::shared_experts}};

}  // namespace

uint16_t parse_recompute_modules(const std::string& list) {
    uint16_t mask = 0;
    std::string name;
    const auto flush = [&] {
        if (name.empty()) {
            return;
        }
        bool known = false;
        for (const auto& [n, bit] : module_names) {
            if (name == n) {
                mask = static_cast<uint16_t>(mask | bit);
                known = true;
            }
        }
        if (!known) {
            throw ConfigError("--recompute-modules: unknown module '" + name +
                              "' (core_attn, mlp, layernorm, moe, moe_act, mla_up_proj, "
                              "shared_experts)");
        }
        name.clear();
    };
    for (const char ch : list) {
        if (ch == ',' || ch == ' ' || ch == '[' || ch == ']' || ch == '"' || ch == '\'') {
            flush();
        } else {
            name += ch;
        }
    }
    flush();
    return mask;
}

std::string recompute_modules_string(uint16_t mask) {
    std::string out;
    for (const auto& [n, bit] : module_names) {
        if ((mask & bit) != 0) {
            out += (out.empty() ? "" : " ") + std::string(n);
        }
    }
    return out;
}

}  // namespace cleave
