#include "published/published.hpp"

#include "core/errors.hpp"
#include "core/load.hpp"
#include "core/stack.hpp"
#include "costmodel/collectives.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/estimate.hpp"
#include "costmodel/flops.hpp"
#include "costmodel/precision.hpp"
#include "costmodel/splits.hpp"
#include "published/csv_row.hpp"
#include "published/sibling_layout.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

namespace cleave {

namespace {

using Row = std::map<std::string, std::string>;

// RFC 4180: fields separated by commas, quoted fields may hold commas, "" is a quote.
std::vector<std::vector<std::string>> split_csv(std::string_view text) {
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> row;
    std::string field;
    bool quoted = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char ch = text[i];
        if (quoted) {
            if (ch == '"' && i + 1 < text.size() && text[i + 1] == '"') {
                field += '"';
                ++i;
            } else if (ch == '"') {
                quoted = false;
            } else {
                field += ch;
            }
        } else if (ch == '"') {
            quoted = true;
        } else if (ch == ',') {
            row.push_back(std::move(field));
            field.clear();
        } else if (ch == '\n' || ch == '\r') {
            if (ch == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
                ++i;
            }
            row.push_back(std::move(field));
            field.clear();
            if (!(row.size() == 1 && row[0].empty())) {
                rows.push_back(std::move(row));
            }
            row.clear();
        } else {
            field += ch;
        }
    }
    if (!field.empty() || !row.empty()) {
        row.push_back(std::move(field));
        rows.push_back(std::move(row));
    }
    return rows;
}

using Reader = detail::CsvRow;

bool contains(const std::string& s, const char* what) {
    return s.find(what) != std::string::npos;
}

// The shipped profile of the row's hardware, or "" with the reason.
std::string profile_for(const Reader& r, std::string& reason) {
    const std::string& gpu = r.str("gpu_type");
    const int64_t mem = r.count("gpu_memory_gb");
    if (contains(gpu, "A100")) {
        if (contains(gpu, "PCIe")) {
            return "a100-pcie-1gbe";
        }
        if (mem == 80) {
            return "dgx-a100-80g";
        }
        if (mem == 40 || contains(gpu, "2020")) {
            return "dgx-a100-40g";  // 2020 DGX A100s carried the 40 GB part (row notes)
        }
        // Named loosely ("A100", "A100-class") with no memory: the 80 GB SXM part, said so.
        reason = "GPU '" + gpu + "' with no memory stated: dgx-a100-80g assumed; ";
        return "dgx-a100-80g";
    }
    if (contains(gpu, "GB300")) {
        return "gb300-nvl72";
    }
    if (contains(gpu, "GB200")) {
        return "gb200-nvl72";
    }
    if (contains(gpu, "V100")) {
        if (contains(gpu, "DGX-2") || contains(gpu, "SXM3") || r.count("gpus_per_node") == 16) {
            return "dgx2-v100";  // 16 x V100-SXM3 on NVSwitch
        }
        return "dgx1-v100";
    }
    if (contains(gpu, "H800")) {
        return "h800";
    }
    if (contains(gpu, "H100") && (mem == 96 || contains(gpu, "96GB") || contains(gpu, "HBM2e"))) {
        return "h100-96gb";  // Grand Teton's H100 96 GB HBM2e at 500 W (torchtitan's benchmarks)
    }
    if (contains(gpu, "H100")) {
        return "dgx-h100";
    }
    if (contains(gpu, "H200")) {
        return "dgx-h200";
    }
    if (contains(gpu, "B200")) {
        return "dgx-b200";
    }
    if (contains(gpu, "MI300X")) {
        return "mi300x";
    }
    reason = "no shipped profile for GPU '" + gpu + "'";
    return "";
}

}  // namespace

ModelSpec detail::columns_model(const Reader& r) {
    ModelSpec m;  // GPT-style: learned positions, GeLU, LayerNorm, tied embeddings, biases
    m.name = r.str("model");
    m.layers = r.count("num_layers");
    m.hidden = r.count("hidden_size");
    m.heads = r.count("num_attention_heads");
    m.kv_heads = r.count("num_kv_heads", m.heads);
    m.ffn_hidden = r.count("ffn_hidden_size", 4 * m.hidden);
    m.vocab = r.count("vocab_size");
    m.seq_len = r.count("seq_length");
    const std::string& name = m.name;
    for (const char* family : {"Llama", "LLAMA", "Qwen", "Mixtral", "Mistral", "GPT-OSS"}) {
        if (contains(name, family)) {
            // Llama-family architecture (README: ffn_hidden_size is one SwiGLU branch).
            m.mlp = MlpKind::swiglu;
            m.norm = NormKind::rmsnorm;
            m.positions = PositionKind::rope;
            m.tied_embeddings = false;
            m.linear_bias = false;
            break;
        }
    }
    if (contains(name, "Nemotron-4")) {
        // Nemotron-4 (the DGXC recipes nemotron/nemotron4-{15b,340b}-synth.yaml @35a9aec:
        // activation squared-relu, normalization layernorm1p, bias false, rope,
        // share_embeddings_and_output_weights false): as the HF nemotron loader reads it.
        m.mlp = MlpKind::gelu;
        m.squared_relu = true;
        m.norm = NormKind::layernorm;
        m.positions = PositionKind::rope;
        m.tied_embeddings = false;
        m.linear_bias = false;
    }
    if (contains(r.str("source_locator"), "grok1_314b.yaml")) {
        // Grok-1 as NVIDIA's proxy recipe builds it (NVIDIA/dgxc-benchmarking grok1/grok1_314b.yaml
        // @35a9aec): normalization rmsnorm, position_embedding_type rope, bias false,
        // share_embeddings_and_output_weights false; the CSV has no vocab_size, the recipe's
        // tokenizer is meta-llama/Meta-Llama-3-70B's, 128,256 entries (the Llama 3 vocabulary,
        // examples/hf/llama-3-8b.config.json).
        m.norm = NormKind::rmsnorm;
        m.positions = PositionKind::rope;
        m.tied_embeddings = false;
        m.linear_bias = false;
        if (m.vocab <= 0) {
            m.vocab = 128256;
        }
    }
    if (contains(r.str("notes"), "GeGLU")) {
        // A gated GELU MLP (three matrices, ffn_hidden_size one branch, as the README says of
        // gated MLPs): priced as SwiGLU, the same shapes.
        m.mlp = MlpKind::swiglu;
    }
    if (r.count("num_experts") > 0) {
        m.moe.experts = r.count("num_experts");
        m.moe.top_k = r.count("moe_topk", 1);
        m.moe.expert_ffn_hidden = m.ffn_hidden;
    }
    return m;
}

namespace {

// The row's model from its shipped config, its columns checked against the config: a row that
// disagrees names itself and the column.
ModelSpec model_from_config(const Reader& r, const char* file, std::string& notes) {
    const std::filesystem::path path = shipped_model_config_path(file);
    if (path.empty()) {
        r.fail("model",
               std::string("the shipped config ") + file +
                   " is not found (examples/hf, or the directory in CLEAVE_MODELS)");
    }
    ModelSpec m = load_model(path);
    const std::pair<const char*, int64_t> agree[] = {{"num_layers", m.layers},
                                                     {"hidden_size", m.hidden},
                                                     {"num_experts", m.moe.experts},
                                                     {"moe_topk", m.moe.top_k}};
    for (const auto& [column, value] : agree) {
        if (r.has(column) && r.count(column) != value) {
            r.fail(column,
                   "row " + r.str("row_id") + " says " + r.str(column) + " but " + file + " has " +
                       std::to_string(value));
        }
    }
    m.name = r.str("model");
    m.seq_len = r.count("seq_length", m.seq_len);
    notes += std::string("model from examples/hf/") + file + "; ";
    return m;
}

JobSpec job_of(const Reader& r, std::string& notes) {
    JobSpec j;
    j.gpus = r.count("num_gpus");
    j.global_batch = r.count("global_batch_size");
    j.seq_len = r.count("seq_length");
    const std::string& prec = r.str("precision");
    j.compute = contains(prec, "fp16") ? Dtype::fp16 : Dtype::bf16;
    j.weights = j.compute;
    // FP8-CS -> fp8 tensorwise, FP8-MX -> mxfp8, NVFP4 -> nvfp4 (costmodel/precision.hpp);
    // linear layers quantised, weights kept bf16 (Transformer Engine).
    if (const auto pc = precision_of_label(prec); pc && is_quantised(pc->compute)) {
        j.compute = pc->compute;
        j.fp8_recipe = pc->fp8_recipe;
        notes += "precision '" + prec + "' priced as " + to_string(j.compute) +
                 (j.compute == Dtype::fp8 ? std::string(" ") + to_string(j.fp8_recipe) : "") + "; ";
    }
    const std::string& fw = r.str("framework");
    if (contains(fw, "Megatron-Bridge") &&
        (j.compute == Dtype::mxfp8 ||
         (j.compute == Dtype::fp8 && j.fp8_recipe != Fp8Recipe::blockwise))) {
        // Megatron-Bridge's FP8 current / delayed and MXFP8 precision recipes keep FP8 primary
        // weights (training/mixed_precision.py bf16_with_fp8_current_scaling_mixed,
        // bf16_with_mxfp8_mixed: fp8_param_gather = True @ v0.2.0 and 067f987df).
        j.weights = Dtype::fp8;
        notes += "FP8 primary weights (the Bridge precision recipe's fp8_param_gather=True); ";
    }
    if (contains(r.str("source_locator"), "grok1_314b.yaml")) {
        // The row's recipe (NVIDIA/dgxc-benchmarking grok1/grok1_314b.yaml @35a9aec):
        // moe_pad_expert_input_to_capacity true with moe_expert_capacity_factor 1.0 (every
        // expert padded to its capacity: static shapes).
        j.moe_capacity = 1.0;
        j.moe_pad = true;
        notes += "experts padded to capacity 1.0 (the recipe's moe_pad_expert_input_to_capacity); ";
    }
    if (contains(r.str("source_locator"), "nemotron4-340b-synth.yaml")) {
        // The row's recipe (NVIDIA/dgxc-benchmarking nemotron/nemotron4-340b-synth.yaml
        // @8f5cbb37) runs NeMo's distributed_fused_adam with dtype: bf16, Apex
        // DistributedFusedAdam's optimizer-state dtype: a bf16 parameter shard (store_params)
        // and both moments in bf16. (nemotron4-15b-synth.yaml runs mcore_distributed_optim,
        // fp32 states; the other DGXC recipes are not read here.)
        j.master_dtype = Dtype::bf16;
        j.optimizer_states = Dtype::bf16;
        j.optimizer_states_sq = Dtype::bf16;
        notes += "optimizer states bf16 (the recipe's distributed_fused_adam dtype: bf16); ";
    }
    if (contains(fw, "2020") || contains(fw, "2021")) {
        // Megatron before the 2022 distributed optimizer reduced grads in the model dtype.
        j.grads = j.compute;
        notes += "16-bit grads (Megatron " + fw.substr(fw.find('(') + 1, 4) + "); ";
    }
    return j;
}

/// The list in a row's "that preset sets recompute_modules=[...]" note, brackets included, or "".
std::string nearest_preset_recompute(const std::string& row_notes) {
    const std::string rec = "that preset sets recompute_modules=[";
    const auto at = row_notes.find(rec);
    const auto end = at == std::string::npos ? at : row_notes.find(']', at);
    if (end == std::string::npos) {
        return "";
    }
    const auto from = at + rec.size() - 1;
    return row_notes.substr(from, end - from + 1);
}

Plan plan_of(const Reader& r, bool legacy, std::string& notes) {
    Plan p;
    p.tp = r.count("tp", 1);
    p.pp = r.count("pp", 1);
    p.dp = r.count("dp", 1);
    p.cp = r.count("cp", 1);
    p.ep = r.count("ep", 1);
    p.vpp = r.count("vpp", 1);
    p.mbs = r.count("micro_batch_size", 1);
    p.schedule = p.vpp > 1 ? Schedule::interleaved : Schedule::one_f_one_b;
    p.sp = r.str("sequence_parallel") == "yes";
    const std::string& rc = r.str("activation_recompute");
    if (const auto at = rc.find("recompute_modules=["); at != std::string::npos) {
        // "selective (preset recompute_modules=['layernorm', 'moe_act'])": the list the row's
        // recipe gives (Megatron's names).
        const auto from = at + std::string("recompute_modules=").size();
        p.recompute_modules = parse_recompute_modules(rc.substr(from, rc.find(']', from) - from + 1));
    }
    if (rc.rfind("full", 0) == 0) {
        p.recompute = Recompute::full;
    } else if (rc.rfind("selective", 0) == 0) {
        p.recompute = Recompute::selective;
    } else if (rc.empty() && legacy) {
        p.recompute = Recompute::full;
        notes += "recompute not stated: full assumed (the source's TFLOP/s match SC21 eq. 3); ";
    } else if (const std::string preset = nearest_preset_recompute(r.str("notes"));
               rc.empty() && !preset.empty()) {
        // No recompute in the table and no preset matching the row: the notes name the nearest
        // preset's (same model, GPU and precision at the release), the perf script's memory
        // setting for this model on this GPU, taken with it (rows 1024, 1027).
        p.recompute_modules = parse_recompute_modules(preset);
        p.recompute = Recompute::selective;
        notes += "recompute not stated: the nearest preset's recompute_modules=" + preset + "; ";
    } else if (rc.empty()) {
        notes += "recompute not stated: none (Megatron-Core's default); ";
    }
    // A cell that says the source does not state the sharding ("not stated", "n/a", "the table
    // has no FSDP column") names FSDP without meaning it: read as not stated (the framework's
    // default below), and said so.
    const std::string& cell = r.str("dp_sharding");
    std::string low = cell;
    std::transform(low.begin(), low.end(), low.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const bool unstated = low.rfind("n/a", 0) == 0 || low.rfind("unknown", 0) == 0 ||
                          contains(low, "not stated") || contains(low, "no fsdp column");
    if (unstated) {
        notes += "data-parallel sharding not stated ('" + cell + "'): the framework's default; ";
    }
    const std::string sh = unstated ? std::string() : cell;
    // "none per table (FSDP=0); distributed optimizer ..." is ZeRO-1, not FSDP.
    const bool no_fsdp = sh.rfind("none", 0) == 0 || contains(sh, "FSDP=0");
    // Juniper's MLPerf LoRA rows state the sharding only in their notes ("HF accelerate +
    // DeepSpeed ZeRO-3 (params/grads/optimizer sharded over all GPUs)").
    const bool notes_zero3 = sh.empty() && contains(r.str("notes"), "DeepSpeed ZeRO-3");
    if (contains(sh, "ZeRO-3") || (contains(sh, "FSDP") && !no_fsdp) || notes_zero3) {
        p.zero = 3;
        notes += notes_zero3 ? "ZeRO-3 (the row's notes: DeepSpeed ZeRO-3); " : "";
    } else if (contains(sh, "ZeRO-2")) {
        p.zero = 2;
    } else if (contains(sh, "ZeRO-1") || contains(sh, "distributed optimizer")) {
        p.zero = 1;
    } else if (contains(r.str("framework"), "Megatron-Bridge")) {
        // "DDP per table (FSDP=0)": Megatron's DDP under the distributed optimizer, which every
        // Megatron-Bridge recipe sets (src/megatron/bridge/recipes/common.py and perf_recipes/*
        // use_distributed_optimizer=True @067f987df).
        p.zero = 1;
        notes += "distributed optimizer (Megatron-Bridge recipes' use_distributed_optimizer=True); ";
    }
    if (!r.has("vpp") && p.pp > 1) {
        notes += "interleaving not stated: plain 1F1B; ";
    }
    return p;
}

/// Rows state pp and vpp but not the layer map. Where the layers do not split evenly, Megatron's
/// account-for-embedding-and-loss split ((L + 2) / pp per stage, one less on the first and
/// last: Megatron-Bridge's Llama 3.1 405B and Qwen3 recipes) when it exists, else the split that
/// balances the stages' FLOPs (costmodel/splits.hpp); the notes say which.
void layer_map_of(const ModelSpec& m, const JobSpec& job, Plan& p, std::string& notes) {
    if (p.pp <= 1 || (keeps(Rule::stage_split, m, job, p) && keeps(Rule::vpp_chunks, m, job, p))) {
        return;
    }
    std::vector<Split> splits = balanced_splits(m, job, p.pp, p.vpp, split_weights(m, job));
    if (splits.empty()) {  // no map Megatron's flags express: one its layout notation does
        splits = balanced_splits(m, job, p.pp, p.vpp, split_weights(m, job), false);
    }
    if (splits.empty()) {
        return;  // check_plan names the rule
    }
    const int64_t share = (m.layers + 2) / p.pp;
    const Split account{share - 1, share - 1};
    const bool has_account = (m.layers + 2) % p.pp == 0 &&
                             std::find(splits.begin(), splits.end(), account) != splits.end();
    const Split s = has_account ? account : splits.front();
    p.first_layers = s.first;
    p.last_layers = s.last;
    notes += std::string("layer map not published: ") +
             (has_account ? "Megatron's account-for-embedding-and-loss split"
                          : "the FLOP-balanced split") +
             " (first " + std::to_string(stage_layers(m.layers, p).first) + ", middle " +
             std::to_string(stage_layers(m.layers, p).middle) + ", last " +
             std::to_string(stage_layers(m.layers, p).last) + " layers); ";
}

/// The leading integer at `at` in `s`, or 0.
int64_t integer_at(const std::string& s, size_t at) {
    int64_t v = 0;
    while (at < s.size() && s[at] == ' ') {
        ++at;
    }
    std::from_chars(s.data() + std::min(at, s.size()), s.data() + s.size(), v);
    return v;
}

/// Whether Megatron-Bridge's performance launcher ran the row with
/// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: scripts/performance/perf_plugins.py
/// _set_model_specific_environment_variables at v0.2.0 (NeMo 25.11) sets it for Llama 3.1 405B
/// pretraining on GB200 in fp8_cs / fp8_mx; v0.3.0 (26.02) adds DeepSeek-V3 on H100; v0.4.0
/// (26.04) adds GB300 to the 405B rule and GB200 to DeepSeek-V3's. Every other recipe runs the
/// default allocator.
bool bridge_sets_expandable_segments(const Reader& r, const PublishedCase& c) {
    if (r.str("source_key").rfind("MBRIDGE", 0) != 0 || c.release.empty()) {
        return false;
    }
    const std::string& model = r.str("model");
    // The row's profile and priced precision, as case_of() read them: FP8-CS and MXFP8, not NVFP4.
    const bool fp8 = c.job.compute == Dtype::fp8 || c.job.compute == Dtype::mxfp8;
    const bool gb200 = c.profile == "gb200-nvl72";
    const bool gb300 = c.profile == "gb300-nvl72";
    if (contains(model, "405B")) {
        return fp8 && (gb200 || (gb300 && c.release >= "26.04"));  // YY.MM compare as text
    }
    if (contains(model, "DeepSeek-V3")) {
        return (c.profile == "dgx-h100" && c.release >= "26.02") || (gb200 && c.release >= "26.04");
    }
    return false;
}

/// CPU activation offloading from the row's notes: a matching preset's
/// {"cpu_offloading_num_layers": N}, or the nearest preset's "CPU activation offloading of N
/// layers" where it differs from the row in the global batch alone (per-GPU memory and time per
/// micro-batch do not depend on it at PP 1).
void offload_of(const std::string& row_notes, Plan& p, std::string& notes) {
    const std::string key = "\"cpu_offloading_num_layers\":";
    const std::string prose = "CPU activation offloading of ";
    if (const auto at = row_notes.find(key);
        at != std::string::npos && contains(row_notes, "Matches preset")) {
        p.offload_layers = integer_at(row_notes, at + key.size());
        notes += "CPU activation offloading of " + std::to_string(p.offload_layers) +
                 " layers (the matching preset); ";
    } else if (const auto at2 = row_notes.find(prose); at2 != std::string::npos && p.pp == 1 &&
               contains(row_notes, "has GBS") && !contains(row_notes, "table MBS")) {
        p.offload_layers = integer_at(row_notes, at2 + prose.size());
        notes += "CPU activation offloading of " + std::to_string(p.offload_layers) +
                 " layers (the nearest preset, which differs in the global batch only); ";
    }
}

/// Where the table's own cells disagree (its GA is not GBS / (MBS x dp)) and the nearest
/// preset differs from the row in the micro-batch alone ("has PP4, EP8 but MBS 1, table MBS 4"),
/// the preset's MBS: the one configuration of the layout the recipe files hold.
void preset_microbatch_of(const Reader& r, Plan& p, std::string& notes) {
    const std::string& row_notes = r.str("notes");
    const int64_t ga = r.count("grad_accum_steps", 0);
    const int64_t gbs = r.count("global_batch_size", 0);
    const std::string but = "but MBS ";
    if (const auto at = row_notes.find(but);
        at != std::string::npos && ga > 0 && p.mbs * p.dp * ga != gbs) {
        const int64_t mbs = integer_at(row_notes, at + but.size());
        const auto after = at + but.size() + std::to_string(mbs).size();
        if (mbs > 0 && gbs % (mbs * p.dp) == 0 &&
            row_notes.compare(after, 11, ", table MBS") == 0) {
            notes += "micro-batch " + std::to_string(mbs) + " (the table's MBS " +
                     std::to_string(p.mbs) + " and GA " + std::to_string(ga) +
                     " disagree with its GBS / dp; the nearest preset, which differs in MBS alone); ";
            p.mbs = mbs;
        }
    }
}

// Rows with only TFLOP/s (or MFU x the source's peak): t = F_convention / (TFLOP/s x gpus).
void convert_throughput(const Reader& r, PublishedCase& c, std::string& notes) {
    double tflops = r.num("tflops_per_gpu");
    const char* from = "tflops_per_gpu";
    if (tflops <= 0.0 && r.num("mfu_pct") > 0.0 && r.num("peak_tflops_per_gpu") > 0.0) {
        tflops = r.num("mfu_pct") / 100.0 * r.num("peak_tflops_per_gpu");
        from = "mfu_pct x peak_tflops_per_gpu";
    }
    const double f = convention_flops(r.str("tflops_definition"), c.model, c.job);
    if (tflops <= 0.0 || f <= 0.0) {
        return;
    }
    c.published_s = f / (tflops * 1e12 * static_cast<double>(c.job.gpus));
    c.derived = true;
    notes += std::string("time from ") + from + " and the source's FLOP convention; ";
}

/// The NeMo container release a framework column names ("NeMo 26.02 container" -> "26.02"), or
/// "" when it names none.
std::string release_of_framework(const std::string& fw) {
    for (std::size_t i = fw.find("NeMo"); i != std::string::npos; i = fw.find("NeMo", i + 1)) {
        for (std::size_t k = i + 4; k + 5 <= fw.size() && k < i + 16; ++k) {
            const std::string cand = fw.substr(k, 5);
            if (valid_release(cand)) {
                return cand;
            }
        }
    }
    return "";
}

std::string lower_of(const std::string& s) {
    std::string low = s;
    std::transform(low.begin(), low.end(), low.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return low;
}

// The integer after `key` in `text` ("rank 16" -> 16), or 0.
int64_t lora_number_after(const std::string& text, const char* key) {
    const std::size_t at = text.find(key);
    if (at == std::string::npos) {
        return 0;
    }
    return std::atoll(text.c_str() + at + std::strlen(key));
}

/// A row whose `task` names LoRA is a LoRA job: its rank from "rank N" / "r=N" in the task or
/// model cell (else Megatron-Bridge's dim 32), alpha from "alpha N" / "alpha=N" (else 32, both
/// Bridge's default and MLPerf's: the Llama 2 70B LoRA reference trains lora_r 16, lora_alpha 32
/// on qkv_proj and o_proj, mlcommons/training llama2_70b_lora), the attention's linears where
/// the task says "attention" (linear_qkv, linear_proj), else Bridge's four.
/// CUDA graphs as a row's notes state them (costmodel/launches.hpp), in the forms the CSVs use:
/// MLPerf's "CUDA graphs (layer/mcore)" (Megatron-Core's per-layer capture), "CUDA graphs
/// impl=local scope=full_iteration" and "impl=transformer_engine scope=[moe_router,
/// moe_preprocess]" (2025), the presets' JSON "cuda_graph_impl": "...", "cuda_graph_scope": [...]
/// (2026h1); "none" or no mention: eager.
void cuda_graphs_of(const std::string& row_notes, JobSpec& job, std::string& notes) {
    const std::string t = lower_of(row_notes);
    std::size_t at = t.find("cuda graphs (layer/mcore)");
    if (at != std::string::npos) {
        job.cuda_graph_impl = CudaGraphImpl::local;
        job.cuda_graph_scope = cuda_graph_scope::layer;
        notes += "CUDA graphs of each layer (the notes' layer/mcore); ";
        return;
    }
    at = t.find("cuda graphs impl=");
    if (at == std::string::npos) {
        at = t.find("cuda_graph_impl");
    }
    if (at == std::string::npos) {
        return;
    }
    const std::string head = t.substr(at, 48);
    const CudaGraphImpl impl = contains(head, "transformer_engine") ? CudaGraphImpl::transformer_engine
                               : contains(head, "local")             ? CudaGraphImpl::local
                                                                     : CudaGraphImpl::none;
    if (impl == CudaGraphImpl::none) {
        return;
    }
    // The scope: the list after "scope" up to its closing bracket, or the one word.
    uint8_t scope = cuda_graph_scope::layer;
    const std::size_t sc = t.find("scope", at);
    if (sc != std::string::npos && sc < at + 64) {
        std::size_t from = t.find_first_of("=:", sc);
        from = from == std::string::npos ? sc : from + 1;
        while (from < t.size() && (t[from] == ' ' || t[from] == '"')) {
            ++from;
        }
        const bool list = from < t.size() && t[from] == '[';
        const std::size_t to = list ? t.find(']', from) : t.find_first_of(";,)} ", from);
        const std::string body = t.substr(from, (to == std::string::npos ? t.size() : to) - from);
        uint8_t bits = 0;
        std::string word;
        for (const char ch : body + " ") {
            if ((ch >= 'a' && ch <= 'z') || ch == '_') {
                word += ch;
                continue;
            }
            if (!word.empty()) {
                bits = static_cast<uint8_t>(bits | cuda_graph_scope_of(word).value_or(0));  // others skipped
                word.clear();
            }
        }
        scope = bits;
    }
    if (scope == 0) {
        return;  // an empty scope captures nothing
    }
    job.cuda_graph_impl = impl;
    job.cuda_graph_scope = scope;
    notes += std::string("CUDA graphs ") + to_string(impl) + " over " + cuda_graph_scope_string(scope) +
             " (the notes); ";
}

void lora_of(const Reader& r, JobSpec& job, std::string& notes) {
    const std::string task = lower_of(r.str("task"));
    if (!contains(task, "lora") && !contains(task, "dora")) {
        return;
    }
    const std::string text = task + " " + lower_of(r.str("model"));
    job.peft = contains(task, "dora") ? Peft::dora : Peft::lora;
    int64_t dim = lora_number_after(text, "rank ");
    dim = dim > 0 ? dim : lora_number_after(text, "r=");
    job.lora_dim = dim > 0 ? dim : 32;
    int64_t alpha = lora_number_after(text, "alpha ");
    alpha = alpha > 0 ? alpha : lora_number_after(text, "alpha=");
    job.lora_alpha = alpha > 0 ? static_cast<double>(alpha) : 32.0;
    const uint8_t attention = lora_target::linear_qkv | lora_target::linear_proj;
    job.lora_targets = contains(text, "attention") ? attention : lora_target::all;
    char alpha_s[32];
    std::snprintf(alpha_s, sizeof alpha_s, "%g", job.lora_alpha);
    if (is_quantised(job.compute) && !is_quantised(job.weights)) {
        // The frozen base stored in FP8: NVIDIA's MLPerf LoRA runs Llama 2 70B on one H200 (tp 1,
        // cp 2, rows 5116-5118, 5121), where its 16-bit weights alone (129 GiB) would not fit.
        job.weights = Dtype::fp8;
        notes += "frozen base in FP8 (a 16-bit 70B base cannot fit the tp 1 H200 rows); ";
    }
    notes += "LoRA dim " + std::to_string(job.lora_dim) + ", alpha " + alpha_s + " on " +
             lora_targets_string(job.lora_targets) +
             " (the task cell" + (dim > 0 ? "" : "; dim Bridge's default") +
             "), base frozen; ";
}

/// A published MLPerf Training row whose framework cell names no stack cleave ships ("PyTorch
/// NVIDIA Release 24.04", "NVIDIA NEMO", "CUDA 12.3") runs megatron-core: every NVIDIA-GPU
/// submission runs NVIDIA's NeMo / Megatron-Core implementation in the NGC container the cell
/// names (shared/validation/README.md; the rows' configs are config_*.sh of that implementation).
/// A cell naming DeepSpeed is stack_for_framework's.
constexpr const char* mlperf_default_stack = "megatron-core";

PublishedCase case_of(const Reader& r) {
    PublishedCase c;
    c.row_id = r.count("row_id");
    c.source_key = r.str("source_key");
    c.model_name = r.str("model");
    c.confidence = r.str("confidence");
    std::string notes;
    const char* config = shipped_model_config(r.str("model"));
    c.model = config != nullptr ? model_from_config(r, config, notes) : detail::columns_model(r);
    c.job = job_of(r, notes);
    lora_of(r, c.job, notes);
    cuda_graphs_of(r.str("notes"), c.job, notes);
    // Megatron-Bridge trains DeepSeek-V3's MTP module unless the run switched it off; the rows'
    // notes say which ("with MTP" / "without MTP").
    if (c.model.mtp_layers > 0) {
        const std::string& row_notes = r.str("notes");
        c.job.mtp = contains(row_notes, "with MTP") && !contains(row_notes, "without MTP");
        notes += c.job.mtp ? "MTP trained (row notes); " : "MTP not trained; ";
        // Megatron-Bridge's repeated MTP layer (nemotron_3_super.py @v0.4.0: mtp_num_layers = 2
        // over the config's one module, mtp_use_repeated_layer): the module runs that often.
        const std::string key = "mtp_num_layers=";
        if (const size_t at = row_notes.find(key); c.job.mtp && at != std::string::npos) {
            const int64_t n = std::atoll(row_notes.c_str() + at + key.size());
            if (n > c.model.mtp_layers && n % c.model.mtp_layers == 0) {
                c.job.mtp_repeats = n / c.model.mtp_layers;
                notes += "MTP module run " + std::to_string(c.job.mtp_repeats) +
                         " times (mtp_num_layers=" + std::to_string(n) + ", one shared module); ";
            }
        }
    }
    const bool mlperf = c.source_key.rfind("MLPERF", 0) == 0;
    std::string stack = stack_for_framework(r.str("framework"));
    if (stack.empty() && mlperf) {
        stack = mlperf_default_stack;
    }
    c.plan = plan_of(r, stack == "megatron-2021" || stack == "deepspeed-zero3-2021", notes);
    if (c.model.moe.enabled() && c.source_key.rfind("MBRIDGE", 0) == 0) {
        // The CSV has no etp column; its notes give ETP=1 for every Megatron-Bridge MoE row
        // (the recipes' expert_tensor_parallel_size = 1).
        c.plan.etp = 1;
        notes += "etp=1 (the notes' ETP=1 for Megatron-Bridge MoE rows; no etp column); ";
        // Combined-1F1B all-to-all overlap only where the row is the recipe preset that sets it
        // (notes "Matches preset ...: ... moe_a2a_overlap=True"); a non-matching preset's
        // setting says nothing about the row.
        const std::string& row_notes = r.str("notes");
        // Both forms the CSVs use: "moe_a2a_overlap=True" (2025 notes) and the preset's JSON
        // settings, "\"moe_a2a_overlap\": true" (2026h1 notes).
        c.moe_a2a_overlap = contains(row_notes, "Matches preset") &&
                            (contains(row_notes, "moe_a2a_overlap=True") ||
                             contains(row_notes, "\"moe_a2a_overlap\": true"));
        if (c.moe_a2a_overlap) {
            notes += "EP all-to-all overlapped (the matching preset's moe_a2a_overlap=True); ";
        }
        // The flex dispatcher (moe_flex_dispatcher_backend deepep or hybridep, both forms of the
        // notes): a token crosses the network once per remote domain and fans out over NVLink
        // there (DeepEP; HybridEP, Megatron-Core's hybrid_ep backend, is priced the same way).
        c.moe_flex_dispatcher =
            contains(row_notes, "Matches preset") &&
            (contains(row_notes, "\"moe_flex_dispatcher_backend\": \"deepep\"") ||
             contains(row_notes, "\"moe_flex_dispatcher_backend\": \"hybridep\"") ||
             contains(row_notes, "flex_dispatcher_backend=hybridep") ||
             contains(row_notes, "flex_dispatcher_backend=deepep"));
        if (c.moe_flex_dispatcher) {
            notes += "flex dispatcher (the matching preset's moe_flex_dispatcher_backend), priced "
                     "as DeepEP; ";
        }
    }
    if (contains(r.str("notes"), "Muon optimizer was used") &&
        contains(r.str("framework"), "Megatron-Bridge")) {
        // Megatron-Bridge's Kimi K2 recipe (recipes/kimi/kimi_k2.py @0fbfe7d3e9, v0.4.0, and the
        // perf script's optimizer_type "muon" default): distributed_muon_with_cosine_annealing,
        // the layer-wise distributed Muon ("dist_muon": states sharded by layer over DP, cleave's
        // ZeRO 1), muon_tp_mode blockwise, 5 Newton-Schulz steps, Adam for the scalar
        // parameters, fp32 master / moments and grad_reduce_in_fp32=True.
        c.job.optimizer = Optimizer::muon;
        c.job.muon_tp_mode = MuonTpMode::blockwise;
        c.job.muon_ns_steps = 5;
        c.fp32_grads = true;
        // The recipe turns Megatron's distributed optimizer off for Muon: say what ZeRO 1 is here.
        const std::string dist = "distributed optimizer (Megatron-Bridge recipes' "
                                 "use_distributed_optimizer=True); ";
        if (const auto at = notes.find(dist); at != std::string::npos) {
            notes.erase(at, dist.size());
        }
        notes += "Muon (the recipe's dist_muon: its states layer-wise over DP, priced as ZeRO 1; "
                 "blockwise TP mode, 5 Newton-Schulz steps, fp32 grads); ";
    }
    // DGXC recipes (NVIDIA/dgxc-benchmarking @35a9aec) that turn TE's userbuffers TP overlap off
    // (ub_tp_comm_overlap: false in nemotron/nemotron4-340b-synth.yaml and grok1/grok1_314b.yaml;
    // the Nemotron-4 340B rows' notes say "TP comm overlap off") and a Megatron-Bridge preset whose
    // row notes say tp_comm_overlap=False (row 1029); and Grok-1's loop over the local experts
    // (moe_grouped_gemm: false in grok1_314b.yaml).
    const std::string& locator = r.str("source_locator");
    if (c.plan.tp > 1 && (contains(r.str("notes"), "TP comm overlap off") ||
                          contains(r.str("notes"), "tp_comm_overlap=False") ||
                          contains(locator, "grok1_314b.yaml"))) {
        c.recipe.tp_comm_overlap = false;
        notes += "TP communication not overlapped (the recipe's ub_tp_comm_overlap / tp_comm_overlap "
                 "false); ";
    }
    // Megatron-Bridge's Llama perf scripts turn TE's TP overlap off under NVFP4
    // (scripts/performance/configs/llama/llama3_llm_pretrain.py and llama31_llm_pretrain.py
    // @v0.3.0 and v0.4.0, llama3/ and llama31/ @v0.2.0: tp_comm_overlap = False if precision ==
    // "nvfp4"), whatever the preset.
    if (c.plan.tp > 1 && c.job.compute == Dtype::nvfp4 &&
        contains(r.str("framework"), "Megatron-Bridge") &&
        (contains(r.str("model"), "Llama") || contains(r.str("model"), "LLAMA"))) {
        c.recipe.tp_comm_overlap = false;
        notes += "TP communication not overlapped (the Llama perf scripts set tp_comm_overlap = "
                 "False under NVFP4); ";
    }
    // Megatron-Bridge 0.2.0's perf scripts (NeMo 25.11) turn --overlap-param-gather off under
    // MXFP8 ("keeping this enabled causes NaN grad norm") in deepseek_v3_gb300_config /
    // _gb200_config (configs/deepseek/deepseek_llm_pretrain.py), llama3_70b_{gb300,gb200,b200},
    // llama31_405b_{gb300,gb200,b200} (configs/llama3/, llama31/) and qwen3_235b_a22b_b200_config
    // (configs/qwen3/qwen3_llm_pretrain.py) @v0.2.0; rows 1006 and 1022 say so in their notes.
    if (c.job.compute == Dtype::mxfp8 && release_of_framework(r.str("framework")) == "25.11") {
        const std::string& model = r.str("model");
        const std::string& gpu = r.str("gpu_type");
        const bool gb = contains(gpu, "GB300") || contains(gpu, "GB200");
        const bool b200 = contains(gpu, "B200") && !contains(gpu, "GB200");
        const bool llama = contains(model, "Llama 3 70B") || contains(model, "Llama 3.1 405B");
        if (contains(r.str("notes"), "disables overlap_param_gather") ||
            (contains(model, "DeepSeek-V3") && gb) || (llama && (gb || b200)) ||
            (contains(model, "Qwen3-235B") && b200)) {
            c.recipe.overlap_param_gather = false;
            notes += "updated weights gathered before the forward, not behind it (the perf "
                     "script turns overlap_param_gather off under MXFP8); ";
        }
    }
    if (contains(locator, "gpt3_175b_hydra.yaml")) {
        // nemo_megatron/gpt3_175b_hydra.yaml @35a9aec: hidden_dropout 0.1 (and attention_dropout
        // 0.1, inside the fused attention kernel: not priced).
        c.recipe.hidden_dropout = true;
        notes += "hidden dropout kept (the recipe's hidden_dropout: 0.1); ";
    }
    if (contains(locator, "grok1_314b.yaml")) {
        c.recipe.moe_grouped_gemm = false;
        notes += "local experts looped, not grouped (the recipe's moe_grouped_gemm: false); ";
    }
    offload_of(r.str("notes"), c.plan, notes);
    if (c.source_key.rfind("MBRIDGE", 0) == 0) {
        preset_microbatch_of(r, c.plan, notes);
    }
    layer_map_of(c.model, c.job, c.plan, notes);
    c.metric = r.str("data_kind") == "layer_time" ? PublishedMetric::layer_time
                                                  : PublishedMetric::iteration_time;
    if (c.metric == PublishedMetric::layer_time) {
        c.published_s = r.num("layer_fwd_ms") * 1e-3;
        c.published_bwd_s = r.num("layer_bwd_ms") * 1e-3;
    } else if (r.has("iteration_time_s")) {
        c.published_s = r.num("iteration_time_s");
    } else if (r.has("iteration_time_s_derived")) {
        c.published_s = r.num("iteration_time_s_derived");
        c.derived = true;
    }
    std::string why;
    c.profile = profile_for(r, why);
    if (c.profile.empty()) {
        c.reason = why;
        return c;
    }
    notes = why + notes;  // a loose GPU name's assumption, if any
    const std::string& fw = r.str("framework");
    c.stack = stack;
    if (c.stack.empty()) {
        c.reason = "no shipped stack for framework '" + fw +
                   "': cleave prices Megatron-Core / NeMo, DeepSpeed, torchtitan and llm-foundry "
                   "(stacks/)";
        return c;
    }
    notes += "stack " + c.stack + " (framework '" + fw + "'" +
             (mlperf && stack_for_framework(fw).empty()
                  ? std::string(": MLPerf's NVIDIA-GPU submissions run NVIDIA's NeMo / "
                                "Megatron-Core implementation in that NGC container")
                  : std::string()) +
             "); ";
    c.release = release_of_framework(fw);
    if (!c.release.empty()) {
        notes += "release " + c.release + "; ";
    }
    c.expandable_segments = bridge_sets_expandable_segments(r, c);
    if (c.expandable_segments) {
        notes += "expandable_segments:True (the Megatron-Bridge perf launcher sets it for this "
                 "model, GPU and precision); ";
    }
    if (c.published_s <= 0.0 && c.metric == PublishedMetric::iteration_time) {
        convert_throughput(r, c, notes);
    }
    if (c.published_s <= 0.0) {
        c.reason = "no iteration or layer time published or derivable";
        return c;
    }
    if (contains(r.str("notes"), "Mamba") && !is_hybrid(c.model)) {
        // A hybrid without a shipped config: the CSV's columns cannot carry the layer pattern,
        // and pricing it as attention + MLP layers would be a number for a model cleave does
        // not model.
        c.reason = "hybrid Mamba-2 / attention / MoE layer pattern with no shipped config "
                   "(examples/hf/)";
        return c;
    }
    const auto broken = check_plan(c.model, c.job, c.plan);
    if (!broken.empty()) {
        c.reason = "plan cannot be expressed: " + broken.front();
        return c;
    }
    c.expressible = true;
    c.reason = notes;
    return c;
}

}  // namespace

std::string stack_for_framework(const std::string& fw) {
    if (contains(lower_of(fw), "deepspeed")) {
        // Megatron-LM's 2021 model code over DeepSpeed (SC21), or HF accelerate + DeepSpeed
        // 0.6+ on transformers' model code (the MLPerf Juniper LoRA rows: "NGC PyTorch
        // Release 24.01 Deepspeed").
        return contains(fw, "Megatron") ? "deepspeed-zero3-2021" : "deepspeed-zero3";
    }
    if (contains(fw, "torchtitan")) {
        return "torchtitan-fsdp2";
    }
    if (contains(fw, "llm-foundry") || contains(fw, "Composer") || contains(fw, "MosaicML")) {
        return "llm-foundry-fsdp";
    }
    // "NVIDIA NeMo Framework Release 24.04", "NVIDIA NEMO", "NVIDIA Nemo 24.09": one framework.
    if (contains(fw, "Megatron-Core") || contains(fw, "Megatron-Bridge") || contains(fw, "NeMo") ||
        contains(fw, "NEMO") || contains(fw, "Nemo")) {
        return "megatron-core";
    }
    if (contains(fw, "Megatron")) {
        // Megatron-LM before Transformer Engine (the 2020-2022 papers' code): materialised
        // attention; later years run Megatron-Core.
        for (const char* y : {"2019", "2020", "2021", "2022"}) {
            if (contains(fw, y)) {
                return "megatron-2021";
            }
        }
        return "megatron-core";
    }
    return "";
}

double convention_flops(const std::string& def, const ModelSpec& m, const JobSpec& job) {
    const double B = static_cast<double>(job.global_batch);
    const double s = static_cast<double>(job.seq_len);
    const double l = static_cast<double>(m.layers);
    const double h = static_cast<double>(m.hidden);
    const double V = static_cast<double>(m.vocab);
    if (contains(def, "SC21 eq.(3)") || contains(def, "SC21 eq. (3)")) {
        return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
    }
    if (contains(def, "Korthikanti")) {
        return 72.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * h * l));
    }
    if (contains(def, "flop_utils")) {
        return bridge_flops(m, job);
    }
    return 0.0;
}

std::vector<PublishedCase> parse_public_runs(std::string_view csv, const std::string& source_name) {
    const auto rows = detail::named_rows(split_csv(csv),
                                         {"row_id",
                                          "num_layers",
                                          "hidden_size",
                                          "num_attention_heads",
                                          "vocab_size",
                                          "seq_length",
                                          "gpu_type",
                                          "num_gpus",
                                          "tp",
                                          "pp",
                                          "dp",
                                          "micro_batch_size",
                                          "global_batch_size"},
                                         source_name);
    std::vector<PublishedCase> out;
    for (size_t i = 0; i < rows.size(); ++i) {
        std::string filled;
        const auto sibling = detail::sibling_layout(rows, i, filled);
        const auto& row = sibling ? *sibling : rows[i];
        out.push_back(case_of(Reader{row, source_name, static_cast<int64_t>(i + 2)}));
        if (!filled.empty() && out.back().expressible) {
            out.back().reason = filled + out.back().reason;
        }
    }
    return out;
}

void load_case_stack(PublishedCase& c) {
    const bool grads_from_row = c.job.grads != JobSpec{}.grads;
    c.job.stack = load_stack(c.stack);
    if (c.moe_a2a_overlap) {
        c.job.stack.moe_a2a_overlap = true;
    }
    if (c.moe_flex_dispatcher) {
        c.job.stack.moe_dispatcher = MoeDispatcher::deepep;
    }
    if (c.expandable_segments) {
        c.job.stack.expandable_segments = true;
    }
    if (!c.release.empty()) {
        c.job.stack.release = c.release;
        if (const std::string why = unknown_release_caution(c.job.stack); !why.empty()) {
            c.reason += why + "; ";
        }
    }
    if (!grads_from_row) {
        c.job.grads = c.job.stack.grad_dtype;
    }
    if (c.fp32_grads) {
        c.job.grads = Dtype::fp32;
    }
    const auto apply = [](const std::optional<bool>& v, bool& field) {
        if (v) {
            field = *v;
        }
    };
    apply(c.recipe.tp_comm_overlap, c.job.stack.tp_comm_overlap);
    apply(c.recipe.moe_grouped_gemm, c.job.stack.moe_grouped_gemm);
    apply(c.recipe.hidden_dropout, c.job.stack.hidden_dropout);
    apply(c.recipe.overlap_param_gather, c.job.stack.overlap_param_gather);
}

PublishedResult evaluate_published(const PublishedCase& c, const ClusterSpec& cluster) {
    PublishedResult r;
    if (c.metric == PublishedMetric::layer_time) {
        const PlanLinks links = plan_links(cluster, c.plan);
        const LayerCost lc = layer_cost(c.model, cluster, c.job, c.plan, links, false);
        r.predicted_s = (lc.fwd + lc.tp_fwd + lc.cp_fwd).value();
        r.predicted_bwd_s = (lc.bwd + lc.recompute + lc.tp_bwd + lc.cp_bwd).value();
        r.error_fwd_pct = 100.0 * (r.predicted_s - c.published_s) / c.published_s;
        r.error_bwd_pct = 100.0 * (r.predicted_bwd_s - c.published_bwd_s) / c.published_bwd_s;
        const double pub = c.published_s + c.published_bwd_s;
        r.error_pct = 100.0 * (r.predicted_s + r.predicted_bwd_s - pub) / pub;
        return r;
    }
    const Estimate e = estimate(c.model, cluster, c.job, c.plan);
    r.predicted_s = e.iteration_time.value();
    r.error_pct = 100.0 * (r.predicted_s - c.published_s) / c.published_s;
    r.tflops_per_gpu = e.tflops_per_gpu;
    r.mfu = e.mfu;
    r.fits = e.memory.total <= e.memory_usable;  // the row's layout ran: at no headroom
    r.peak_stage = e.peak_memory_stage;
    r.missing_gib = r.fits ? 0.0 : to_gib(e.memory.total - e.memory_usable);
    r.spare_gib = to_gib(e.memory_usable - e.memory.total);
    r.usable_gib = to_gib(e.memory_usable);
    const StageCost* slow = &e.stage[0];
    for (const StageCost& s : e.stage) {
        if (s.fwd + s.bwd > slow->fwd + slow->bwd) {
            slow = &s;
        }
    }
    const double mb = static_cast<double>(e.microbatches);
    r.gemm_s = slow->gemm.value() * mb;
    r.attention_s = slow->attention.value() * mb;
    r.memory_s = slow->memory_bound.value() * mb;
    r.recompute_s = slow->recompute.value() * mb;
    r.straggler_s = e.time.straggler.value();
    r.comm_s = (e.time.tp_comm + e.time.cp_comm + e.time.ep_comm + e.time.pp_comm + e.time.dp_comm)
                   .value();
    r.bubble_s = e.time.bubble.value();
    r.optimizer_s = e.time.optimizer.value();
    return r;
}

std::vector<std::vector<std::string>> csv_rows(std::string_view csv) {
    return split_csv(csv);
}

std::string profile_for_gpu(const std::string& gpu_type,
                            int64_t memory_gb,
                            int64_t gpus_per_node,
                            std::string& reason) {
    Row row{{"gpu_type", gpu_type},
            {"gpu_memory_gb", memory_gb > 0 ? std::to_string(memory_gb) : ""},
            {"gpus_per_node", gpus_per_node > 0 ? std::to_string(gpus_per_node) : ""}};
    const std::string file = "(gpu)";
    return profile_for(Reader{row, file, 0}, reason);
}

ErrorSummary summarize_errors(const std::vector<std::pair<int64_t, double>>& errors) {
    ErrorSummary s;
    double sum = 0.0;
    double signed_sum = 0.0;
    for (const auto& [row, err] : errors) {
        const double a = err < 0 ? -err : err;
        sum += a;
        signed_sum += err;
        if (a >= s.worst_pct) {
            s.worst_pct = a;
            s.worst_row = row;
        }
    }
    s.count = static_cast<int64_t>(errors.size());
    s.mape_pct = errors.empty() ? 0.0 : sum / static_cast<double>(errors.size());
    s.mean_signed_pct = errors.empty() ? 0.0 : signed_sum / static_cast<double>(errors.size());
    return s;
}

}  // namespace cleave
