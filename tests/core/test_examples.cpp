// Parameter counts of the shipped examples against published totals, and every example loads.
#include "core/load.hpp"
#include "core/model.hpp"

#include <filesystem>
#include <string>

#include <doctest/doctest.h>

using namespace cleave;

namespace {

std::string example(const std::string& name) {
    return std::string(CLEAVE_TEST_DATA_DIR) + "/examples/" + name;
}

}  // namespace

TEST_SUITE("core") {
    TEST_CASE("examples: GPT-3 175B has 174.6B parameters") {
        const ModelSpec m = load_model(example("gpt3-175b.toml"));
        // 96 * (12h^2 + 13h) + V*h + s*h + 2h with h 12288, V 51200, s 2048 (test_model.cpp)
        CHECK(params_total(m) == 174615846912);
        CHECK(static_cast<double>(params_total(m)) == doctest::Approx(174.6e9).epsilon(0.001));
    }

    TEST_CASE("examples: Llama-2 7B / 13B / 70B") {
        // 7B: 32 * (4h^2 + 3*h*11008 + 2h = 202,383,360) + 2*V*h 262,144,000 + h 4,096
        CHECK(params_total(load_model(example("llama-2-7b.toml"))) == 6738415616);
        // 13B: 40 * (4h^2 + 3*h*13824 + 2h = 317,204,480) + 2*V*h 327,680,000 + h 5,120
        CHECK(params_total(load_model(example("llama-2-13b.toml"))) == 13015864320);
        // 70B: 80 * 855,654,400 + 2*V*h 524,288,000 + h 8,192 = 68.98B (test_model.cpp)
        CHECK(params_total(load_model(example("llama-2-70b.toml"))) == 68976648192);
    }

    TEST_CASE("examples: Llama-3 8B / 70B / 405B") {
        // 8B: 32 * (41,943,040 + 176,160,768 + 8,192) + 2 * 128256 * 4096 + 4096 = 8,030,261,248
        CHECK(params_total(load_model(example("llama-3-8b.toml"))) == 8030261248);
        // 70B: 80 * 855,654,400 + 2 * 128256 * 8192 + 8192 = 70,553,706,496
        CHECK(params_total(load_model(example("llama-3-70b.toml"))) == 70553706496);
        // 405B: h 16384, kv 8 x 128: attn 2h^2 + 2h*1024 = 570,425,344; mlp 3*h*53248 =
        // 2,617,245,696; norms 2h -> 3,187,703,808 per layer; x 126 + 2*128256*h + h
        CHECK(params_total(load_model(example("llama-3-405b.toml"))) == 405853388800);
    }

    TEST_CASE("examples: Mixtral 8x7B has 46.7B parameters, 12.9B active") {
        const ModelSpec m = load_model(example("mixtral-8x7b.toml"));
        // layer: attn 41,943,040 + 8 experts * 176,160,768 + router 4096*8 + norms 8,192
        //      = 1,451,270,144; x 32 + 2*V*h 262,144,000 + h 4,096
        CHECK(params_total(m) == 46702792704);
        // active: attn + 2 experts + router + norms = 394,305,536; x 32 + 262,148,096
        CHECK(params_active(m) == 12879925248);
        CHECK(params_layer(m, 0) == 1451270144);
    }

    TEST_CASE("examples: the seed's 13B model is 13.05B and splits 4 layers x 8 stages") {
        const ModelSpec m = load_model(example("seed-13b.toml"));
        // 32 * (12h^2 + 13h = 398,206,080) + V*h 294,912,000 + s*h 11,796,480 + 2h 11,520
        CHECK(params_total(m) == 13049314560);
        CHECK(m.layers % 8 == 0);
        int64_t sum = 0;
        for (int64_t s = 0; s < 8; ++s) {
            sum += params_stage(m, 8, s);
        }
        // Every stage counted once, plus the last stage's copy of the tied word embedding.
        CHECK(sum == params_total(m) + m.vocab * m.hidden);
        CHECK(params_stage(m, 8, 1) == 4 * params_per_layer(m));
        const JobSpec job = load_job(example("seed-13b-job.toml"));
        CHECK(job.gpus == 32);
        CHECK(job.global_batch == 128);
        CHECK(job.seq_len == m.seq_len);
    }

    TEST_CASE("examples: the tiny model is tiny") {
        const ModelSpec m = load_model(example("tiny.toml"));
        // 4 * (12*64^2 + 13*64 = 49,984) + 512*64 + 32*64 + 2*64 = 234,880
        CHECK(params_total(m) == 234880);
    }

    TEST_CASE("examples: every example file loads") {
        namespace fs = std::filesystem;
        int models = 0;
        for (const auto& dir : {example(""), example("hf")}) {
            for (const auto& e : fs::directory_iterator(dir)) {
                const auto& p = e.path();
                CAPTURE(p.string());
                if (p.filename().string().find("-job.toml") != std::string::npos) {
                    CHECK(load_job(p).gpus > 0);
                } else if (p.extension() == ".toml" || p.extension() == ".json") {
                    CHECK(validate(load_model(p)).empty());
                    ++models;
                }
            }
        }
        CHECK(models >= 13);
    }
}
