// Calibration overlays: hwprofiles/calibration/*.toml -> Calibration, applied by load_cluster().
#include "core/calibration.hpp"

#include "core/errors.hpp"
#include "core/load.hpp"
#include "core/load_detail.hpp"
#include "core/stack.hpp"

#include <algorithm>

namespace cleave {

namespace {

namespace fs = std::filesystem;
using detail::Need;
using detail::TableReader;

// The [gpu] efficiency keys an overlay may replace, and their GpuSpec fields.
double* efficiency_field(GpuSpec& g, std::string_view key) {
    const std::pair<const char*, double GpuSpec::*> fields[] = {
        {"hbm_efficiency", &GpuSpec::hbm_efficiency},
        {"norm_efficiency", &GpuSpec::norm_efficiency},
        {"elementwise_efficiency", &GpuSpec::elementwise_efficiency},
        {"activation_efficiency", &GpuSpec::activation_efficiency},
        {"gated_activation_efficiency", &GpuSpec::gated_activation_efficiency},
        {"softmax_efficiency", &GpuSpec::softmax_efficiency},
        {"cross_entropy_efficiency", &GpuSpec::cross_entropy_efficiency},
        {"optimizer_efficiency", &GpuSpec::optimizer_efficiency},
        {"ssm_efficiency", &GpuSpec::ssm_efficiency},
        {"quantize_efficiency", &GpuSpec::quantize_efficiency}};
    for (const auto& [name, field] : fields) {
        if (key == name) {
            return &(g.*field);
        }
    }
    return nullptr;
}

void read_rows(const toml::table& t,
               std::vector<std::pair<int64_t, int64_t>>& rows,
               const std::string& where,
               detail::DiagnosticSink& sink) {
    const toml::node* n = t.get("fitted_rows");
    if (n == nullptr) {
        return;
    }
    const toml::array* a = n->as_array();
    bool ok = a != nullptr;
    for (size_t i = 0; ok && i < a->size(); ++i) {
        const toml::array* r = (*a)[i].as_array();
        ok = r != nullptr && r->size() == 2 && (*r)[0].is_integer() && (*r)[1].is_integer();
        if (ok) {
            const int64_t lo = (*r)[0].value<int64_t>().value_or(0);
            const int64_t hi = (*r)[1].value<int64_t>().value_or(0);
            ok = lo <= hi;
            rows.emplace_back(lo, hi);
        }
    }
    if (!ok) {
        sink.error(n->source(),
                   "'" + where + ".fitted_rows' must be an array of [first, last] row_id pairs "
                   "with first <= last");
    }
}

void read_gpu(const toml::table& t, Calibration& c, detail::DiagnosticSink& sink) {
    TableReader r(t, "gpu", sink);
    if (const auto f = r.quantity("gemm_efficiency_factor", Need::optional)) {
        c.gemm_efficiency_factor = *f;
    }
    // A trace calibration's factors on one precision's curve, and on fused attention.
    for (const char* dt : {"bf16", "fp8", "mxfp8", "nvfp4"}) {
        if (const auto f = r.quantity(std::string("gemm_efficiency_factor_") + dt, Need::optional)) {
            c.gemm_factor_by_dtype.emplace_back(dt, *f);
        }
    }
    if (const auto f = r.quantity("attention_factor", Need::optional)) {
        c.attention_factor = *f;
    }
    GpuSpec probe;
    for (auto&& [k, v] : t) {
        if (k.str().rfind("gemm_efficiency_factor", 0) == 0 || k.str() == "attention_factor" ||
            efficiency_field(probe, k.str()) == nullptr) {
            continue;
        }
        if (const auto x = r.fraction(k.str(), Need::required)) {
            c.efficiencies.emplace_back(std::string(k.str()), *x);
        }
    }
    r.finish();
}

std::string read_recipe(TableReader& r, const toml::table& t, const std::string& where,
                        detail::DiagnosticSink& sink) {
    const auto v = r.text("recipe", Need::optional);
    if (!v) {
        return "";
    }
    static const char* const known[] = {
        "mxfp8", "nvfp4", "fp8-tensorwise", "fp8-delayed", "fp8-blockwise"};
    if (std::find(std::begin(known), std::end(known), *v) == std::end(known)) {
        sink.error(t.get("recipe")->source(),
                   "'" + where + ".recipe' must be one of mxfp8, nvfp4, fp8-tensorwise, fp8-delayed, "
                   "fp8-blockwise, got '" + *v + "'");
    }
    return *v;
}

std::string read_release(TableReader& r, Need need) {
    const auto v = r.text("release", need);
    if (v && !valid_release(*v)) {
        r.bad_value("release", "must be a release as YY.MM (\"26.02\"), got \"" + *v + "\"");
    }
    return v.value_or("");
}

void read_moe(const toml::table& t, Calibration& c, detail::DiagnosticSink& sink) {
    TableReader r(t, "moe", sink);
    if (const auto v = r.quantity("quantised_expert_overhead_us", Need::optional, true)) {
        c.quantised_expert_overhead_us = *v;
    }
    c.quantised_expert_recipe = read_recipe(r, t, "moe", sink);
    c.quantised_expert_release = read_release(r, Need::optional);
    r.accept("from_release");
    r.finish();
    const toml::node* n = t.get("from_release");
    if (n == nullptr) {
        return;
    }
    const toml::array* a = n->as_array();
    if (a == nullptr || !a->is_array_of_tables()) {
        sink.error(n->source(), "'moe.from_release' must be an array of tables ([[moe.from_release]])");
        return;
    }
    for (const toml::node& e : *a) {
        const toml::table& et = *e.as_table();
        TableReader er(et, "moe.from_release", sink);
        NodeSpec::ExpertOverheadFrom f;
        f.release = read_release(er, Need::required);
        if (const auto v = er.quantity("quantised_expert_overhead_us", Need::required, true)) {
            f.value = seconds(*v * 1e-6);
        }
        f.recipe = read_recipe(er, et, "moe.from_release", sink);
        er.accept("fitted_rows");
        er.finish();
        std::vector<std::pair<int64_t, int64_t>> rows;
        read_rows(et, rows, "moe.from_release", sink);
        c.from_release_rows.push_back(rows);
        if (!c.quantised_expert_release.empty() && f.release <= c.quantised_expert_release) {
            sink.error(et.source(), "'moe.from_release' release \"" + f.release +
                                        "\" is not after [moe] release \"" +
                                        c.quantised_expert_release + "\"");
        }
        if (!c.quantised_expert_from_release.empty() &&
            f.release <= c.quantised_expert_from_release.back().release) {
            sink.error(et.source(), "'moe.from_release' entries must be in increasing release order");
        }
        c.quantised_expert_from_release.push_back(f);
    }
}

}  // namespace

bool Calibration::fitted(int64_t row_id) const {
    return std::any_of(fitted_rows.begin(), fitted_rows.end(), [&](const auto& r) {
        return row_id >= r.first && row_id <= r.second;
    });
}

Calibration parse_calibration_toml(std::string_view text, const std::string& source_name) {
    const toml::table root = detail::parse_toml(text, source_name);
    detail::DiagnosticSink sink(source_name);
    TableReader top(root, "", sink);
    Calibration c;
    c.source = source_name;
    if (const toml::table* t = top.table("calibration", Need::required)) {
        TableReader r(*t, "calibration", sink);
        if (const auto v = r.text("profile", Need::required)) {
            c.profile = *v;
        }
        // One CSV, or a list of them (rows from several files).
        if (const toml::node* fo = t->get("fitted_on"); fo != nullptr && fo->is_array()) {
            r.accept("fitted_on");
            for (const toml::node& x : *fo->as_array()) {
                if (const auto v = x.value<std::string>()) {
                    c.fitted_on_all.push_back(*v);
                } else {
                    sink.error(x.source(), "'calibration.fitted_on' entries must be file names");
                }
            }
            if (c.fitted_on_all.empty()) {
                sink.error(fo->source(), "'calibration.fitted_on' is an empty list");
            } else {
                c.fitted_on = c.fitted_on_all.front();
            }
        } else if (const auto v = r.text("fitted_on", Need::required)) {
            c.fitted_on = *v;
            c.fitted_on_all = {*v};
        }
        if (const auto v = r.text("stack", Need::optional)) {
            c.stack = *v;
        }
        if (const auto v = r.text("method", Need::optional)) {
            c.method = *v;
        }
        r.accept("fitted_rows");
        r.finish();
        read_rows(*t, c.fitted_rows, "calibration", sink);
    }
    if (const toml::table* t = top.table("gpu", Need::optional)) {
        read_gpu(*t, c, sink);
    }
    if (const toml::table* t = top.table("moe", Need::optional)) {
        read_moe(*t, c, sink);
    }
    if (const toml::table* t = top.table("trace", Need::optional)) {
        // Where a trace calibration came from, and what that trace measured (read, not applied).
        TableReader r(*t, "trace", sink);
        c.trace_file = r.text("file", Need::required).value_or("");
        c.trace_crc32 = r.text("crc32", Need::required).value_or("");
        for (const char* k : {"bytes", "span_ms", "launch_gaps_ms", "launch_gaps", "small_kernel_ms",
                              "communication_sms", "scope", "gpu", "plan"}) {
            r.accept(k);
        }
        if (const toml::node* n = t->get("not_informed")) {
            r.accept("not_informed");
            if (const toml::array* a = n->as_array()) {
                for (const toml::node& x : *a) {
                    if (const auto v = x.value<std::string>()) {
                        c.not_informed.push_back(*v);
                    }
                }
            }
        }
        r.finish();
    }
    top.finish();
    sink.throw_if_any();
    return c;
}

std::optional<Calibration> find_calibration(const std::string& profile) {
    for (const auto& dir : hwprofile_dirs()) {
        const fs::path p = dir / "calibration" / (profile + ".toml");
        std::error_code ec;
        if (fs::is_regular_file(p, ec)) {
            Calibration c = parse_calibration_toml(detail::read_text_file(p), p.string());
            if (c.profile != profile) {
                throw ConfigError(p.string() + ": 'calibration.profile' is '" + c.profile +
                                  "' but the file is named for '" + profile + "'");
            }
            return c;
        }
    }
    return std::nullopt;
}

namespace {

// Every point's efficiency times `factor`, at most 1 (points rebuilt: ln_size is set at construction).
void scale_curve(std::vector<GemmEfficiencyPoint>& curve, double factor) {
    std::vector<GemmEfficiencyPoint> scaled;
    for (const auto& pt : curve) {
        scaled.push_back({pt.size, std::min(1.0, pt.efficiency * factor)});
    }
    curve = std::move(scaled);
}

}  // namespace

void apply_calibration(const Calibration& cal, ClusterSpec& c) {
    // Every precision's curve (16-bit, fp8, mxfp8, nvfp4): the factor is the stack's, not a
    // dtype's.
    for (auto* curve_of : {&c.gpu.gemm_efficiency,
                           &c.gpu.gemm_efficiency_fp8,
                           &c.gpu.gemm_efficiency_mxfp8,
                           &c.gpu.gemm_efficiency_nvfp4}) {
        scale_curve(*curve_of, cal.gemm_efficiency_factor);
    }
    // The FP8 shape model's tensor efficiency is that curve's counterpart: scaled alike.
    c.gpu.gemm_tensor_efficiency_fp8 =
        std::min(1.0, c.gpu.gemm_tensor_efficiency_fp8 * cal.gemm_efficiency_factor);
    // Per precision: that curve alone. Every curve is first made explicit (an empty fp8 curve
    // reads the 16-bit one), so scaling one leaves the others as they were.
    if (!cal.gemm_factor_by_dtype.empty()) {
        const GpuSpec before = c.gpu;
        c.gpu.gemm_efficiency_fp8 = gemm_curve(before, Dtype::fp8);
        c.gpu.gemm_efficiency_mxfp8 = gemm_curve(before, Dtype::mxfp8);
        c.gpu.gemm_efficiency_nvfp4 = gemm_curve(before, Dtype::nvfp4);
        for (const auto& [dt, factor] : cal.gemm_factor_by_dtype) {
            std::vector<GemmEfficiencyPoint>* curve = dt == "fp8"     ? &c.gpu.gemm_efficiency_fp8
                                                      : dt == "mxfp8" ? &c.gpu.gemm_efficiency_mxfp8
                                                      : dt == "nvfp4" ? &c.gpu.gemm_efficiency_nvfp4
                                                                      : &c.gpu.gemm_efficiency;
            scale_curve(*curve, factor);
            if (dt == "fp8") {
                c.gpu.gemm_tensor_efficiency_fp8 =
                    std::min(1.0, c.gpu.gemm_tensor_efficiency_fp8 * factor);
            }
        }
    }
    if (cal.attention_factor) {
        c.gpu.attention_factor = *cal.attention_factor;
    }
    for (const auto& [key, value] : cal.efficiencies) {
        if (double* f = efficiency_field(c.gpu, key)) {
            *f = value;
        }
    }
    if (cal.quantised_expert_overhead_us) {
        c.node.quantised_expert_overhead = seconds(*cal.quantised_expert_overhead_us * 1e-6);
        c.node.quantised_expert_recipe = cal.quantised_expert_recipe;
        c.node.quantised_expert_release = cal.quantised_expert_release;
    }
    c.node.quantised_expert_from_release = cal.quantised_expert_from_release;
    c.calibration = cal.source;
}

}  // namespace cleave
