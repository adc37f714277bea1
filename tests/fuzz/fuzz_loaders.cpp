// libFuzzer entry point: every loader must either succeed or throw ConfigError on any input.
// Any other exception escapes and aborts, which libFuzzer reports as a crash, as it does for
// memory errors (ASan) and undefined behaviour (UBSan).
#include "core/errors.hpp"
#include "core/load.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace {

template <class F>
void expect_config_error_or_success(F&& load) {
    try {
        load();
    } catch (const cleave::ConfigError&) {
        // bad input, reported as such: fine
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    expect_config_error_or_success([&] { (void)cleave::parse_model_toml(text, "fuzz.toml"); });
    expect_config_error_or_success([&] { (void)cleave::parse_cluster_toml(text, "fuzz.toml"); });
    expect_config_error_or_success([&] { (void)cleave::parse_job_toml(text, "fuzz.toml"); });
    expect_config_error_or_success([&] { (void)cleave::parse_model_hf_json(text, "fuzz.json"); });
    return 0;
}
