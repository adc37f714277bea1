// TODO(#2): the real loaders replace this file (helper in progress).
#include "core/load.hpp"

#include "core/errors.hpp"

namespace cleave {

ModelSpec load_model(const std::filesystem::path& file) {
    throw ConfigError(file.string() + ": loader not implemented yet");
}

ModelSpec parse_model_toml(std::string_view, const std::string& source_name) {
    throw ConfigError(source_name + ": loader not implemented yet");
}

ModelSpec parse_model_hf_json(std::string_view, const std::string& source_name) {
    throw ConfigError(source_name + ": loader not implemented yet");
}

ClusterSpec load_cluster(const std::string& name_or_path) {
    throw ConfigError(name_or_path + ": loader not implemented yet");
}

ClusterSpec parse_cluster_toml(std::string_view, const std::string& source_name) {
    throw ConfigError(source_name + ": loader not implemented yet");
}

JobSpec load_job(const std::filesystem::path& file) {
    throw ConfigError(file.string() + ": loader not implemented yet");
}

JobSpec parse_job_toml(std::string_view, const std::string& source_name) {
    throw ConfigError(source_name + ": loader not implemented yet");
}

std::vector<std::string> validate(const ModelSpec&) { return {}; }

std::vector<std::filesystem::path> hwprofile_dirs() { return {}; }

std::vector<std::string> shipped_profiles() { return {}; }

}  // namespace cleave
