// `import cleave`: Python on cleave's typed API (api/cleave.hpp), not on the command line.
// Models, clusters and jobs are objects; plan / explain / simulate / compare / published / report
// return objects with attributes, and each result's to_dict() is the JSON the CLI prints
// (DESIGN §3). Keywords are the CLI's flag names with '_' for '-' (api/options.hpp). Links no
// executor: importing it loads neither MPI nor CUDA.
#include "api/cleave.hpp"
#include "api/options.hpp"
#include "core/errors.hpp"
#include "core/load.hpp"
#include "core/stack.hpp"
#include "costmodel/estimate.hpp"

#include <memory>
#include <optional>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

namespace py = pybind11;
using nlohmann::json;

namespace {

using namespace cleave;

py::object to_python(const json& j) {
    switch (j.type()) {
    case json::value_t::null:
        return py::none();
    case json::value_t::boolean:
        return py::bool_(j.get<bool>());
    case json::value_t::number_integer:
        return py::int_(j.get<int64_t>());
    case json::value_t::number_unsigned:
        return py::int_(j.get<uint64_t>());
    case json::value_t::number_float:
        return py::float_(j.get<double>());
    case json::value_t::string:
        return py::str(j.get<std::string>());
    case json::value_t::array: {
        py::list l;
        for (const auto& x : j) {
            l.append(to_python(x));
        }
        return l;
    }
    case json::value_t::object: {
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

std::string text_of(const py::handle& v) {
    const py::object os = py::module_::import("os");
    if (py::isinstance(v, os.attr("PathLike"))) {
        return py::str(os.attr("fspath")(v)).cast<std::string>();
    }
    return py::str(v).cast<std::string>();
}

/// cleave.Stack: a software stack (shipped name or TOML path) as a value.
struct PyStack {
    SoftwareStack spec;
    std::string given;  // what it was loaded from: passed on as the job's stack option
};

/// A Python keyword value as an option value: bool, int, float, str (a list or tuple of strings
/// is joined with commas, as --recompute-modules takes them; a path is its text).
api::OptionValue option_value(const py::handle& v) {
    if (py::isinstance<PyStack>(v)) {
        return v.cast<const PyStack&>().given;
    }
    if (py::isinstance<py::bool_>(v)) {
        return v.cast<bool>();
    }
    if (py::isinstance<py::int_>(v)) {
        return v.cast<int64_t>();
    }
    if (py::isinstance<py::float_>(v)) {
        return v.cast<double>();
    }
    if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
        std::string s;
        for (const auto& x : v) {
            s += (s.empty() ? "" : ",") + text_of(x);
        }
        return s;
    }
    return text_of(v);
}

// --- values -----------------------------------------------------------------------------------

/// cleave.Model: a model from a file, a dict, or keyword fields.
struct PyModel {
    ModelSpec spec;
};

/// A dict (or keywords) as a TOML table, so the model loader checks it as it checks a file.
toml::table toml_of(const py::dict& d, const std::string& where);

toml::array toml_array(const py::handle& l, const std::string& where) {
    toml::array a;
    for (const auto& x : l) {
        if (py::isinstance<py::bool_>(x)) {
            a.push_back(x.cast<bool>());
        } else if (py::isinstance<py::int_>(x)) {
            a.push_back(x.cast<int64_t>());
        } else if (py::isinstance<py::float_>(x)) {
            a.push_back(x.cast<double>());
        } else if (py::isinstance<py::dict>(x)) {
            a.push_back(toml_of(x.cast<py::dict>(), where));
        } else {
            a.push_back(py::str(x).cast<std::string>());
        }
    }
    return a;
}

toml::table toml_of(const py::dict& d, const std::string& where) {
    toml::table t;
    for (const auto& [k, v] : d) {
        const std::string key = py::str(k).cast<std::string>();
        if (v.is_none()) {
            continue;
        }
        if (py::isinstance<py::bool_>(v)) {
            t.insert(key, v.cast<bool>());
        } else if (py::isinstance<py::int_>(v)) {
            t.insert(key, v.cast<int64_t>());
        } else if (py::isinstance<py::float_>(v)) {
            t.insert(key, v.cast<double>());
        } else if (py::isinstance<py::dict>(v)) {
            t.insert(key, toml_of(v.cast<py::dict>(), where + "." + key));
        } else if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
            t.insert(key, toml_array(v, where + "." + key));
        } else {
            t.insert(key, py::str(v).cast<std::string>());
        }
    }
    return t;
}

ModelSpec model_from_dict(const py::dict& d) {
    if (d.contains("model_type") || d.contains("architectures")) {
        // A Hugging Face config.json as a dict.
        const std::string text = py::module_::import("json").attr("dumps")(d).cast<std::string>();
        return parse_model_hf_json(text, "config.json (dict)");
    }
    toml::table root;
    if (d.contains("model")) {
        root = toml_of(d, "");
    } else {
        root.insert("model", toml_of(d, "model"));
    }
    std::ostringstream text;
    text << root;
    ModelSpec m = parse_model_toml(text.str(), "cleave.Model(keywords)");
    if (!root["model"]["name"]) {
        m.name = "model";  // a label only (a file's model is named after the file)
    }
    return m;
}

PyModel make_model(const py::object& source, const py::kwargs& fields) {
    if (!source.is_none() && !fields.empty()) {
        throw ConfigError("cleave.Model: give a path, a dict, or keyword fields, not both");
    }
    if (source.is_none()) {
        if (fields.empty()) {
            throw ConfigError("cleave.Model: give a path (cleave TOML or config.json), a dict, or "
                              "keyword fields (layers=, hidden=, heads=, ffn_hidden=, vocab=, ...)");
        }
        return {model_from_dict(py::dict(fields))};
    }
    if (py::isinstance<py::dict>(source)) {
        return {model_from_dict(source.cast<py::dict>())};
    }
    return {load_model(text_of(source))};
}

const ModelSpec& model_of(const py::object& m, std::optional<ModelSpec>& holder) {
    if (py::isinstance<PyModel>(m)) {
        return m.cast<const PyModel&>().spec;
    }
    holder = make_model(m, py::kwargs()).spec;
    return *holder;
}

/// cleave.Cluster: a hardware profile (shipped name or TOML path).
struct PyCluster {
    ClusterSpec spec;
};

ClusterSpec cluster_of(const py::object& c) {
    if (py::isinstance<PyCluster>(c)) {
        return c.cast<const PyCluster&>().spec;
    }
    return load_cluster(text_of(c));
}

/// cleave.Job: job options by name, checked when given.
struct PyJob {
    py::dict options;
};

/// Sets each option of `d` (None: left out), checked as the CLI's flag is.
void apply_options(api::NamedOptions& o, const py::dict& d) {
    for (const auto& [k, v] : d) {
        if (!v.is_none()) {
            api::set_option(o, py::str(k).cast<std::string>(), option_value(v));
        }
    }
}

/// Job options, then keyword flags, into named options (each checked as it is set).
api::NamedOptions named(const py::object& job, const py::kwargs& flags) {
    api::NamedOptions o;
    const auto apply = [&o](const py::dict& d) { apply_options(o, d); };
    if (!job.is_none()) {
        if (py::isinstance<PyJob>(job)) {
            apply(job.cast<const PyJob&>().options);
        } else if (py::isinstance<py::dict>(job)) {
            apply(job.cast<py::dict>());
        } else {
            throw ConfigError("job: expected a cleave.Job or a dict of job options");
        }
    }
    apply(flags);
    return o;
}

api::Inputs inputs(const py::object& model, const py::object& cluster, const api::NamedOptions& o) {
    std::optional<ModelSpec> holder;
    const ModelSpec& m = model_of(model, holder);
    if (o.job.gpus <= 0) {
        throw ConfigError("gpus: the number of GPUs is required (gpus=32)");
    }
    return api::load_inputs(o.job, m, cluster_of(cluster));
}

// --- results ----------------------------------------------------------------------------------

/// Memory per GPU in GiB, at the stage with the highest peak.
struct MemoryGiB {
    double weights, grads, optimizer, activations, logits, comm_buffers, reserved, total,
        peak_allocated, peak_reserved, allocator;
};

struct PyRisk {
    std::string kind, message, fix;
};

/// One priced plan: its dimensions, time, memory and risks, and to_dict() (explain's JSON).
struct PyPlan {
    api::Inputs inputs;
    Plan plan;
    Estimate estimate;
    json dict;

    [[nodiscard]] MemoryGiB memory() const {
        const MemoryBreakdown& m = estimate.memory;
        return {to_gib(m.weights),     to_gib(m.grads),        to_gib(m.optimizer),
                to_gib(m.activations), to_gib(m.logits),       to_gib(m.comm_buffers),
                to_gib(m.reserved),    to_gib(m.total),        to_gib(m.allocated),
                to_gib(m.allocated + m.allocator), to_gib(m.allocator)};
    }
    [[nodiscard]] std::vector<PyRisk> risks() const {
        std::vector<PyRisk> out;
        for (const Risk& r :
             describe_risks(inputs.model, inputs.cluster, inputs.job, plan, estimate)) {
            out.push_back({to_string(r.kind), r.message, r.fix});
        }
        return out;
    }
};

struct PyPlanResult {
    api::Planned planned;
    json dict;
    std::vector<PyPlan> plans;
};

struct PySimulation {
    api::Simulated sim;
    json dict;
};

struct PyComparison {
    api::Compared compared;
    json dict;
};

struct PyPublished {
    api::Published published;
    json dict;
};

PyPlanResult run_plan(const py::object& model,
                      const py::object& cluster,
                      const py::object& job,
                      const py::kwargs& flags) {
    api::NamedOptions o = named(job, flags);
    const api::Inputs in = inputs(model, cluster, o);
    SearchOptions so = o.search;
    so.fixed = api::fixed_dimensions(
        o.plan, [&o](std::string_view name) { return o.gave(name); }, in);
    PyPlanResult r;
    {
        py::gil_scoped_release unlock;  // a search may take seconds
        r.planned = api::plan(in, so, o.simulate);
    }
    r.dict = api::to_json(r.planned);
    const auto& ranked = r.planned.result.plans;
    for (std::size_t i = 0; i < ranked.size(); ++i) {
        r.plans.push_back({api::inputs_for(in, ranked[i].plan), ranked[i].plan, ranked[i].estimate,
                           r.dict["plans"][i]});
    }
    return r;
}

PyPlan run_explain(const py::object& model,
                   const py::object& cluster,
                   const py::object& job,
                   const py::kwargs& flags) {
    const api::NamedOptions o = named(job, flags);
    const api::Inputs in = inputs(model, cluster, o);
    const api::Explained x = api::explain(in, api::make_plan(o.plan, in));
    return {x.inputs, x.plan, x.estimate, api::to_json(x)};
}

/// Pops a keyword the search and plan options do not take.
template <class T>
T pop(py::kwargs& kw, const char* key, T fallback) {
    if (!kw.contains(key)) {
        return fallback;
    }
    const py::object v = kw[key];
    PyDict_DelItemString(kw.ptr(), key);
    return v.is_none() ? fallback : v.cast<T>();
}

std::vector<std::string> strings(const py::object& v) {
    std::vector<std::string> out;
    if (py::isinstance<py::str>(v)) {
        out.push_back(v.cast<std::string>());
        return out;
    }
    for (const auto& x : v) {
        out.push_back(text_of(x));
    }
    return out;
}

/// The table the CLI prints for a result.
template <class T>
std::string table_of(const T& x) {
    std::ostringstream os;
    api::print_table(os, x);
    return os.str();
}

std::string plan_repr(const PyPlan& p) {
    char b[160];
    std::snprintf(b, sizeof b, "<cleave.Plan %s: %.3f s/iter, MFU %.1f%%, %.1f GiB%s>",
                  to_flags(p.plan).c_str(), p.estimate.iteration_time.value(),
                  100.0 * p.estimate.mfu, to_gib(p.estimate.memory.total),
                  p.estimate.fits ? "" : ", does not fit");
    return b;
}

}  // namespace

PYBIND11_MODULE(cleave, m) {
    m.doc() = "cleave: plan, price and simulate data/tensor/pipeline-parallel LLM training.\n\n"
              "  import cleave\n"
              "  m = cleave.Model(layers=40, hidden=5120, heads=40, ffn_hidden=13824,\n"
              "                   vocab=32000, seq_len=4096, arch='llama')\n"
              "  r = cleave.plan(m, 'dgx-a100-80g', gpus=32, gbs=128)\n"
              "  best = r.plans[0]; best.tp, best.iteration_time_s, best.memory_gib.total\n\n"
              "Keywords are cleave's flag names with '_' for '-' (gbs=128 is --gbs 128); a plan "
              "keyword (tp=8) fixes that dimension of the search. Each result's to_dict() is the "
              "JSON the command prints with --format json.";

    // class ConfigError(ValueError) with file, line, column, diagnostics.
    static py::exception<ConfigError> config_error(m, "ConfigError", PyExc_ValueError);
    config_error.doc() = "Bad input: .file, .line, .column (first problem) and .diagnostics "
                         "(every problem, as dicts).";
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) {
                std::rethrow_exception(p);
            }
        } catch (const ConfigError& e) {
            py::object exc = static_cast<py::object&>(config_error)(std::string(e.what()));
            py::list diags;
            for (const Diagnostic& d : e.diagnostics()) {
                py::dict x;
                x["file"] = d.where.file;
                x["line"] = d.where.line;
                x["column"] = d.where.column;
                x["message"] = d.message;
                diags.append(x);
            }
            const Diagnostic first =
                e.diagnostics().empty() ? Diagnostic{} : e.diagnostics().front();
            exc.attr("file") =
                first.where.file.empty() ? py::object(py::none()) : py::str(first.where.file);
            exc.attr("line") =
                first.where.line > 0 ? py::object(py::int_(first.where.line)) : py::none();
            exc.attr("column") =
                first.where.column > 0 ? py::object(py::int_(first.where.column)) : py::none();
            exc.attr("diagnostics") = diags;
            PyErr_SetObject(config_error.ptr(), exc.ptr());
        }
    });

    py::class_<PyModel>(m, "Model",
                        "A model: Model(path) reads a cleave TOML or a Hugging Face config.json; "
                        "Model(dict) a config dict (Hugging Face when it has model_type) or cleave "
                        "fields; Model(layers=..., hidden=..., heads=..., ffn_hidden=..., vocab=..., "
                        "seq_len=..., arch='llama'|'gpt', ...) the [model] keys of a cleave TOML.")
        .def(py::init([](const py::object& source, const py::kwargs& fields) {
                 return make_model(source, fields);
             }),
             py::arg("source") = py::none())
        .def_property_readonly("name", [](const PyModel& x) { return x.spec.name; })
        .def_property_readonly("layers", [](const PyModel& x) { return x.spec.layers; })
        .def_property_readonly("hidden", [](const PyModel& x) { return x.spec.hidden; })
        .def_property_readonly("heads", [](const PyModel& x) { return x.spec.heads; })
        .def_property_readonly("kv_heads", [](const PyModel& x) { return x.spec.kv_heads; })
        .def_property_readonly("ffn_hidden", [](const PyModel& x) { return x.spec.ffn_hidden; })
        .def_property_readonly("vocab", [](const PyModel& x) { return x.spec.vocab; })
        .def_property_readonly("seq_len", [](const PyModel& x) { return x.spec.seq_len; })
        .def_property_readonly("params_total", [](const PyModel& x) { return params_total(x.spec); })
        .def_property_readonly("params_active",
                               [](const PyModel& x) { return params_active(x.spec); })
        .def(
            "to_dict",
            [](const PyModel& x, int64_t pp) { return to_python(api::model_to_json(x.spec, pp)); },
            py::arg("pp") = 0,
            "cleave model's JSON (with pp > 0, the parameters of each of pp even stages)")
        .def("__repr__", [](const PyModel& x) {
            return "<cleave.Model " + x.spec.name + ": " + std::to_string(x.spec.layers) +
                   " layers, hidden " + std::to_string(x.spec.hidden) + ">";
        });

    py::class_<PyCluster>(m, "Cluster", "A hardware profile: Cluster('dgx-h100') or a TOML path.")
        .def(py::init([](const py::object& name) { return PyCluster{cluster_of(name)}; }),
             py::arg("profile"))
        .def_property_readonly("name", [](const PyCluster& c) { return c.spec.name; })
        .def_property_readonly("display_name", [](const PyCluster& c) { return c.spec.display_name; })
        .def_property_readonly("gpu", [](const PyCluster& c) { return c.spec.gpu.name; })
        .def_property_readonly("gpus_per_node",
                               [](const PyCluster& c) { return c.spec.node.gpus_per_node; })
        .def_property_readonly("memory_gib",
                               [](const PyCluster& c) { return to_gib(c.spec.gpu.memory); })
        .def_property_readonly("peak_tflops_bf16",
                               [](const PyCluster& c) { return to_tflops(c.spec.gpu.peak_bf16); })
        .def("to_dict", [](const PyCluster& c) { return to_python(api::cluster_to_json(c.spec)); },
             "cleave hw show's JSON")
        .def("__repr__", [](const PyCluster& c) { return "<cleave.Cluster " + c.spec.name + ">"; });

    py::class_<PyStack>(m, "Stack",
                        "A software stack: Stack('megatron-core') or a stack TOML path; pass it "
                        "as stack= (cleave stack list names the shipped ones).")
        .def(py::init([](const py::object& name) {
                 const std::string n = text_of(name);
                 return PyStack{load_stack(n), n};
             }),
             py::arg("stack"))
        .def_property_readonly("name", [](const PyStack& s) { return s.spec.name; })
        .def_property_readonly("framework",
                               [](const PyStack& s) { return std::string(to_string(s.spec.framework)); })
        .def_property_readonly("display_name", [](const PyStack& s) { return s.spec.display_name; })
        .def("to_dict", [](const PyStack& s) { return to_python(api::stack_to_json(s.spec)); },
             "cleave stack show's JSON")
        .def("__repr__", [](const PyStack& s) { return "<cleave.Stack " + s.spec.name + ">"; });

    py::class_<PyJob>(m, "Job",
                      "A job: Job(gpus=32, gbs=128, seq=4096, dtype='bf16', stack=..., ...): any "
                      "job option of the CLI by its flag name ('_' for '-'), checked here.")
        .def(py::init([](const py::kwargs& kw) {
            api::NamedOptions check;
            apply_options(check, kw);
            return PyJob{py::dict(kw)};
        }))
        .def("__getattr__",
             [](const PyJob& j, const std::string& key) -> py::object {
                 if (j.options.contains(key)) {
                     return j.options[py::str(key)];
                 }
                 throw py::attribute_error("Job has no option '" + key + "'");
             })
        .def("to_dict", [](const PyJob& j) { return py::dict(j.options); })
        .def("__repr__",
             [](const PyJob& j) { return "cleave.Job(**" + py::repr(j.options).cast<std::string>() + ")"; });

    py::class_<MemoryGiB>(m, "MemoryGiB", "Memory per GPU in GiB at the peak stage.")
        .def_readonly("weights", &MemoryGiB::weights)
        .def_readonly("grads", &MemoryGiB::grads)
        .def_readonly("optimizer", &MemoryGiB::optimizer)
        .def_readonly("activations", &MemoryGiB::activations)
        .def_readonly("logits", &MemoryGiB::logits)
        .def_readonly("comm_buffers", &MemoryGiB::comm_buffers)
        .def_readonly("reserved", &MemoryGiB::reserved)
        .def_readonly("total", &MemoryGiB::total)
        .def_readonly("peak_allocated", &MemoryGiB::peak_allocated)
        .def_readonly("peak_reserved", &MemoryGiB::peak_reserved)
        .def_readonly("allocator", &MemoryGiB::allocator)
        .def("__repr__", [](const MemoryGiB& x) {
            char b[96];
            std::snprintf(b, sizeof b, "<cleave.MemoryGiB total %.2f>", x.total);
            return std::string(b);
        });

    py::class_<PyRisk>(m, "Risk", "A risk that can interrupt the job: kind, message, fix.")
        .def_readonly("kind", &PyRisk::kind)
        .def_readonly("message", &PyRisk::message)
        .def_readonly("fix", &PyRisk::fix)
        .def("__repr__", [](const PyRisk& r) { return "<cleave.Risk " + r.kind + ">"; });

    py::class_<PyPlan>(m, "Plan", "One priced plan (cleave explain); to_dict() is its JSON.")
        .def_property_readonly("tp", [](const PyPlan& p) { return p.plan.tp; })
        .def_property_readonly("pp", [](const PyPlan& p) { return p.plan.pp; })
        .def_property_readonly("dp", [](const PyPlan& p) { return p.plan.dp; })
        .def_property_readonly("cp", [](const PyPlan& p) { return p.plan.cp; })
        .def_property_readonly("ep", [](const PyPlan& p) { return p.plan.ep; })
        .def_property_readonly("etp", [](const PyPlan& p) { return expert_tp(p.plan); })
        .def_property_readonly("vpp", [](const PyPlan& p) { return p.plan.vpp; })
        .def_property_readonly("mbs", [](const PyPlan& p) { return p.plan.mbs; })
        .def_property_readonly("schedule", [](const PyPlan& p) { return to_string(p.plan.schedule); })
        .def_property_readonly("recompute",
                               [](const PyPlan& p) { return to_string(p.plan.recompute); })
        .def_property_readonly("sp", [](const PyPlan& p) { return p.plan.sp; })
        .def_property_readonly("zero", [](const PyPlan& p) { return p.plan.zero; })
        .def_property_readonly("gpus", [](const PyPlan& p) { return plan_gpus(p.plan); })
        .def_property_readonly("iteration_time_s",
                               [](const PyPlan& p) { return p.estimate.iteration_time.value(); })
        .def_property_readonly("tokens_per_s", [](const PyPlan& p) { return p.estimate.tokens_per_s; })
        .def_property_readonly("mfu", [](const PyPlan& p) { return p.estimate.mfu; })
        .def_property_readonly("bubble_ratio", [](const PyPlan& p) { return p.estimate.bubble_ratio; })
        .def_property_readonly("fits", [](const PyPlan& p) { return p.estimate.fits; })
        .def_property_readonly("usable_memory_gib",
                               [](const PyPlan& p) { return to_gib(p.estimate.memory_usable); })
        .def_property_readonly("memory_gib", &PyPlan::memory)
        .def_property_readonly("risks", &PyPlan::risks)
        .def_property_readonly("flags", [](const PyPlan& p) { return to_flags(p.plan); })
        .def(
            "export",
            [](const PyPlan& p, const std::string& format) {
                std::ostringstream out;
                std::ostringstream err;
                api::write_export(out, err, p.inputs, RankedPlan{p.plan, p.estimate}, format);
                return out.str();
            },
            py::arg("format"),
            "This plan's launch settings: 'megatron', 'bridge', 'deepspeed' or 'torchtitan'")
        .def("to_dict", [](const PyPlan& p) { return to_python(p.dict); })
        .def(
            "table",
            [](const PyPlan& p) { return table_of(api::Explained{p.inputs, p.plan, p.estimate}); },
            "cleave explain's table: memory per stage, time, traffic per group, risks")
        .def("__repr__", &plan_repr);

    py::class_<PyPlanResult>(m, "PlanResult",
                             "cleave plan's result: .plans ranked best first, the search's counts, "
                             ".export(format) and to_dict().")
        .def_readonly("plans", &PyPlanResult::plans)
        .def_property_readonly("best",
                               [](const PyPlanResult& r) -> py::object {
                                   return r.plans.empty() ? py::none() : py::cast(r.plans.front());
                               })
        .def_property_readonly("candidates_evaluated",
                               [](const PyPlanResult& r) { return r.planned.result.candidates_evaluated; })
        .def_property_readonly("feasible", [](const PyPlanResult& r) { return r.planned.result.feasible; })
        .def_property_readonly("rejected", [](const PyPlanResult& r) { return to_python(r.dict["rejected"]); })
        .def_property_readonly("rejected_total",
                               [](const PyPlanResult& r) { return r.planned.result.rejected_total(); })
        .def_property_readonly(
            "why_empty",
            [](const PyPlanResult& r) { return r.planned.why_empty; },
            "Why no plan is feasible: which fixed flag breaks which plan rule, or the memory "
            "missed ('' when a plan is feasible); to_dict()['why_empty'] too")
        .def(
            "export",
            [](const PyPlanResult& r, const std::string& format) {
                std::ostringstream out;
                std::ostringstream err;
                api::write_export(out, err, r.planned, format);
                return out.str();
            },
            py::arg("format"),
            "The best plan's launch settings: 'megatron' (arguments), 'bridge' (Megatron-Bridge "
            "overrides), 'deepspeed' (ds_config JSON) or 'torchtitan' (job TOML)")
        .def("to_dict", [](const PyPlanResult& r) { return to_python(r.dict); })
        .def(
            "table", [](const PyPlanResult& r) { return table_of(r.planned); },
            "cleave plan's table (the ranked plans, why the others were rejected)")
        .def("__str__", [](const PyPlanResult& r) { return table_of(r.planned); })
        .def("__len__", [](const PyPlanResult& r) { return r.plans.size(); })
        .def("__repr__", [](const PyPlanResult& r) {
            return "<cleave.PlanResult " + std::to_string(r.plans.size()) + " plans of " +
                   std::to_string(r.planned.result.feasible) + " feasible>";
        });

    py::class_<PySimulation>(m, "Simulation", "cleave simulate's result; to_dict() is its JSON.")
        .def_property_readonly("iteration_time_s",
                               [](const PySimulation& s) { return s.sim.result.iteration_time.value(); })
        .def_property_readonly("bubble_ratio", [](const PySimulation& s) { return s.sim.result.bubble_ratio; })
        .def_property_readonly("analytic_iteration_time_s",
                               [](const PySimulation& s) { return s.sim.estimate.iteration_time.value(); })
        .def_property_readonly("stages", [](const PySimulation& s) { return to_python(s.dict["stages"]); })
        .def("to_dict", [](const PySimulation& s) { return to_python(s.dict); })
        .def("table", [](const PySimulation& s) { return table_of(s.sim); }, "cleave simulate's table");

    py::class_<PyComparison>(m, "Comparison",
                             "cleave compare's result: .best maps each profile to its best "
                             "cleave.Plan (None without one); to_dict() is its JSON.")
        .def_property_readonly("best",
                               [](const PyComparison& c) {
                                   py::dict d;
                                   for (const api::ProfileBest& pb : c.compared.profiles) {
                                       if (pb.result.plans.empty()) {
                                           d[py::str(pb.in.cluster.name)] = py::none();
                                           continue;
                                       }
                                       const RankedPlan& b = pb.result.plans.front();
                                       const api::Inputs in = api::inputs_for(pb.in, b.plan);
                                       d[py::str(pb.in.cluster.name)] = py::cast(PyPlan{
                                           in, b.plan, b.estimate,
                                           api::estimate_to_json(in, b.plan, b.estimate)});
                                   }
                                   return d;
                               })
        .def("to_dict", [](const PyComparison& c) { return to_python(c.dict); })
        .def("table", [](const PyComparison& c) { return table_of(c.compared); }, "cleave compare's table");

    py::class_<PyPublished>(m, "Published",
                            "cleave published's result (runs or measured memory); to_dict() is "
                            "its JSON.")
        .def_property_readonly("csv", [](const PyPublished& p) { return p.published.csv; })
        .def_property_readonly("memory", [](const PyPublished& p) { return p.published.memory; })
        .def_property_readonly("rows", [](const PyPublished& p) {
            return p.published.memory ? p.published.memory_rows.size() : p.published.rows.size();
        })
        .def("to_dict", [](const PyPublished& p) { return to_python(p.dict); })
        .def("table", [](const PyPublished& p) { return table_of(p.published); }, "cleave published's tables");

    m.def("plan", &run_plan, py::arg("model"), py::arg("cluster"), py::arg("job") = py::none(),
          "plan(model, cluster, job=None, **flags) -> PlanResult\n\n"
          "Searches every split of `model` (a cleave.Model, a path or a dict) on `cluster` (a "
          "cleave.Cluster or a profile name) for `job` (a cleave.Job, a dict, or keywords such as "
          "gpus=32, gbs=128). A plan keyword (tp=8, pp=4, mbs=1, recompute='full', ...) fixes "
          "that dimension; top=, objective=, max_tp=, allow_tp_cross_node=, simulate= steer the "
          "search.");
    m.def("explain", &run_explain, py::arg("model"), py::arg("cluster"), py::arg("job") = py::none(),
          "explain(model, cluster, job=None, **flags) -> Plan\n\n"
          "Prices one plan (tp=, pp=, dp=, mbs=, ... as keywords; dp defaults to what is left).");
    m.def(
        "simulate",
        [](const py::object& model, const py::object& cluster, const py::object& job,
           py::kwargs flags) {
            api::SimulateOptions so;
            so.schedule = pop<std::string>(flags, "sim_schedule", "");
            so.dp_overlap = !pop<bool>(flags, "no_dp_overlap", false);
            so.optimizer_sync = !pop<bool>(flags, "no_optimizer_sync", false);
            so.trace = pop<std::string>(flags, "trace", "");
            const api::NamedOptions o = named(job, flags);
            const api::Inputs in = inputs(model, cluster, o);
            PySimulation s{api::simulate(in, api::make_plan(o.plan, in), so), {}};
            s.dict = api::to_json(s.sim);
            return s;
        },
        py::arg("model"), py::arg("cluster"), py::arg("job") = py::none(),
        "simulate(model, cluster, job=None, sim_schedule=None, no_dp_overlap=False, "
        "no_optimizer_sync=False, trace=None, **flags) -> Simulation\n\n"
        "Plays one iteration of the plan event by event; trace='t.json' writes a Perfetto trace.");
    m.def(
        "compare",
        [](const py::object& model, const py::object& clusters, const py::object& job,
           const py::kwargs& flags) {
            const api::NamedOptions o = named(job, flags);
            std::optional<ModelSpec> holder;
            const ModelSpec& spec = model_of(model, holder);
            PyComparison c{api::compare(o.job, strings(clusters), &spec), {}};
            c.dict = api::to_json(c.compared);
            return c;
        },
        py::arg("model"), py::arg("clusters"), py::arg("job") = py::none(),
        "compare(model, clusters, job=None, **flags) -> Comparison: the best plan on each "
        "profile (names or TOML paths)");
    m.def(
        "published",
        [](const py::args& csvs) {
            std::vector<std::string> paths;
            for (const auto& c : csvs) {
                paths.push_back(text_of(c));
            }
            PyPublished p{api::published(paths), {}};
            p.dict = api::to_json(p.published);
            return p;
        },
        "published(*csvs) -> Published: the cost model against published runs (or measured "
        "memory); no CSV = tests/data/public_runs.csv");
    m.def(
        "report",
        [](const py::object& model, const py::object& cluster, const py::object& job,
           py::kwargs flags) {
            const std::string out = pop<std::string>(flags, "out", "");
            if (out.empty()) {
                throw ConfigError("report: out= names the HTML file to write");
            }
            std::vector<std::string> clusters;
            if (flags.contains("clusters")) {
                clusters = strings(flags["clusters"]);
                PyDict_DelItemString(flags.ptr(), "clusters");
            }
            if (!cluster.is_none()) {
                clusters.insert(clusters.begin(), text_of(cluster));
            }
            const std::string objective = pop<std::string>(flags, "objective", "time");
            const int64_t top = pop<int64_t>(flags, "top", 5);
            const api::NamedOptions o = named(job, flags);
            std::optional<ModelSpec> holder;
            const ModelSpec& spec = model_of(model, holder);
            const api::Reported r =
                api::report(o.job, clusters, api::parse_objective(objective), top, {}, &spec);
            api::write_html(out, r);
            return r.any_feasible;
        },
        py::arg("model"), py::arg("cluster") = py::none(), py::arg("job") = py::none(),
        "report(model, cluster=None, job=None, out='plan.html', clusters=None, objective='time', "
        "top=5, **flags) -> bool: writes cleave report's page; True when a plan is feasible");
    m.def(
        "load_model", [](const py::object& path) { return make_model(path, py::kwargs()); },
        py::arg("path"), "load_model(path) -> Model (the same as cleave.Model(path))");
    m.def(
        "load_cluster", [](const py::object& name) { return PyCluster{cluster_of(name)}; },
        py::arg("profile"), "load_cluster(name_or_path) -> Cluster");
    m.def(
        "scatter_svg",
        [](const py::iterable& points, double usable_memory_gib) {
            std::vector<report::PlanPoint> pts;
            for (const auto& item : points) {
                const py::tuple t = py::reinterpret_borrow<py::object>(item).cast<py::tuple>();
                if (t.size() < 3) {
                    throw ConfigError("scatter_svg: each point is (label, time_s, memory_gib[, chosen])");
                }
                pts.push_back({t[0].cast<std::string>(), t[1].cast<double>(), t[2].cast<double>(),
                               t.size() > 3 && t[3].cast<bool>()});
            }
            return report::scatter_svg(pts, usable_memory_gib);
        },
        py::arg("points"), py::arg("usable_memory_gib"),
        "scatter_svg(points, usable_memory_gib) -> str: the report's plot (x step time, y memory "
        "per GPU, Pareto front) of points (label, time_s, memory_gib[, chosen]) as an SVG");
    m.def(
        "options",
        [] {
            py::list out;
            for (const api::OptionInfo& o : api::option_table()) {
                std::string name = o.name;
                for (char& c : name) {
                    c = c == '-' ? '_' : c;
                }
                py::dict d;
                d["name"] = name;
                d["type"] = o.type;
                d["choices"] = o.choices;
                d["group"] = o.group == api::OptionGroup::plan     ? "plan"
                             : o.group == api::OptionGroup::search ? "search"
                             : o.group == api::OptionGroup::train  ? "train"
                                                                    : "job";
                out.append(d);
            }
            return out;
        },
        "options() -> list of the keyword options (name, type, choices, group)");
}
