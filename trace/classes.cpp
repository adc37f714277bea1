#include "trace/classes.hpp"

#include "core/errors.hpp"
#include "core/load_detail.hpp"

#include <filesystem>

namespace cleave::trace {

namespace {

constexpr std::array<const char*, kClasses> kNames = {
    "gemm",      "attention", "quantize", "norm",          "activation", "elementwise", "moe_permute",
    "convolution", "embedding", "optimizer", "loss", "communication", "memcpy", "other"};

std::vector<detail::Choice<Class>> class_choices() {
    std::vector<detail::Choice<Class>> c;
    for (size_t i = 0; i < kClasses; ++i) {
        if (static_cast<Class>(i) != Class::memcpy) {  // copy engines, not kernels
            c.push_back({kNames[i], static_cast<Class>(i)});
        }
    }
    return c;
}

std::vector<std::string> strings(detail::TableReader& r, const toml::table& t,
                                 std::string_view key, detail::DiagnosticSink& sink) {
    std::vector<std::string> out;
    r.accept(key);
    const toml::node* n = t.get(key);
    if (n == nullptr) {
        r.bad_value(key, "is required: a list of substrings of kernel names");
        return out;
    }
    const toml::array* a = n->as_array();
    if (a == nullptr || a->empty()) {
        sink.error(n->source(), r.quoted(key) + " must be a non-empty list of strings");
        return out;
    }
    for (const toml::node& e : *a) {
        const auto s = e.value<std::string>();
        if (!s || s->empty()) {
            sink.error(e.source(), r.quoted(key) + " must hold non-empty strings");
            continue;
        }
        out.push_back(*s);
    }
    return out;
}

void parse_into(ClassTable& out, std::string_view text, const std::string& name) {
    const toml::table root = detail::parse_toml(text, name);
    detail::DiagnosticSink sink(name);
    detail::TableReader top(root, "", sink);
    top.accept("rule");
    top.accept("dtype");
    const auto choices = class_choices();
    if (const toml::node* rules = root.get("rule")) {
        const toml::array* arr = rules->as_array();
        if (arr == nullptr) {
            sink.error(rules->source(), "'rule' must be an array of tables ([[rule]])");
        } else {
            for (const toml::node& n : *arr) {
                const toml::table* t = n.as_table();
                if (t == nullptr) {
                    sink.error(n.source(), "each 'rule' must be a table ([[rule]])");
                    continue;
                }
                detail::TableReader r(*t, "rule", sink);
                Rule rule;
                if (const auto c = r.choice("class", detail::Need::required, choices)) {
                    rule.cls = *c;
                }
                rule.library = r.text("library", detail::Need::required).value_or("");
                rule.contains = strings(r, *t, "contains", sink);
                rule.dtype = r.text("dtype", detail::Need::optional).value_or("");
                rule.op = r.text("op", detail::Need::optional).value_or("");
                rule.source = name + ":" + std::to_string(t->source().begin.line);
                r.finish();
                out.rules.push_back(std::move(rule));
            }
        }
    }
    if (const toml::node* dts = root.get("dtype")) {
        const toml::array* arr = dts->as_array();
        if (arr == nullptr) {
            sink.error(dts->source(), "'dtype' must be an array of tables ([[dtype]])");
        } else {
            for (const toml::node& n : *arr) {
                const toml::table* t = n.as_table();
                if (t == nullptr) {
                    sink.error(n.source(), "each 'dtype' must be a table ([[dtype]])");
                    continue;
                }
                detail::TableReader r(*t, "dtype", sink);
                DtypeRule d;
                d.dtype = r.text("dtype", detail::Need::required).value_or("");
                d.contains = strings(r, *t, "contains", sink);
                r.finish();
                out.dtypes.push_back(std::move(d));
            }
        }
    }
    top.finish();
    sink.throw_if_any();
    out.files.push_back(name);
}

bool holds_any(std::string_view name, const std::vector<std::string>& subs) {
    for (const std::string& s : subs) {
        if (name.find(s) != std::string_view::npos) {
            return true;
        }
    }
    return false;
}

}  // namespace

const char* to_string(Class c) { return kNames[static_cast<size_t>(c)]; }

ClassTable parse_class_table(std::string_view text, const std::string& name) {
    ClassTable t;
    parse_into(t, text, name);
    return t;
}

ClassTable load_class_table(const std::string& user) {
    ClassTable t;
    if (!user.empty()) {
        parse_into(t, detail::read_text_file(user), user);
    }
    for (const auto& dir :
         detail::data_dirs("CLEAVE_TRACE_CLASSES", CLEAVE_SOURCE_TRACE, CLEAVE_INSTALL_TRACE)) {
        const std::filesystem::path p = dir / "kernel-classes.toml";
        if (detail::is_toml_file(p)) {
            parse_into(t, detail::read_text_file(p), p.string());
            return t;
        }
    }
    throw ConfigError("the shipped kernel class table kernel-classes.toml was found in none of: " +
                      std::string(CLEAVE_SOURCE_TRACE) + ", " + CLEAVE_INSTALL_TRACE +
                      " (set CLEAVE_TRACE_CLASSES to the folder that holds it)");
}

Classified classify(const ClassTable& t, std::string_view kernel_name) {
    Classified c;
    for (const Rule& r : t.rules) {
        if (holds_any(kernel_name, r.contains)) {
            c.cls = r.cls;
            c.matched = true;
            c.library = r.library;
            c.dtype = r.dtype;
            c.op = r.op;
            break;
        }
    }
    if (c.cls == Class::gemm && c.dtype.empty()) {
        for (const DtypeRule& d : t.dtypes) {
            if (holds_any(kernel_name, d.contains)) {
                c.dtype = d.dtype;
                break;
            }
        }
    }
    return c;
}

}  // namespace cleave::trace
