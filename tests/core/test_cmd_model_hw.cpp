// `cleave model` and `cleave hw` run in process through make_app / run_cli (STYLE S7.4).
#include "cli/app.hpp"
#include "tests/cli_run.hpp"

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

namespace {

using Run = cleave::test::CliRun;

Run cli_run(std::vector<std::string> args) {
    return cleave::test::run_cleave(std::move(args));
}

std::string data_file(const std::string& rel) {
    return std::string(CLEAVE_TEST_DATA_DIR) + "/" + rel;
}

}  // namespace

TEST_SUITE("core") {
    TEST_CASE("cmd model: GPT-3 175B as JSON has params_total within 0.1% of 174.6e9") {
        const Run r = cli_run({"model", data_file("examples/gpt3-175b.toml"), "--format", "json"});
        REQUIRE(r.code == 0);
        const auto j = nlohmann::json::parse(r.out);
        CHECK(j["params_total"].get<double>() == doctest::Approx(174.6e9).epsilon(0.001));
        CHECK(j["params_per_layer"] == 1812099072);
        CHECK(j["params_embedding"] == 51200 * 12288 + 2048 * 12288);
        CHECK(j["layers"] == 96);
        CHECK(j["hidden"] == 12288);
        CHECK(j["heads"] == 96);
        CHECK(j["kv_heads"] == 96);
        CHECK(j["ffn_hidden"] == 49152);
        CHECK(j["vocab"] == 51200);
        CHECK(j["moe"].is_null());
    }

    TEST_CASE("cmd model: MoE fields, per-stage counts and a HF config.json") {
        const Run r = cli_run({"model",
                                  data_file("examples/hf/mixtral-8x7b.config.json"),
                                  "--format",
                                  "json",
                                  "--pp",
                                  "4"});
        REQUIRE(r.code == 0);
        const auto j = nlohmann::json::parse(r.out);
        CHECK(j["params_total"] == 46702792704);
        CHECK(j["params_active"] == 12879925248);
        CHECK(j["moe"]["experts"] == 8);
        CHECK(j["moe"]["top_k"] == 2);
        CHECK(j["moe"]["moe_layers"] == 32);
        REQUIRE(j["params_per_stage"].size() == 4);
        // untied: the 4 stages add up to the total exactly
        int64_t sum = 0;
        for (const auto& s : j["params_per_stage"]) {
            sum += s.get<int64_t>();
        }
        CHECK(sum == 46702792704);
    }

    TEST_CASE("cmd model: DeepSeek-V3 prints MLA, the MTP module apart and the convention") {
        const Run r =
            cli_run({"model", data_file("examples/hf/deepseek-v3.config.json"), "--format", "json"});
        REQUIRE(r.code == 0);
        const auto j = nlohmann::json::parse(r.out);
        // Hand counts in tests/core/test_load_hf.cpp: 671,026,419,200 total, 37,552,297,472
        // active, less the 129280 x 7168 = 926,679,040 embedding: 36,625,618,432.
        CHECK(j["params_total"] == 671026419200);
        CHECK(j["params_active"] == 37552297472);
        CHECK(j["params_active_no_embedding"] == 36625618432);
        CHECK(j["params_mtp"] == 11610068224);
        CHECK(j["mtp_layers"] == 1);
        CHECK(j["head_dim"] == 192);
        CHECK(j["attention"]["v_head_dim"] == 128);
        CHECK(j["attention"]["mla"]["kv_lora_rank"] == 512);
        CHECK(j["moe"]["shared_ffn_hidden"] == 2048);
        CHECK(j["moe"]["moe_layers"] == 58);
        CHECK(j["convention"].get<std::string>().find("MTP modules apart") != std::string::npos);
        const Run oss = cli_run({"model", data_file("examples/hf/gpt-oss-120b.config.json")});
        REQUIRE(oss.code == 0);
        // The card's 5.13B active leaves the input embedding out.
        CHECK(oss.out.find("params_active_no_embedding      5132849472  5.133B") !=
              std::string::npos);
        CHECK(oss.out.find("attention.windowed_layers       18") != std::string::npos);
    }

    TEST_CASE("cmd model: table lines are data or start with #") {
        const Run r = cli_run({"model", data_file("examples/llama-3-8b.toml")});
        REQUIRE(r.code == 0);
        std::istringstream in(r.out);
        std::string line;
        bool total = false;
        while (std::getline(in, line)) {
            CAPTURE(line);
            CHECK(!line.empty());
            if (line.rfind("params_total ", 0) == 0) {
                total = line.find("8030261248") != std::string::npos;
            }
        }
        CHECK(total);
        CHECK(r.out.rfind("# ", 0) == 0);
    }

    TEST_CASE("cmd model: a bad model file exits 2 with file:line:col") {
        const std::string path = std::string(CLEAVE_BINARY_DIR) + "/test_cmd_bad_model.toml";
        std::ofstream(path) << "[model]\narch = \"gpt\"\nlayers = 0\n";
        const Run r = cli_run({"model", path});
        CHECK(r.code == 2);
        CHECK(r.err.find(path + ":3:10: error: 'model.layers' must be positive") !=
              std::string::npos);
    }

    TEST_CASE("cmd hw: list shows every shipped profile") {
        const Run r = cli_run({"hw", "list", "--format", "json"});
        REQUIRE(r.code == 0);
        const auto j = nlohmann::json::parse(r.out);
        REQUIRE(j.size() >= 8);
        CHECK(j[0]["name"] == "a100-pcie-1gbe");  // sorted by name
        const Run t = cli_run({"hw", "list"});
        CHECK(t.code == 0);
        CHECK(t.out.rfind("# name", 0) == 0);
        CHECK(t.out.find("\ndgx-h100 ") != std::string::npos);
        // The NVL72 racks: 4 GPUs per host, 72 per NVLink domain.
        bool gb200 = false;
        bool gb300 = false;
        for (const auto& p : j) {
            if (p["name"] == "gb200-nvl72" || p["name"] == "gb300-nvl72") {
                (p["name"] == "gb200-nvl72" ? gb200 : gb300) = true;
                CHECK(p["gpus_per_node"] == 4);
                CHECK(p["nvlink_domain_gpus"] == 72);
            }
        }
        CHECK(gb200);
        CHECK(gb300);
    }

    TEST_CASE("cmd hw: show gb200-nvl72 prints every number with its source") {
        const Run t = cli_run({"hw", "show", "gb200-nvl72"});
        REQUIRE(t.code == 0);
        std::istringstream in(t.out);
        std::string line;
        int numbers = 0;
        for (std::string line_; std::getline(in, line_);) {
            line = line_;
            // Every value the profile file sets carries its "# [tag] source" comment; derived
            // rows (usable memory) and keys the file leaves at their default carry none.
            for (const char* key : {"gpu.peak_tflops_nvfp4 ",
                                    "gpu.hbm_capacity_gib ",
                                    "node.nvlink_domain_gpus ",
                                    "node.intra_bandwidth_gbps ",
                                    "network.inter_bandwidth_gbps ",
                                    "gpu.gemm_efficiency_fp8.efficiency "}) {
                if (line.rfind(key, 0) == 0) {
                    CAPTURE(line);
                    // "# [D] S39 ..." or, where the overlay changed it, "# FITTED ...; profile: [X]
                    // ..."
                    CHECK((line.find("# [") != std::string::npos ||
                           line.find("; profile: [") != std::string::npos));
                    ++numbers;
                }
            }
        }
        CHECK(numbers == 6);
        CHECK(t.out.find("node.nvlink_domain_gpus             72") != std::string::npos);
        CHECK(t.out.find("#   S09 = ") != std::string::npos);  // the source list
        // The fitted overlay's factor is marked on the curves it scaled, ahead of the source.
        CHECK(t.out.find("# FITTED x 0.64 (") != std::string::npos);
        const Run j = cli_run({"hw", "show", "gb200-nvl72", "--format", "json"});
        REQUIRE(j.code == 0);
        const auto o = nlohmann::json::parse(j.out);
        CHECK(o["gpu"]["peak_tflops_nvfp4"].get<double>() == doctest::Approx(10000.0));
        CHECK(o["sources"]["keys"]["node.nvlink_domain_gpus"].get<std::string>().rfind("[D]", 0) ==
              0);
    }

    TEST_CASE("cmd hw: show prints the profile in display units") {
        const Run r = cli_run({"hw", "show", "dgx-a100-80g", "--format", "json"});
        REQUIRE(r.code == 0);
        const auto j = nlohmann::json::parse(r.out);
        CHECK(j["gpu"]["hbm_capacity_gib"] == 80.0);
        CHECK(j["gpu"]["peak_tflops_bf16"].get<double>() == doctest::Approx(312.0));
        CHECK(j["node"]["intra_link"] == "nvswitch");
        CHECK(j["network"]["inter_bandwidth_gbps"].get<double>() == doctest::Approx(24.0));
        const Run t = cli_run({"hw", "show", "a100-pcie-1gbe"});
        CHECK(t.code == 0);
        CHECK(t.out.find("network.inter_bandwidth_gbps") != std::string::npos);
    }

    TEST_CASE("cmd hw: a misspelled key in a cluster file exits 2 with line:col") {
        std::ifstream in(data_file("hwprofiles/dgx-h100.toml"));
        std::stringstream text;
        text << in.rdbuf();
        std::string s = text.str();
        const auto at = s.find("\nintra_latency_us");
        REQUIRE(at != std::string::npos);
        s.replace(at, 17, "\nintra_latncy_us");
        const std::string path = std::string(CLEAVE_BINARY_DIR) + "/test_cmd_typo_profile.toml";
        std::ofstream(path) << s;
        int64_t line = 1;
        for (size_t i = 0; i <= at; ++i) {
            line += s[i] == '\n' ? 1 : 0;
        }
        const Run r = cli_run({"hw", "show", path});
        CHECK(r.code == 2);
        CAPTURE(r.err);
        CHECK(r.err.find(path + ":" + std::to_string(line) +
                         ":1: error: unknown key 'node.intra_latncy_us'") != std::string::npos);
    }

    TEST_CASE("cmd hw: an unknown profile name exits 2 and lists the shipped names") {
        const Run r = cli_run({"hw", "show", "dgx-z9"});
        CHECK(r.code == 2);
        CHECK(r.err.find("dgx-a100-80g") != std::string::npos);
    }
}
