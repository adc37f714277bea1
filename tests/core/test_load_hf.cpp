// Hugging Face config.json loader: each supported family, and errors with their positions.
#include "core/errors.hpp"
#include "core/load.hpp"
#include "tests/core/diag_helpers.hpp"

#include <string>

#include <doctest/doctest.h>

using namespace cleave;
using cleave::test::expect_diagnostics;

TEST_SUITE("core") {
    TEST_CASE("hf: a Mistral config is Llama-style with GQA") {
        // mistralai/Mistral-7B-v0.1 config.json (published values)
        const ModelSpec m = parse_model_hf_json(R"({
  "architectures": ["MistralForCausalLM"],
  "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768,
  "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "sliding_window": 4096, "tie_word_embeddings": false,
  "vocab_size": 32000
})",
                                                "mistral.json");
        CHECK(m.name == "mistral");
        CHECK(m.mlp == MlpKind::swiglu);
        CHECK(m.norm == NormKind::rmsnorm);
        CHECK(m.positions == PositionKind::rope);
        CHECK_FALSE(m.tied_embeddings);
        CHECK(m.kv_heads == 8);
        // 32 * (41,943,040 attn + 176,160,768 mlp + 8,192 norms) + 2 * 32000 * 4096 + 4096
        CHECK(params_total(m) == 7241732096);
    }

    TEST_CASE("hf: Qwen2 has Q/K/V biases only") {
        // Qwen/Qwen2-0.5B config.json (published values)
        const ModelSpec m = parse_model_hf_json(R"({
  "architectures": ["Qwen2ForCausalLM"], "hidden_size": 896, "intermediate_size": 4864,
  "max_position_embeddings": 131072, "model_type": "qwen2", "num_attention_heads": 14,
  "num_hidden_layers": 24, "num_key_value_heads": 2, "tie_word_embeddings": true,
  "vocab_size": 151936
})",
                                                "qwen2.json");
        CHECK(m.qkv_bias);
        CHECK_FALSE(m.linear_bias);
        CHECK(m.tied_embeddings);
        // head_dim 64, kv 128: attn 2*896^2 + 2*896*128 = 1,835,008 + q/k/v biases 896 + 256 =
        // 1,152
        CHECK(params_attention(m) == 1836160);
        // layer: 1,836,160 + mlp 3*896*4864 = 13,074,432 + norms 1,792 = 14,912,384;
        // 24 layers 357,897,216 + embedding 151936*896 = 136,134,656 + final norm 896
        // = 494,032,768: Qwen2-0.5B's published 0.49B.
        CHECK(params_total(m) == 494032768);
    }

    TEST_CASE("hf: GPT-NeoX is GeLU + LayerNorm + rotary with an untied embed_out") {
        // EleutherAI/pythia-160m config.json (published values)
        const ModelSpec m = parse_model_hf_json(R"({
  "architectures": ["GPTNeoXForCausalLM"], "hidden_size": 768, "intermediate_size": 3072,
  "max_position_embeddings": 2048, "model_type": "gpt_neox", "num_attention_heads": 12,
  "num_hidden_layers": 12, "rotary_pct": 0.25, "tie_word_embeddings": false,
  "use_parallel_residual": true, "vocab_size": 50304
})",
                                                "pythia.json");
        CHECK(m.mlp == MlpKind::gelu);
        CHECK(m.norm == NormKind::layernorm);
        CHECK(m.positions == PositionKind::rope);
        CHECK(m.linear_bias);
        CHECK_FALSE(m.tied_embeddings);
        // 12 * (12h^2 + 13h = 7,087,872) + 2 * 50304 * 768 + final LN 1536 = 162,322,944:
        // Pythia-160M's 162,322,944 parameters (85,054,464 non-embedding).
        CHECK(params_total(m) == 162322944);
    }

    TEST_CASE("hf: GPT-2 reads n_* keys and learned positions") {
        const ModelSpec m =
            load_model(std::string(CLEAVE_TEST_DATA_DIR) + "/examples/hf/gpt2.config.json");
        CHECK(m.layers == 12);
        CHECK(m.hidden == 768);
        CHECK(m.ffn_hidden == 3072);  // n_inner absent -> 4 * n_embd
        CHECK(m.seq_len == 1024);
        CHECK(m.positions == PositionKind::learned);
        CHECK(m.tied_embeddings);
        CHECK(params_total(m) == 124439808);  // GPT-2 small: 124,439,808
    }

    TEST_CASE("hf: the Llama-3-8B and Mixtral samples match their TOML twins") {
        const std::string dir = std::string(CLEAVE_TEST_DATA_DIR) + "/examples/";
        const ModelSpec hf = load_model(dir + "hf/llama-3-8b.config.json");
        ModelSpec toml = load_model(dir + "llama-3-8b.toml");
        toml.name = hf.name;
        CHECK(hf == toml);
        CHECK(params_total(hf) == 8030261248);
        const ModelSpec mix = load_model(dir + "hf/mixtral-8x7b.config.json");
        ModelSpec mix_toml = load_model(dir + "mixtral-8x7b.toml");
        mix_toml.name = mix.name;
        CHECK(mix == mix_toml);
    }

    TEST_CASE("hf: missing keys, wrong types and unknown families are reported by key") {
        expect_diagnostics(
            [] {
                (void)parse_model_hf_json(R"({
  "model_type": "llama",
  "hidden_size": "4096",
  "num_attention_heads": 32,
  "intermediate_size": 11008,
  "vocab_size": 32000,
  "max_position_embeddings": 4096,
  "tie_word_embeddings": "no"
})",
                                          "c.json");
            },
            {{1, 1, "missing required key 'num_hidden_layers'"},
             {3, 3, "'hidden_size' must be an integer, got string"},
             {8, 3, "'tie_word_embeddings' must be a boolean, got string"}});
        expect_diagnostics(
            [] { (void)parse_model_hf_json(R"({"model_type": "bert"})", "c.json"); },
            {{1,
              2,
              "unsupported model_type 'bert' (supported: llama, mistral, qwen2, mixtral, "
              "gpt_neox, gpt2)"}});
    }

    TEST_CASE("hf: invalid JSON is reported at its line and column") {
        try {
            (void)parse_model_hf_json("{\n  \"model_type\": \"llama\",\n  \"x\": ]\n}", "c.json");
            FAIL("expected ConfigError");
        } catch (const ConfigError& e) {
            REQUIRE(e.diagnostics().size() == 1);
            CHECK(e.diagnostics()[0].where.line == 3);
            CHECK(e.diagnostics()[0].where.column == 8);
            CHECK(e.diagnostics()[0].message.find("invalid JSON") == 0);
        }
    }

    TEST_CASE("hf: heads not dividing hidden is a ConfigError") {
        expect_diagnostics(
            [] {
                (void)parse_model_hf_json(R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 100,
"n_head": 8, "vocab_size": 10, "n_positions": 8})",
                                          "c.json");
            },
            {{1, 1, "'heads' = 8 does not divide 'hidden' = 100"}});
    }
}

TEST_SUITE("core") {
    TEST_CASE("hf: a number too large for a double is a ConfigError at the number") {
        // Found by scripts/fuzz.sh: nlohmann throws out_of_range, not parse_error, here.
        try {
            (void)parse_model_hf_json("{\"model_type\": \"gpt2\",\n \"n_layer\": 1e999}", "c.json");
            FAIL("expected ConfigError");
        } catch (const ConfigError& e) {
            REQUIRE(e.diagnostics().size() == 1);
            CHECK(e.diagnostics()[0].where.line == 2);
            CHECK(e.diagnostics()[0].where.column == 13);
            CHECK(e.diagnostics()[0].message.find("number overflow") != std::string::npos);
        }
    }
}
