// Reading published runs as they are written: the stack from the framework column, loose GPU
// names, sharding spelled out, TFLOP/s-only rows converted with the source's FLOP convention.
#include "published/published.hpp"

#include <fstream>
#include <sstream>
#include <string>

#include <doctest/doctest.h>

using namespace cleave;

namespace {

std::string header() {
    std::ifstream in(std::string(CLEAVE_TEST_DATA_DIR) + "/tests/data/public_runs.csv");
    std::string line;
    std::getline(in, line);
    return line;
}

// One row with the columns cleave reads set; every other column empty.
std::string row(const std::string& gpu,
                const std::string& mem,
                const std::string& sharding,
                const std::string& framework,
                const std::string& tflops,
                const std::string& definition) {
    std::istringstream cols(header());
    std::string col;
    std::string out;
    bool first = true;
    while (std::getline(cols, col, ',')) {
        std::string v;
        if (col == "row_id")
            v = "7";
        if (col == "source_key")
            v = "TEST";
        if (col == "data_kind")
            v = "throughput";
        if (col == "model")
            v = "GPT 1.7B";
        if (col == "num_layers")
            v = "24";
        if (col == "hidden_size")
            v = "2304";
        if (col == "num_attention_heads")
            v = "24";
        if (col == "vocab_size")
            v = "51200";
        if (col == "seq_length")
            v = "2048";
        if (col == "gpu_type")
            v = gpu;
        if (col == "gpu_memory_gb")
            v = mem;
        if (col == "num_gpus")
            v = "32";
        if (col == "tp" || col == "pp" || col == "cp" || col == "ep" || col == "vpp")
            v = "1";
        if (col == "dp")
            v = "32";
        if (col == "dp_sharding")
            v = "\"" + sharding + "\"";
        if (col == "micro_batch_size")
            v = "16";
        if (col == "global_batch_size")
            v = "512";
        if (col == "activation_recompute")
            v = "full";
        if (col == "precision")
            v = "fp16 mixed";
        if (col == "framework")
            v = "\"" + framework + "\"";
        if (col == "tflops_per_gpu")
            v = tflops;
        if (col == "tflops_definition")
            v = "\"" + definition + "\"";
        out += (first ? "" : ",") + v;
        first = false;
    }
    return header() + "\n" + out + "\n";
}

}  // namespace

TEST_SUITE("costmodel") {
    TEST_CASE("published: the stack follows the framework column and its year") {
        CHECK(stack_for_framework("Megatron-LM (2021)") == "megatron-2021");
        CHECK(stack_for_framework("Megatron-LM (2022)") == "megatron-2021");
        CHECK(stack_for_framework("Megatron-LM (2021) + DeepSpeed") == "deepspeed-zero3-2021");
        CHECK(stack_for_framework("Megatron-Bridge / Megatron-Core, NeMo 25.11 container") ==
              "megatron-core");
        CHECK(stack_for_framework("Megatron-LM (2024)") == "megatron-core");
        CHECK(stack_for_framework("torchtitan") == "torchtitan-fsdp2");
        CHECK(stack_for_framework("MosaicML llm-foundry") == "llm-foundry-fsdp");
        CHECK(stack_for_framework("JAX / MaxText").empty());
    }

    TEST_CASE("published: a TFLOP/s-only row becomes a time through its source's convention") {
        // SC21 eq. (3): F = 96 B s l h^2 (1 + s/6h + V/16lh) = 96 x 512 x 2048 x 24 x 2304^2 x
        // (1 + 0.148148 + 0.057870) = 1.54668e16 FLOP; at 137 TFLOP/s on 32 GPUs
        // t = 1.54668e16 / (137e12 x 32) = 3.528 s (the CSV's derived 3.53 for row 1).
        const auto cases = parse_public_runs(row("A100-class",
                                                 "",
                                                 "none",
                                                 "Megatron-LM (2021)",
                                                 "137",
                                                 "SC21 eq.(3) 96Bslh^2(1+s/6h+V/16lh): GEMM-only"),
                                             "t.csv");
        REQUIRE(cases.size() == 1);
        const PublishedCase& c = cases[0];
        CHECK(c.expressible);
        CHECK(c.derived);
        CHECK(c.published_s == doctest::Approx(3.528018).epsilon(1e-6));
        // A loose GPU name: the 80 GB DGX A100, and the row says it assumed so.
        CHECK(c.profile == "dgx-a100-80g");
        CHECK(c.reason.find("no memory stated: dgx-a100-80g assumed") != std::string::npos);
        CHECK(c.stack == "megatron-2021");
        CHECK(c.reason.find("stack megatron-2021") != std::string::npos);
    }

    TEST_CASE("published: FLOP conventions worked by hand") {
        ModelSpec m;
        m.layers = 24;
        m.hidden = 2304;
        m.heads = 24;
        m.kv_heads = 24;
        m.ffn_hidden = 4 * 2304;
        m.vocab = 51200;
        JobSpec j;
        j.global_batch = 512;
        j.seq_len = 2048;
        // Korthikanti App. A: 72 x 512 x 2048 x 24 x 2304^2 x (1 + 0.148148 + 51200/(12 x 2304
        // x 24) = 0.077160) = 1.178567e16.
        CHECK(convention_flops("Korthikanti et al. App. A", m, j) ==
              doctest::Approx(1.178567e16).epsilon(1e-6));
        // Megatron flop_utils, Llama 3 8B (l 32, h 4096, kv 8 x 128, f 14336 SwiGLU, V 128256),
        // B 128, s 8192: per token l (2h^2 + 2h kv d + 3hf) + hV = 7,504,658,432;
        // 3 x (2 B s x that + 2 B s^2 h l) = 5.39706e16 FLOP; at 1933 TFLOP/s on 8 GPUs 3.490 s,
        // the CSV's derived time of row 1001.
        ModelSpec l8;
        l8.layers = 32;
        l8.hidden = 4096;
        l8.heads = 32;
        l8.kv_heads = 8;
        l8.ffn_hidden = 14336;
        l8.vocab = 128256;
        l8.mlp = MlpKind::swiglu;
        JobSpec j8;
        j8.global_batch = 128;
        j8.seq_len = 8192;
        const double f = convention_flops("Megatron-Bridge ... flop_utils.py", l8, j8);
        CHECK(f == doctest::Approx(5.3970627761e16).epsilon(1e-9));
        CHECK(f / (1933e12 * 8) == doctest::Approx(3.490).epsilon(1e-3));
        CHECK(convention_flops("vendor marketing", m, j) == 0.0);
    }

    TEST_CASE(
        "published: 'none (FSDP=0); distributed optimizer' is ZeRO-1, 'Megatron FSDP' ZeRO-3") {
        const auto a =
            parse_public_runs(row("A100-SXM4",
                                  "80",
                                  "none per table (FSDP=0); distributed optimizer (default)",
                                  "Megatron-LM (2021)",
                                  "137",
                                  "SC21 eq.(3)"),
                              "t.csv");
        CHECK(a[0].plan.zero == 1);
        const auto b = parse_public_runs(row("A100-SXM4",
                                             "80",
                                             "Megatron FSDP (table FSDP=1)",
                                             "Megatron-Core",
                                             "137",
                                             "SC21 eq.(3)"),
                                         "t.csv");
        CHECK(b[0].plan.zero == 3);
        CHECK(b[0].stack == "megatron-core");
    }

    TEST_CASE("published: a sharding cell that says it is not stated is read as not stated") {
        // "the table has no FSDP column" names FSDP without meaning it: not ZeRO-3. Under
        // Megatron-Core nothing else is known (ZeRO 0, and the reason says so); under
        // Megatron-Bridge its recipes' distributed optimizer (ZeRO 1).
        const auto a = parse_public_runs(row("A100-SXM4", "80",
                                             "not stated (the table has no FSDP column)",
                                             "Megatron-Core", "137", "SC21 eq.(3)"),
                                         "t.csv");
        CHECK(a[0].plan.zero == 0);
        CHECK(a[0].reason.find("data-parallel sharding not stated") != std::string::npos);
        const auto b = parse_public_runs(row("A100-SXM4", "80", "n/a (no FSDP column)",
                                             "Megatron-Bridge / Megatron-Core", "137",
                                             "SC21 eq.(3)"),
                                         "t.csv");
        CHECK(b[0].plan.zero == 1);
        // A cell that states FSDP is still FSDP.
        const auto c = parse_public_runs(row("A100-SXM4", "80", "Megatron FSDP (table FSDP=1)",
                                             "Megatron-Core", "137", "SC21 eq.(3)"),
                                         "t.csv");
        CHECK(c[0].plan.zero == 3);
        CHECK(c[0].reason.find("sharding not stated") == std::string::npos);
    }

    TEST_CASE("published: the 2025 CSV is read, rows without a profile or layout say why") {
        std::ifstream in(std::string(CLEAVE_TEST_DATA_DIR) + "/tests/data/public_runs_2025.csv");
        std::stringstream ss;
        ss << in.rdbuf();
        const auto cases = parse_public_runs(ss.str(), "public_runs_2025.csv");
        REQUIRE(cases.size() == 29);
        int expressible = 0;
        for (const auto& c : cases) {
            CAPTURE(c.row_id);
            CHECK(c.stack == "megatron-core");
            if (c.expressible) {
                ++expressible;
                CHECK(c.published_s > 0.0);
            } else {
                CHECK_FALSE(c.reason.empty());
            }
        }
        CHECK(expressible >= 6);  // the H100 and B200 rows with an expressible layout
    }
}
