#pragma once
// Runs the cleave command line in process (cli::run_cli) and keeps its exit code, stdout and
// stderr: the one helper the CLI tests share.

#include "cli/app.hpp"

#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace cleave::test {

struct CliRun {
    int code = -1;
    std::string out;
    std::string err;
};

/// `cleave ARGS...` in this process; args excludes the program name.
inline CliRun run_cleave(std::vector<std::string> args) {
    args.insert(args.begin(), "cleave");
    std::vector<const char*> argv;
    argv.reserve(args.size());
    for (const auto& a : args) {
        argv.push_back(a.c_str());
    }
    std::ostringstream out;
    std::ostringstream err;
    cli::CliContext ctx{out, err};
    CliRun r;
    r.code = cli::run_cli(static_cast<int>(argv.size()), argv.data(), ctx);
    r.out = out.str();
    r.err = err.str();
    return r;
}

/// The "cautions" of an explain or plan JSON answer, each followed by a newline ("" if none).
inline std::string joined_cautions(const std::string& json_out) {
    std::string all;
    for (const auto& c : nlohmann::json::parse(json_out).value("cautions", nlohmann::json::array())) {
        all += c.get<std::string>() + "\n";
    }
    return all;
}

}  // namespace cleave::test
