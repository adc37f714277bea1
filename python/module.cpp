// `import cleave`: the commands that price, search and simulate, called from Python with keyword
// arguments that mirror the CLI flags (gbs=128 is --gbs 128, allow_tp_cross_node=True is
// --allow-tp-cross-node) and returning what the command's --format json prints, as dicts and
// lists. Runs the same CLI code in process, so the two cannot drift apart. Links no executor:
// importing it loads neither MPI nor CUDA.
#include "cli/app.hpp"
#include "cli/commands.hpp"
#include "core/errors.hpp"

#include <memory>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace py = pybind11;

namespace {

using Args = std::vector<std::string>;

/// The light application: every command but run, calibrate and validate (they need MPI).
std::unique_ptr<CLI::App> light_app(cleave::cli::CliContext& ctx) {
    auto app = std::make_unique<CLI::App>("cleave (Python)");
    app->require_subcommand(1);
    cleave::cli::setup_model(*app, ctx);
    cleave::cli::setup_hw(*app, ctx);
    cleave::cli::setup_stack(*app, ctx);
    cleave::cli::setup_explain(*app, ctx);
    cleave::cli::setup_plan(*app, ctx);
    cleave::cli::setup_compare(*app, ctx);
    cleave::cli::setup_simulate(*app, ctx);
    cleave::cli::setup_published(*app, ctx);
    cleave::cli::setup_report(*app, ctx);
    return app;
}

py::object to_python(const nlohmann::json& j) {
    switch (j.type()) {
    case nlohmann::json::value_t::null:
        return py::none();
    case nlohmann::json::value_t::boolean:
        return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
        return py::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
        return py::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float:
        return py::float_(j.get<double>());
    case nlohmann::json::value_t::string:
        return py::str(j.get<std::string>());
    case nlohmann::json::value_t::array: {
        py::list l;
        for (const auto& x : j) {
            l.append(to_python(x));
        }
        return l;
    }
    case nlohmann::json::value_t::object: {
        py::dict d;
        for (const auto& [k, v] : j.items()) {
            d[py::str(k)] = to_python(v);
        }
        return d;
    }
    default:
        return py::none();
    }
}

/// --flag VALUE pairs from keyword arguments: underscores become dashes, True is a bare flag,
/// False and None are left out, a list gives one value after the flag per item.
void add_kwargs(Args& argv, const py::kwargs& kw) {
    for (const auto& [key, value] : kw) {
        std::string flag = "--" + py::str(key).cast<std::string>();
        for (char& c : flag) {
            c = c == '_' ? '-' : c;
        }
        if (value.is_none()) {
            continue;
        }
        if (py::isinstance<py::bool_>(value)) {
            if (value.cast<bool>()) {
                argv.push_back(flag);
            }
            continue;
        }
        argv.push_back(flag);
        if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
            for (const auto& item : value) {
                argv.push_back(py::str(item).cast<std::string>());
            }
        } else {
            argv.push_back(py::str(value).cast<std::string>());
        }
    }
}

/// Raises cleave.ConfigError with file, line, column (of the first diagnostic) and every
/// diagnostic as a list of dicts.
[[noreturn]] void raise_config_error(const cleave::ConfigError& e) {
    const py::object type = py::module_::import("cleave").attr("ConfigError");
    py::object exc = type(std::string(e.what()));
    py::list diags;
    for (const cleave::Diagnostic& d : e.diagnostics()) {
        py::dict x;
        x["file"] = d.where.file;
        x["line"] = d.where.line;
        x["column"] = d.where.column;
        x["message"] = d.message;
        diags.append(x);
    }
    const cleave::Diagnostic first =
        e.diagnostics().empty() ? cleave::Diagnostic{} : e.diagnostics().front();
    exc.attr("file") =
        first.where.file.empty() ? py::object(py::none()) : py::str(first.where.file);
    exc.attr("line") = first.where.line > 0 ? py::object(py::int_(first.where.line)) : py::none();
    exc.attr("column") =
        first.where.column > 0 ? py::object(py::int_(first.where.column)) : py::none();
    exc.attr("diagnostics") = diags;
    PyErr_SetObject(type.ptr(), exc.ptr());
    throw py::error_already_set();
}

/// Runs one command with --format json (unless `json` is false) and returns its parsed output.
py::object run(Args argv, const py::kwargs& kw, bool json = true) {
    add_kwargs(argv, kw);
    if (json && !kw.contains("format")) {
        argv.insert(argv.end(), {"--format", "json"});
    }
    argv.insert(argv.begin(), "cleave");
    std::vector<const char*> cargv;
    for (const std::string& a : argv) {
        cargv.push_back(a.c_str());
    }
    std::ostringstream out;
    std::ostringstream err;
    cleave::cli::CliContext ctx{out, err};
    auto app = light_app(ctx);
    try {
        app->parse(static_cast<int>(cargv.size()), cargv.data());
    } catch (const CLI::ParseError& e) {
        // A bad keyword or value: the CLI's own message ("--gbs: Value 0 not in range ...").
        raise_config_error(cleave::ConfigError(e.what()));
    } catch (const cleave::ConfigError& e) {
        raise_config_error(e);
    }
    if (!json) {
        return py::none();  // report: the page is in the file given with out=
    }
    if (out.str().empty()) {
        throw std::runtime_error("cleave " + argv[1] + ": " + err.str());
    }
    return to_python(nlohmann::json::parse(out.str()));
}

Args positional(std::initializer_list<std::string> cmd, const py::args& args) {
    Args a(cmd);
    for (const auto& x : args) {
        a.push_back(py::str(x).cast<std::string>());
    }
    return a;
}

}  // namespace

PYBIND11_MODULE(cleave, m) {
    m.doc() = "cleave: plan, price and simulate data/tensor/pipeline-parallel LLM training. "
              "Each function mirrors the command of the same name and returns its JSON.";
    // class ConfigError(ValueError) with file, line, column, diagnostics (set when raised).
    py::object value_error = py::module_::import("builtins").attr("ValueError");
    py::object config_error = py::reinterpret_steal<py::object>(
        PyErr_NewExceptionWithDoc("cleave.ConfigError",
                                  "Bad input: .file, .line, .column (first problem) and "
                                  ".diagnostics (every problem).",
                                  value_error.ptr(),
                                  nullptr));
    m.attr("ConfigError") = config_error;
    m.def(
        "plan",
        [](const py::args& a, const py::kwargs& kw) { return run(positional({"plan"}, a), kw); },
        "plan(model, cluster, gpus=..., gbs=..., top=10, objective='time', ...): cleave plan's "
        "JSON "
        "(a dict; ['plans'] is the list of ranked plans)");
    m.def(
        "explain",
        [](const py::args& a, const py::kwargs& kw) { return run(positional({"explain"}, a), kw); },
        "explain(model, cluster, gpus=..., gbs=..., tp=1, pp=1, ...): cleave explain's JSON");
    m.def(
        "simulate",
        [](const py::args& a, const py::kwargs& kw) {
            return run(positional({"simulate"}, a), kw);
        },
        "simulate(model, cluster, gpus=..., gbs=..., tp=1, pp=1, ...): cleave simulate's JSON");
    m.def(
        "compare",
        [](const py::args& a, const py::kwargs& kw) { return run(positional({"compare"}, a), kw); },
        "compare(model, clusters=[...], gpus=..., gbs=...): cleave compare's JSON");
    m.def(
        "published",
        [](const py::args& a, const py::kwargs& kw) {
            return run(positional({"published"}, a), kw);
        },
        "published([csv]): cleave published's JSON (predicted against published runs)");
    m.def(
        "load_model",
        [](const py::args& a, const py::kwargs& kw) { return run(positional({"model"}, a), kw); },
        "load_model(path): cleave model's JSON (parameter counts and shape)");
    m.def(
        "load_cluster",
        [](const py::args& a, const py::kwargs& kw) {
            return run(positional({"hw", "show"}, a), kw);
        },
        "load_cluster(name_or_path): cleave hw show's JSON (the profile in display units)");
    m.def(
        "report",
        [](const py::args& a, const py::kwargs& kw) {
            return run(positional({"report"}, a), kw, false);
        },
        "report(model, cluster, gpus=..., gbs=..., out='plan.html'): writes cleave report's page");
}
