#include "core/model.hpp"

#include <doctest/doctest.h>

using namespace cleave;

TEST_SUITE("core") {
    TEST_CASE("model: GPT-3 175B has 174.6B parameters") {
        ModelSpec m;
        m.layers = 96;
        m.hidden = 12288;
        m.heads = 96;
        m.kv_heads = 96;
        m.ffn_hidden = 4 * 12288;
        m.vocab = 51200;
        m.seq_len = 2048;
        // per layer 12h^2 + 13h = 12*12288^2 + 13*12288 = 1,812,099,072 (Narayanan et al. 2021)
        CHECK(params_per_layer(m) == 1812099072);
        // 96 layers + V*h 629,145,600 + s*h 25,165,824 + final LN 2h 24,576 = 174,615,846,912
        CHECK(params_total(m) == 174615846912);
    }

    TEST_CASE("model: Llama-2-70B has 68.98B parameters") {
        ModelSpec m;
        m.layers = 80;
        m.hidden = 8192;
        m.heads = 64;
        m.kv_heads = 8;
        m.ffn_hidden = 28672;
        m.vocab = 32000;
        m.seq_len = 4096;
        m.mlp = MlpKind::swiglu;
        m.norm = NormKind::rmsnorm;
        m.positions = PositionKind::rope;
        m.tied_embeddings = false;
        m.linear_bias = false;
        // attn 2h^2 + 2h*1024 = 150,994,944; mlp 3*h*f = 704,643,072; norms 2h = 16,384
        CHECK(params_per_layer(m) == 855654400);
        // 80 layers 68,452,352,000 + 2*V*h 524,288,000 + final norm 8,192
        CHECK(params_total(m) == 68976648192);
    }
}
