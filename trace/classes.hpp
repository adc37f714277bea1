#pragma once
// Kernel classes: which kind of work a GPU kernel does, from its name. The patterns are data
// (trace/kernel-classes.toml, each with the library that launches the kernel), tried in order,
// the first match winning; a user's own table (--classes FILE) is tried before the shipped one,
// so a kernel is added or reclassified without a rebuild.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cleave::trace {

/// The classes `cleave trace` reports (DESIGN §3 by_class_ms), in print order.
enum class Class : uint8_t {
    gemm,
    attention,
    quantize,      // FP8 / FP4 casts, scales, transposes of quantised operands
    norm,          // LayerNorm, RMSNorm
    activation,    // GeLU, SwiGLU, SiLU
    elementwise,   // adds, copies, RoPE, dropout, fused pointwise (Triton poi)
    moe_permute,   // MoE router top-k, permute / unpermute, token counting
    convolution,
    embedding,
    optimizer,     // Adam / multi-tensor apply
    loss,          // cross-entropy
    communication, // NCCL / RCCL collectives, DeepEP, NVSHMEM
    memcpy,        // copy-engine memcpy / memset (no SMs)
    other,         // named by a rule as other, or matched by none (unclassified)
};
inline constexpr size_t kClasses = 14;

[[nodiscard]] const char* to_string(Class c);

/// True for the classes that compute on the SMs (all but communication and memcpy).
[[nodiscard]] constexpr bool is_compute(Class c) {
    return c != Class::communication && c != Class::memcpy;
}

struct Rule {
    Class cls = Class::other;
    std::string library;                // who launches it: "cuBLAS", "DeepGEMM", "NCCL", ...
    std::vector<std::string> contains;  // any of these substrings (case-sensitive) matches
    std::string dtype;                  // GEMM dtype the rule fixes ("" = read from the name)
    std::string op;                     // communication: all_reduce, all_gather, ...
    std::string source;                 // "file:line" of the rule

    bool operator==(const Rule&) const = default;
};

/// A dtype read from a GEMM kernel's name: the first rule whose substring it holds.
struct DtypeRule {
    std::string dtype;
    std::vector<std::string> contains;

    bool operator==(const DtypeRule&) const = default;
};

struct ClassTable {
    std::vector<Rule> rules;
    std::vector<DtypeRule> dtypes;
    std::vector<std::string> files;  // where the rules came from, user file first

    bool operator==(const ClassTable&) const = default;
};

struct Classified {
    Class cls = Class::other;
    bool matched = false;  // false: no rule matched (unclassified)
    std::string library;
    std::string dtype;  // GEMMs: bf16, fp16, fp8, fp4, fp32, tf32, int8; "" unknown
    std::string op;     // communication: the collective

    bool operator==(const Classified&) const = default;
};

/// Parses a class table; throws ConfigError naming file:line:col and key.
[[nodiscard]] ClassTable parse_class_table(std::string_view text, const std::string& name);

/// The shipped table (trace/kernel-classes.toml beside the sources or installed), with `user`
/// (a path, "" for none) tried first.
[[nodiscard]] ClassTable load_class_table(const std::string& user = "");

[[nodiscard]] Classified classify(const ClassTable& t, std::string_view kernel_name);

}  // namespace cleave::trace
