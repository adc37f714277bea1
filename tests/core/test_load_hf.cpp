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
              "unsupported model_type 'bert' (supported: llama, mistral, qwen2, qwen3, olmo2, "
              "mixtral, deepseek_v2, deepseek_v3, kimi_k2, glm4_moe, qwen3_moe, gpt_oss, gemma3, "
              "gemma3_text, nemotron, nemotron_h, qwen3_next, mamba2, gpt_neox, gpt2)"}});
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
            {{2, 1, "'heads' = 8 does not divide 'hidden' = 100 (config key 'n_head')"}});
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

TEST_SUITE("core") {
    const std::string hf_dir = std::string(CLEAVE_TEST_DATA_DIR) + "/examples/hf/";

    TEST_CASE(
        "hf: DeepSeek-V3 is MLA + 1 shared and 256 routed experts, 671B total, 37.6B active") {
        const ModelSpec m = load_model(hf_dir + "deepseek-v3.config.json");
        CHECK(m.mla.q_lora_rank == 1536);
        CHECK(m.mla.kv_lora_rank == 512);
        CHECK(head_dim(m) == 192);  // 128 nope + 64 rope
        CHECK(v_head_dim(m) == 128);
        CHECK(m.moe.first_dense_layers == 3);
        CHECK(m.moe.shared_ffn_hidden == 2048);
        CHECK(m.moe.router_bias);
        CHECK(m.mtp_layers == 1);
        // Attention (h = 7168, a = 128): q_a 7168*1536 = 11,010,048 + q norm 1,536
        // + q_b 1536*128*192 = 37,748,736 + kv_a 7168*(512+64) = 4,128,768 + kv norm 512
        // + kv_b 512*128*(128+128) = 16,777,216 + o 128*128*7168 = 117,440,512 = 187,107,328.
        CHECK(params_attention(m) == 187107328);
        // Dense layer: 187,107,328 + norms 14,336 + 3*7168*18432 = 396,361,728 = 583,483,392.
        CHECK(params_layer(m, 0) == 583483392);
        // MoE layer: 187,107,328 + 14,336 + router 256*7168 + 256 bias = 1,835,264
        // + shared 3*7168*2048 = 44,040,192 + 256 experts * 44,040,192 = 11,274,289,152
        // = 11,507,286,272.
        CHECK(params_layer(m, 3) == 11507286272);
        // 3 * 583,483,392 + 58 * 11,507,286,272 = 669,173,053,952; + embedding and head
        // 2 * 129280*7168 = 1,853,358,080 + final norm 7,168 = 671,026,419,200: the card's 671B
        // main model (MTP apart).
        CHECK(params_total(m) == 671026419200);
        // Active MoE layer: 187,107,328 + 14,336 + 1,835,264 + 44,040,192 + 8 * 44,040,192
        // = 585,318,656; 3 dense layers 1,750,450,176 + 58 * 585,318,656 = 33,948,482,048
        // + 1,853,365,248 = 37,552,297,472 (card: 37B activated; 1.5% above, the card rounds).
        CHECK(params_active(m) == 37552297472);
        // MTP: one MoE block 11,507,286,272 + eh_proj 2*7168^2 = 102,760,448 + 3 norms 21,504
        // = 11,610,068,224; with the embedding and head copies the HF checkpoint stores
        // (1,853,358,080) the module is 13.46B and the checkpoint 684.5B ("685B" on the card).
        CHECK(params_mtp(m) == 11610068224);
    }

    TEST_CASE("hf: Qwen3-MoE states head_dim, has q/k norms and no shared expert") {
        const ModelSpec big = load_model(hf_dir + "qwen3-235b-a22b.config.json");
        CHECK(head_dim(big) == 128);  // 64 heads * 128 = 8192 != hidden 4096
        CHECK(big.qk_norm);
        CHECK(big.moe.shared_ffn_hidden == 0);
        // Attention: q 4096*8192 = 33,554,432, k and v 2 * 4096*512 = 4,194,304, o 33,554,432,
        // q/k norms 2*128 = 71,303,424. Layer: + norms 8,192 + router 128*4096 = 524,288
        // + 128 experts * 3*4096*1536 (18,874,368) = 2,415,919,104 = 2,487,755,008.
        CHECK(params_attention(big) == 71303424);
        CHECK(params_layer(big, 0) == 2487755008);
        // 94 * 2,487,755,008 = 233,848,970,752 + 2 * 151936*4096 = 1,244,659,712 + 4,096
        // = 235,093,634,560 (card: 235B). Active: 71,303,424 + 8,192 + 524,288 + 8 * 18,874,368
        // = 222,830,848; * 94 = 20,946,099,712 + 1,244,663,808 = 22,190,763,520 (card: 22B).
        CHECK(params_total(big) == 235093634560);
        CHECK(params_active(big) == 22190763520);
        const ModelSpec small = load_model(hf_dir + "qwen3-30b-a3b.config.json");
        // Layer: q 2048*4096 = 8,388,608 + k,v 2*2048*512 = 2,097,152 + o 8,388,608 + 256
        // + norms 4,096 + router 262,144 + 128 * 3*2048*768 (4,718,592) = 623,120,640;
        // 48 layers 29,909,790,720 + 2 * 151936*2048 = 622,329,856 + 2,048 = 30,532,122,624
        // (card: 30.5B). Active: 18,874,624 + 4,096 + 262,144 + 8 * 4,718,592 = 56,889,600;
        // * 48 = 2,730,700,800 + 622,331,904 = 3,353,032,704 (card: 3.3B).
        CHECK(params_total(small) == 30532122624);
        CHECK(params_active(small) == 3353032704);
    }

    TEST_CASE("hf: GPT-OSS alternates sliding and full attention, with biases and sinks") {
        const ModelSpec m = load_model(hf_dir + "gpt-oss-120b.config.json");
        CHECK(m.sliding_window == 128);
        CHECK(windowed_layer_count(m) == 18);
        CHECK(is_windowed_layer(m, 0));
        CHECK_FALSE(is_windowed_layer(m, 1));
        CHECK(m.moe.top_k == 4);
        CHECK(m.attention_sinks);
        // Attention: q 2880*4096 = 11,796,480 + k,v 2*2880*512 = 2,949,120 + o 11,796,480
        // + biases 4096 + 2*512 + 2880 = 8,000 + 64 sinks = 26,550,144 (36 layers: the card's
        // 0.96B attention).
        CHECK(params_attention(m) == 26550144);
        // Expert: 3*2880*2880 = 24,883,200 + biases 2*2880 + 2880 = 24,891,840; router
        // 2880*128 + 128 = 368,768; layer 26,550,144 + 5,760 + 368,768 + 128 * 24,891,840
        // (3,186,155,520) = 3,213,080,192; MLP + router * 36 = 114,714,874,368 (card: 114.71B).
        CHECK(params_layer(m, 0) == 3213080192);
        // 36 * 3,213,080,192 = 115,670,886,912 + 2 * 201088*2880 = 1,158,266,880 + 2,880
        // = 116,829,156,672: Table 1 of the gpt-oss model card, 116.83B.
        CHECK(params_total(m) == 116829156672);
        // Active: 26,550,144 + 5,760 + 368,768 + 4 * 24,891,840 = 126,492,032; * 36
        // = 4,553,713,152 + 1,158,266,880 + 2,880 = 5,711,982,912. The card's 5.13B active
        // leaves out the input embedding (a lookup) but keeps the unembedding:
        // 5,711,982,912 - 579,133,440 = 5,132,849,472.
        CHECK(params_active(m) == 5711982912);
        CHECK(params_active(m) - m.vocab * m.hidden == 5132849472);
        const ModelSpec small = load_model(hf_dir + "gpt-oss-20b.config.json");
        // 24 * (26,550,144 + 5,760 + 2880*32 + 32 + 32 * 24,891,840) = 24 * 823,186,976
        // = 19,756,487,424 + 1,158,269,760 = 20,914,757,184 (card: 20.91B); active minus the
        // embedding 3,608,307,264 (card: 3.61B).
        CHECK(params_total(small) == 20914757184);
        CHECK(params_active(small) - small.vocab * small.hidden == 3608307264);
    }

    TEST_CASE("hf: the DeepSeek-V3 and gpt-oss-120b configs match their TOML twins") {
        const std::string dir = std::string(CLEAVE_TEST_DATA_DIR) + "/examples/";
        for (const char* name : {"deepseek-v3", "gpt-oss-120b"}) {
            CAPTURE(name);
            const ModelSpec hf = load_model(dir + "hf/" + name + ".config.json");
            ModelSpec toml = load_model(dir + name + ".toml");
            toml.name = hf.name;
            CHECK(hf == toml);
        }
    }

    TEST_CASE("hf: DeepSeek-V2-Lite's null q_lora_rank is a plain q projection") {
        // deepseek-ai/DeepSeek-V2-Lite config.json, architecture keys (published values)
        const ModelSpec m = parse_model_hf_json(R"({
  "model_type": "deepseek_v2", "hidden_size": 2048, "intermediate_size": 10944,
  "kv_lora_rank": 512, "max_position_embeddings": 163840, "moe_intermediate_size": 1408,
  "moe_layer_freq": 1, "n_routed_experts": 64, "n_shared_experts": 2,
  "num_attention_heads": 16, "num_experts_per_tok": 6, "num_hidden_layers": 27,
  "num_key_value_heads": 16, "q_lora_rank": null, "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64, "v_head_dim": 128, "first_k_dense_replace": 1,
  "topk_method": "greedy", "tie_word_embeddings": false, "vocab_size": 102400
})",
                                                "v2-lite.json");
        CHECK(m.mla.q_lora_rank == 0);
        CHECK_FALSE(m.moe.router_bias);
        CHECK(m.moe.shared_ffn_hidden == 2 * 1408);
        // q_proj 2048*16*192 = 6,291,456 + kv_a 2048*576 = 1,179,648 + 512 + kv_b
        // 512*16*256 = 2,097,152 + o 16*128*2048 = 4,194,304 = 13,763,072.
        CHECK(params_attention(m) == 13763072);
        // Layer 0 dense: + 4,096 + 3*2048*10944 = 67,239,936 -> 81,007,104. MoE layers:
        // 13,763,072 + 4,096 + 64*2048 + 3*2048*2816 + 64 * 3*2048*1408 = 13,763,072 + 4,096
        // + 131,072 + 17,301,504 + 553,648,128 = 584,847,872. 26 of them 15,206,044,672
        // + 81,007,104 + 2 * 102400*2048 = 419,430,400 + 2,048 = 15,706,484,224 (card: 15.7B).
        CHECK(params_total(m) == 15706484224);
    }

    TEST_CASE("hf: MoE configs with missing or inconsistent keys name the key") {
        expect_diagnostics(
            [] {
                (void)parse_model_hf_json(R"({
  "model_type": "deepseek_v3", "hidden_size": 64, "intermediate_size": 128,
  "max_position_embeddings": 32, "num_attention_heads": 4, "num_hidden_layers": 2,
  "vocab_size": 100, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
  "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
  "n_shared_experts": 1, "first_k_dense_replace": 1
})",
                                          "ds.json");
            },
            {{1, 1, "missing required key 'q_lora_rank' (null for a plain q projection)"},
             {1, 1, "missing required key 'v_head_dim'"}});
        expect_diagnostics(
            [] {
                (void)parse_model_hf_json(R"({
  "model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 128, "head_dim": 16,
  "max_position_embeddings": 32, "num_attention_heads": 4, "num_key_value_heads": 3,
  "num_hidden_layers": 2, "vocab_size": 100, "num_experts": 4, "num_experts_per_tok": 8,
  "moe_intermediate_size": 32
})",
                                          "q.json");
            },
            {{3,
              60,
              "'kv_heads' = 3 does not divide 'heads' = 4 (config key 'num_key_value_heads')"},
             {4,
              64,
              "'top_k' = 8 must be between 1 and 'experts' = 4 (config key "
              "'num_experts_per_tok')"}});
        expect_diagnostics(
            [] {
                (void)parse_model_hf_json(R"({
  "model_type": "gpt_oss", "hidden_size": 64, "intermediate_size": 64, "head_dim": 16,
  "max_position_embeddings": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
  "num_hidden_layers": 2, "vocab_size": 100, "num_local_experts": 4,
  "num_experts_per_tok": 2, "experts_per_token": 3, "sliding_window": 8,
  "layer_types": ["sliding_attention", "full_attention", "full_attention"]
})",
                                          "o.json");
            },
            {{5, 29, "'experts_per_token' = 3 disagrees with 'num_experts_per_tok' = 2"},
             {6, 3, "'layer_types' lists 3 layers, 'num_hidden_layers' = 2"}});
    }
}
