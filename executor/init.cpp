#include "executor/init.hpp"

namespace cleave::executor {

namespace {

uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

}  // namespace

uint64_t tensor_id(std::string_view name) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char c : name) {
        h ^= static_cast<unsigned char>(c);
        h *= 0x100000001b3ULL;
    }
    return h;
}

float uniform_pm1(uint64_t seed, uint64_t id, uint64_t index) {
    const uint64_t r = mix(mix(seed ^ mix(id)) ^ index);
    // 24 random bits -> [0, 1), exactly representable in float.
    const auto u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);
    return 2.0f * u - 1.0f;
}

int32_t token_at(uint64_t seed, int64_t iteration, int64_t sequence, int64_t pos, int64_t vocab) {
    const uint64_t r = mix(mix(mix(seed ^ 0x746f6b656e73ULL) ^ static_cast<uint64_t>(iteration)) ^
                           (static_cast<uint64_t>(sequence) << 24 ^ static_cast<uint64_t>(pos)));
    return static_cast<int32_t>(r % static_cast<uint64_t>(vocab));
}

}  // namespace cleave::executor
