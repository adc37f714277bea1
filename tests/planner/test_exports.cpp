// `cleave plan --format megatron|torchtitan`: every Megatron flag is one current Megatron-LM
// accepts (tests/data/megatron_args.txt, with its commit), and each export parses back into the
// plan `cleave plan --format json` ranks first.
#include "cli/app.hpp"
#include "core/plan.hpp"

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

namespace {

std::string run(const std::vector<std::string>& args) {
    std::ostringstream out;
    std::ostringstream err;
    cleave::cli::CliContext ctx{out, err};
    std::vector<const char*> argv{"cleave"};
    for (const auto& a : args) {
        argv.push_back(a.c_str());
    }
    const int code = cleave::cli::run_cli(static_cast<int>(argv.size()), argv.data(), ctx);
    INFO(err.str());
    REQUIRE(code == 0);
    return out.str();
}

std::set<std::string> megatron_flags() {
    std::ifstream in(std::string(CLEAVE_TEST_DATA_DIR) + "/tests/data/megatron_args.txt");
    std::set<std::string> out;
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty() && line[0] != '#') {
            out.insert(line);
        }
    }
    return out;
}

/// "--flag value \" lines into flag -> value ("" for a switch).
std::map<std::string, std::string> megatron_args(const std::string& text) {
    std::map<std::string, std::string> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("--", 0) != 0) {
            continue;
        }
        std::istringstream words(line);
        std::string flag;
        std::string value;
        words >> flag >> value;
        out[flag] = value == "\\" ? "" : value;
    }
    return out;
}

int64_t num(const std::map<std::string, std::string>& a, const std::string& k, int64_t dflt) {
    const auto it = a.find(k);
    return it == a.end() ? dflt : std::stoll(it->second);
}

/// The plan Megatron would run from the exported flags (layer map as Megatron reads it).
cleave::Plan plan_from_megatron(const std::map<std::string, std::string>& a, int64_t gpus) {
    cleave::Plan p;
    p.tp = num(a, "--tensor-model-parallel-size", 1);
    p.pp = num(a, "--pipeline-model-parallel-size", 1);
    p.cp = num(a, "--context-parallel-size", 1);
    p.ep = num(a, "--expert-model-parallel-size", 1);
    p.dp = gpus / (p.tp * p.pp * p.cp);
    p.mbs = num(a, "--micro-batch-size", 1);
    p.sp = a.count("--sequence-parallel") > 0;
    p.zero = a.count("--use-distributed-optimizer") > 0 ? 1 : 0;
    const auto rc = a.find("--recompute-granularity");
    p.recompute = rc == a.end()          ? cleave::Recompute::none
                  : rc->second == "full" ? cleave::Recompute::full
                                         : cleave::Recompute::selective;
    const int64_t layers = num(a, "--num-layers", 0);
    if (a.count("--pipeline-model-parallel-layout") > 0) {
        cleave::apply_layout(a.at("--pipeline-model-parallel-layout"), layers, p);
    } else {
        p.vpp = num(a, "--num-virtual-stages-per-pipeline-rank", 1);
        const int64_t per_chunk = num(a, "--num-layers-per-virtual-pipeline-stage", 0);
        if (per_chunk > 0) {
            p.vpp = layers / (p.pp * per_chunk);
        }
        p.first_layers = num(a, "--decoder-first-pipeline-num-layers", 0);
        p.last_layers = num(a, "--decoder-last-pipeline-num-layers", 0);
        const int64_t e = a.count("--account-for-embedding-in-pipeline-split");
        const int64_t l = a.count("--account-for-loss-in-pipeline-split");
        if (e + l > 0) {  // (L + e + l) / pp per stage, one less where E / L sits
            const int64_t share = (layers + e + l) / p.pp;
            p.first_layers = share - e;
            p.last_layers = share - l;
        }
    }
    p.schedule = p.vpp > 1 ? cleave::Schedule::interleaved : cleave::Schedule::one_f_one_b;
    return p;
}

const std::string root = CLEAVE_TEST_DATA_DIR;

/// A plan job: GPT-3 175B on 1024 A100s (gbs 1536), or with "405b" first Llama 3 405B on 16384
/// H100s (gbs 2048, seq 8192).
std::vector<std::string> job(std::vector<std::string> extra, const std::string& fmt) {
    const bool big = !extra.empty() && extra.front() == "405b";
    if (big) {
        extra.erase(extra.begin());
    }
    std::vector<std::string> a = {
        "plan",
        root + (big ? "/examples/llama-3-405b.toml" : "/examples/gpt3-175b.toml"),
        big ? "dgx-h100" : "dgx-a100-80g",
        "--gpus",
        big ? "16384" : "1024",
        "--gbs",
        big ? "2048" : "1536",
        "--seq",
        big ? "8192" : "2048",
        "--top",
        "1",
        "--format",
        fmt};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

/// The top plan of the json output, with the stage map it prices.
nlohmann::json top(const std::vector<std::string>& extra) {
    return nlohmann::json::parse(run(job(extra, "json")))["plans"][0]["plan"];
}

void same_plan(const cleave::Plan& got, const nlohmann::json& want, int64_t layers) {
    CHECK(got.tp == want["tp"]);
    CHECK(got.pp == want["pp"]);
    CHECK(got.dp == want["dp"]);
    CHECK(got.cp == want["cp"]);
    CHECK(got.mbs == want["mbs"]);
    CHECK(got.vpp == want["vpp"]);
    CHECK(got.sp == want["sp"]);
    CHECK(std::string(cleave::to_string(got.recompute)) == want["recompute"]);
    cleave::Plan w;
    w.pp = want["pp"];
    w.first_layers = want["first_stage_layers"];
    w.last_layers = want["last_stage_layers"];
    CHECK(cleave::stage_layers(layers, got) == cleave::stage_layers(layers, w));
}

}  // namespace

TEST_SUITE("exports") {
    TEST_CASE("megatron: every flag is one Megatron-LM accepts, and the plan comes back") {
        const std::set<std::string> known = megatron_flags();
        REQUIRE(known.size() > 500);
        REQUIRE(known.count("--pipeline-model-parallel-layout") == 1);
        // Even interleaved; Megatron's first/last flags (11 + 13: 72 / 6 = 12); the account
        // split (gpt3 has 96 layers: (96 + 2) / 2 = 49 on pp 2); a map only a layout holds
        // (vpp 3 over 11 / 12 / 13).
        const std::vector<std::vector<std::string>> cases = {
            {"--tp", "8", "--pp", "8", "--vpp", "4"},
            {"--tp",
             "8",
             "--pp",
             "8",
             "--vpp",
             "1",
             "--first-stage-layers",
             "11",
             "--last-stage-layers",
             "13"},
            {"--tp", "8", "--pp", "2", "--first-stage-layers", "48", "--last-stage-layers", "48"},
            {"--tp",
             "8",
             "--pp",
             "8",
             "--vpp",
             "3",
             "--first-stage-layers",
             "11",
             "--last-stage-layers",
             "13"},
            {"--tp",
             "8",
             "--pp",
             "2",
             "--vpp",
             "1",
             "--first-stage-layers",
             "47",
             "--recompute",
             "full"},
            // Llama 3 405B on pp 16, 7 / 8 / 7: (126 + 2) / 16 = 8, one less at each end; vpp 8
            // (one layer per chunk, the loss and embedding as one each) fixed, since another vpp
            // needs the explicit layout (case 3's flag).
            {"405b",
             "--tp",
             "8",
             "--pp",
             "16",
             "--vpp",
             "8",
             "--first-stage-layers",
             "7",
             "--last-stage-layers",
             "7"}};
        const std::vector<std::string> layout_flag = {"--num-layers-per-virtual-pipeline-stage",
                                                      "--decoder-first-pipeline-num-layers",
                                                      "",
                                                      "--pipeline-model-parallel-layout",
                                                      "--decoder-first-pipeline-num-layers",
                                                      "--account-for-loss-in-pipeline-split"};
        int with_overlap = 0;
        for (std::size_t i = 0; i < cases.size(); ++i) {
            CAPTURE(i);
            const bool big = cases[i].front() == "405b";
            const std::string text = run(job(cases[i], "megatron"));
            const auto args = megatron_args(text);
            for (const auto& [flag, value] : args) {
                CAPTURE(flag);
                CHECK(known.count(flag) == 1);
            }
            if (!layout_flag[i].empty()) {
                CHECK(args.count(layout_flag[i]) == 1);
            }
            // A TP overlap the price assumed says which userbuffers presets it was priced with,
            // and the flag that passes one (Megatron-LM @d98e8a64 arguments.py:2880).
            if (args.count("--tp-comm-overlap") == 1) {
                ++with_overlap;
                CHECK(known.count("--tp-comm-overlap-cfg") == 1);
                CHECK(text.find("# --tp-comm-overlap was priced with NVIDIA's tuned userbuffers "
                                "presets (row-parallel forward pipeline;") != std::string::npos);
            }
            same_plan(plan_from_megatron(args, big ? 16384 : 1024), top(cases[i]), big ? 126 : 96);
        }
        CHECK(with_overlap > 0);  // the TP 8 plans run SP with the overlap
    }

    TEST_CASE("torchtitan: the TOML parses and gives the plan back") {
        const std::vector<std::string> extra = {"--tp",
                                                "8",
                                                "--pp",
                                                "8",
                                                "--vpp",
                                                "3",
                                                "--first-stage-layers",
                                                "11",
                                                "--last-stage-layers",
                                                "13"};
        const std::string text = run(job(extra, "torchtitan"));
        const toml::table t = toml::parse(text);
        const nlohmann::json want = top(extra);
        const auto par = *t["parallelism"].as_table();
        cleave::Plan p;
        p.tp = par["tensor_parallel_degree"].value_or(int64_t{0});
        p.pp = par["pipeline_parallel_degree"].value_or(int64_t{0});
        p.cp = par["context_parallel_degree"].value_or(int64_t{0});
        p.dp = par["data_parallel_replicate_degree"].value_or(int64_t{0}) *
               par["data_parallel_shard_degree"].value_or(int64_t{0});
        p.sp = par["enable_sequence_parallel"].value_or(false);
        p.mbs = t["training"]["num_tokens_per_microbatch_per_dp_rank"].value_or(int64_t{0}) / 2048;
        const auto* parts = par["module_fqns_per_model_part"].as_array();
        REQUIRE(parts != nullptr);
        p.vpp = static_cast<int64_t>(parts->size()) / p.pp;
        // Layers per stage: stage s holds parts s, s + pp, ...
        std::vector<int64_t> per_stage(static_cast<std::size_t>(p.pp), 0);
        for (std::size_t k = 0; k < parts->size(); ++k) {
            for (const auto& name : *(*parts)[k].as_array()) {
                per_stage[k % static_cast<std::size_t>(p.pp)] +=
                    name.value_or(std::string()).rfind("layers.", 0) == 0 ? 1 : 0;
            }
        }
        p.first_layers = per_stage.front();
        p.last_layers = per_stage.back();
        CHECK(per_stage[3] == 12);
        // Activation checkpointing is a config class in torchtitan, named in a comment.
        p.recompute = text.find("= FullAC") != std::string::npos ? cleave::Recompute::full
                      : text.find("= SelectiveAC") != std::string::npos
                          ? cleave::Recompute::selective
                          : cleave::Recompute::none;
        same_plan(p, want, 96);
        CHECK(par["pipeline_parallel_schedule"].value_or(std::string()) == "Interleaved1F1B");
        CHECK(par["num_pp_microbatches"].value_or(int64_t{0}) == 1536 / (p.dp * p.mbs));
    }
}

TEST_SUITE("planner") {
    TEST_CASE("torchtitan: the export writes the compile, loss and float8 settings priced") {
        // Llama 3 8B on 8 H100s under the torchtitan stack (b5bcd76c66: blocks and loss compiled,
        // ChunkedLossWrapper num_chunks 8, Float8 rowwise by default from 6348d93d1).
        const auto titan = [](std::vector<std::string> extra) {
            std::vector<std::string> a = {"plan",  root + "/examples/llama-3-8b.toml",
                                          "dgx-h100", "--gpus", "8", "--gbs", "16", "--seq",
                                          "8192", "--stack", "torchtitan-fsdp2", "--top", "1",
                                          "--format", "torchtitan"};
            a.insert(a.end(), extra.begin(), extra.end());
            return run(a);
        };
        const auto components = [](const toml::table& t) {
            std::vector<std::string> out;
            for (const auto& c : *t["compile"]["components"].as_array()) {
                out.push_back(c.value_or(std::string()));
            }
            return out;
        };
        std::string text = titan({"--dtype", "fp8"});
        toml::table t = toml::parse(text);
        CHECK(t["compile"]["enable"].value_or(false));
        CHECK(components(t) == std::vector<std::string>{"model", "loss"});
        CHECK(text.find("#   loss=ChunkedLossWrapper.Config(num_chunks=8, loss_fn=CrossEntropyLoss"
                        ".Config(") != std::string::npos);
        CHECK(text.find("converters=[Float8LinearConverter.Config(recipe_name=\"rowwise\", "
                        "filter_fqns=[\"lm_head\"], model_compile_enabled=True)]") !=
              std::string::npos);
        // Eager blocks, eager unchunked loss (torchtitan 9dec370): nothing compiled.
        text = titan({"--no-torch-compile", "--loss", "eager", "--loss-chunks", "1"});
        t = toml::parse(text);
        CHECK_FALSE(t["compile"]["enable"].value_or(true));
        CHECK(components(t).empty());
        CHECK(text.find("#   loss=CrossEntropyLoss.Config(") != std::string::npos);
        CHECK(text.find("Float8") == std::string::npos);  // bf16: no converter
        // Compiled blocks, eager loss: the model alone.
        t = toml::parse(titan({"--loss", "eager"}));
        CHECK(components(t) == std::vector<std::string>{"model"});
        // 2024-12's tensorwise with the FSDP float8 all-gather: not a recipe b5bcd76c66 takes;
        // the keys of the last torchtitan that did (9810191bb), recipe_name left unset.
        text = titan({"--dtype", "fp8", "--release", "24.12", "--float8-fsdp-all-gather", "on",
                      "--float8-precompute-scale", "on"});
        CHECK(text.find("# float8 recipe tensorwise (release 24.12, torchtitan 9dec370) is not one "
                        "b5bcd76c66 takes") != std::string::npos);
        CHECK(text.find("Float8LinearConverter.Config(enable_fsdp_float8_all_gather=True, "
                        "precompute_float8_dynamic_scale_for_fsdp=True)") != std::string::npos);
        CHECK(text.find("Config(recipe_name") == std::string::npos);
    }

    TEST_CASE("megatron: an MoE plan exports its expert grid and dispatcher, all flags known") {
        const std::set<std::string> known = megatron_flags();
        const std::vector<std::string> base = {"plan",     root + "/examples/mixtral-8x7b.toml",
                                               "dgx-h100", "--gpus",
                                               "16",       "--gbs",
                                               "64",       "--seq",
                                               "4096",     "--tp",
                                               "2",        "--ep",
                                               "8",        "--etp",
                                               "1",        "--pp",
                                               "1",        "--top",
                                               "1",        "--moe-capacity",
                                               "1.25"};
        std::vector<std::string> mg = base;
        mg.insert(mg.end(), {"--format", "megatron"});
        const auto args = megatron_args(run(mg));
        for (const auto& [flag, value] : args) {
            CAPTURE(flag);
            CHECK(known.count(flag) == 1);
        }
        CHECK(args.at("--expert-model-parallel-size") == "8");
        CHECK(args.at("--expert-tensor-parallel-size") == "1");
        CHECK(args.at("--tensor-model-parallel-size") == "2");
        CHECK(args.at("--moe-token-dispatcher-type") == "alltoall");  // megatron-core's [moe]
        CHECK(args.count("--moe-grouped-gemm") == 1);
        CHECK(args.at("--moe-expert-capacity-factor") == "1.25");
        std::vector<std::string> js = base;
        js.insert(js.end(), {"--format", "json"});
        const nlohmann::json p = nlohmann::json::parse(run(js))["plans"][0]["plan"];
        CHECK(p["etp"] == 1);
        CHECK(p["edp"] == 2);  // tp 2 x dp 8 = 16 ranks / (etp 1 x ep 8)
        CHECK(p["flags"].get<std::string>().find("--etp 1") != std::string::npos);
    }
}
