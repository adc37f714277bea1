#pragma once
// Loading models, hardware profiles and jobs from files. Every function throws ConfigError
// holding every problem of the file (file:line:col and the key) at once.

#include "core/cluster.hpp"
#include "core/job.hpp"
#include "core/model.hpp"

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace cleave {

/// A cleave model TOML, or a Hugging Face config.json (chosen by the extension ".json").
[[nodiscard]] ModelSpec load_model(const std::filesystem::path& file);

/// Parse model TOML text; `source_name` is used in diagnostics.
[[nodiscard]] ModelSpec parse_model_toml(std::string_view text, const std::string& source_name);

/// Parse a Hugging Face config.json text (Llama, Mistral, Qwen2, GPT-NeoX, GPT-2, Mixtral).
[[nodiscard]] ModelSpec parse_model_hf_json(std::string_view text, const std::string& source_name);

/// A hardware profile: a path to a TOML file, or the name of a shipped profile
/// (looked up in the hwprofiles directory, see hwprofile_dirs()).
[[nodiscard]] ClusterSpec load_cluster(const std::string& name_or_path);

/// Parse hardware-profile TOML text.
[[nodiscard]] ClusterSpec parse_cluster_toml(std::string_view text, const std::string& source_name);

/// A job TOML file ([job] gpus, global_batch, seq_len, dtypes, optimizer).
[[nodiscard]] JobSpec load_job(const std::filesystem::path& file);

/// Parse job TOML text.
[[nodiscard]] JobSpec parse_job_toml(std::string_view text, const std::string& source_name);

/// Every problem with a model's values (sizes > 0, heads | hidden, kv_heads | heads, MoE
/// fields consistent). Locations are left empty; loaders fill them in.
[[nodiscard]] std::vector<std::string> validate(const ModelSpec& m);

/// Directories searched for shipped profiles, in order: $CLEAVE_HWPROFILES, the source tree's
/// hwprofiles/ (compiled in), and <prefix>/share/cleave/hwprofiles.
[[nodiscard]] std::vector<std::filesystem::path> hwprofile_dirs();

/// Names of the shipped profiles found in hwprofile_dirs(), sorted.
[[nodiscard]] std::vector<std::string> shipped_profiles();

}  // namespace cleave
