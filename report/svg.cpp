// The plots of the report as inline SVG (report/report.hpp). Plain string building: every
// number is written with printf formats so the layout test can read it back.
#include "report/report.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>

namespace cleave::report {

namespace {

std::string num(double v, const char* spec = "%.1f") {
    std::array<char, 64> b{};
    std::snprintf(b.data(), b.size(), spec, v);
    return b.data();
}

/// Plot area in pixels and the data range it shows.
struct Frame {
    double x0 = 0.0, x1 = 1.0, y0 = 0.0, y1 = 1.0;                  // data
    double left = 60.0, right = 700.0, top = 20.0, bottom = 340.0;  // pixels

    bool log_x = false;  // x on a log10 scale (x0 > 0): times that span more than 20x

    [[nodiscard]] double x(double v) const {
        if (log_x) {
            return left + std::log10(v / x0) / std::log10(x1 / x0) * (right - left);
        }
        return left + (v - x0) / (x1 - x0) * (right - left);
    }

    [[nodiscard]] double y(double v) const {
        return bottom - (v - y0) / (y1 - y0) * (bottom - top);
    }
};

// Colours (Okabe-Ito palette, distinguishable with colour-vision deficiencies).
constexpr std::array<const char*, 8> palette = {
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999"};

std::string
axes(const Frame& f, const std::string& xlabel, const std::string& ylabel, int xticks, int yticks) {
    std::string s;
    s += "<g class=\"axes\" font-size=\"11\" fill=\"#333\">";
    s += "<line x1=\"" + num(f.left) + "\" y1=\"" + num(f.bottom) + "\" x2=\"" + num(f.right) +
         "\" y2=\"" + num(f.bottom) + "\" stroke=\"#333\"/>";
    s += "<line x1=\"" + num(f.left) + "\" y1=\"" + num(f.top) + "\" x2=\"" + num(f.left) +
         "\" y2=\"" + num(f.bottom) + "\" stroke=\"#333\"/>";
    for (int i = 0; i <= xticks; ++i) {
        // log axis: one tick per decade (xticks = decades); linear: xticks equal steps
        const double xv = f.log_x ? f.x0 * std::pow(10.0, i)
                                  : f.x0 + static_cast<double>(i) / xticks * (f.x1 - f.x0);
        s += "<line x1=\"" + num(f.x(xv)) + "\" y1=\"" + num(f.top) + "\" x2=\"" + num(f.x(xv)) +
             "\" y2=\"" + num(f.bottom) + "\" stroke=\"#eee\"/>";
        s += "<text x=\"" + num(f.x(xv)) + "\" y=\"" + num(f.bottom + 14) +
             "\" text-anchor=\"middle\">" + num(xv, "%.3g") + "</text>";
    }
    for (int i = 0; i <= yticks; ++i) {
        const double yv = f.y0 + static_cast<double>(i) / yticks * (f.y1 - f.y0);
        s += "<line x1=\"" + num(f.left) + "\" y1=\"" + num(f.y(yv)) + "\" x2=\"" + num(f.right) +
             "\" y2=\"" + num(f.y(yv)) + "\" stroke=\"#eee\"/>";
        s += "<text x=\"" + num(f.left - 4) + "\" y=\"" + num(f.y(yv) + 4) +
             "\" text-anchor=\"end\">" + num(yv, "%.3g") + "</text>";
    }
    s += "<text x=\"" + num((f.left + f.right) / 2) + "\" y=\"" + num(f.bottom + 30) +
         "\" text-anchor=\"middle\">" + escape(xlabel) + "</text>";
    s += "<text transform=\"translate(14," + num((f.top + f.bottom) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + escape(ylabel) + "</text>";
    return s + "</g>";
}

std::string svg_open(const char* id, double w, double h) {
    return std::string("<svg id=\"") + id + "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
           num(w, "%.0f") + "\" height=\"" + num(h, "%.0f") + "\" viewBox=\"0 0 " + num(w, "%.0f") +
           " " + num(h, "%.0f") + "\" font-family=\"sans-serif\">";
}

std::string frame_attrs(const Frame& f) {
    return std::string(f.log_x ? " data-log-x=\"1\"" : "") + " data-x0=\"" + num(f.x0, "%.9g") +
           "\" data-x1=\"" + num(f.x1, "%.9g") + "\" data-y0=\"" + num(f.y0, "%.9g") +
           "\" data-y1=\"" + num(f.y1, "%.9g") + "\" data-left=\"" + num(f.left) +
           "\" data-right=\"" + num(f.right) + "\" data-top=\"" + num(f.top) + "\" data-bottom=\"" +
           num(f.bottom) + "\"";
}

/// <rect> with `extra` after its fill; a leading ` class="..."` in `extra` goes first, so every
/// tag reads <rect class="..." ...> (what the tests and the DOM check look for).
std::string
rect(double x, double y, double w, double h, const char* fill, const std::string& extra) {
    std::string head;
    std::string rest = extra;
    if (rest.rfind(" class=\"", 0) == 0) {
        const std::size_t end = rest.find('"', 8);
        head = rest.substr(0, end + 1);
        rest = rest.substr(end + 1);
    }
    return "<rect" + head + " x=\"" + num(x, "%.2f") + "\" y=\"" + num(y, "%.2f") + "\" width=\"" +
           num(std::max(w, 0.0), "%.2f") + "\" height=\"" + num(std::max(h, 0.0), "%.2f") +
           "\" fill=\"" + fill + "\"" + rest;
}

/// Colour of a part name, the same in every plot.
const char* colour_of(const std::string& name, std::map<std::string, const char*>& seen) {
    auto it = seen.find(name);
    if (it != seen.end()) {
        return it->second;
    }
    const char* c = palette[seen.size() % palette.size()];
    seen[name] = c;
    return c;
}

std::string legend(const std::vector<std::string>& names,
                   std::map<std::string, const char*>& colours,
                   double x,
                   double y) {
    std::string s = "<g class=\"legend\" font-size=\"11\">";
    for (const std::string& n : names) {
        s += rect(x, y - 9, 10, 10, colour_of(n, colours), "/>");
        s += "<text x=\"" + num(x + 14) + "\" y=\"" + num(y) + "\">" + escape(n) + "</text>";
        x += 24.0 + 7.0 * static_cast<double>(n.size());
    }
    return s + "</g>";
}

}  // namespace

std::vector<std::size_t> pareto_front(const std::vector<PlanPoint>& points) {
    std::vector<std::size_t> order(points.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
        order[i] = i;
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        if (points[a].time_s != points[b].time_s) {
            return points[a].time_s < points[b].time_s;
        }
        return points[a].memory_gib < points[b].memory_gib;
    });
    std::vector<std::size_t> front;
    double best_mem = INFINITY;
    double best_time = -INFINITY;
    for (std::size_t i : order) {
        const PlanPoint& p = points[i];
        const bool same_as_last = p.memory_gib == best_mem && p.time_s == best_time;
        if (p.memory_gib < best_mem || same_as_last) {
            front.push_back(i);
            best_mem = p.memory_gib;
            best_time = p.time_s;
        }
    }
    return front;
}

double nice_step(double lo, double hi) {
    // About five intervals over the data with 3 % of margin each side.
    const double pad = hi > lo ? 0.03 * (hi - lo) : std::max(0.1 * std::abs(hi), 1e-9);
    return nice_ceiling((hi - lo + 2.0 * pad) / 5.0);
}

double nice_ceiling(double v) {
    if (!(v > 0.0)) {
        return 1.0;
    }
    const double mag = std::pow(10.0, std::floor(std::log10(v)));
    for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
        if (m * mag >= v * (1.0 - 1e-12)) {
            return m * mag;
        }
    }
    return 10.0 * mag;
}

namespace {

/// The usable memory as a horizontal line across the frame, labelled at its right end.
std::string usable_line(const Frame& f, double gib, bool dashed) {
    if (!(gib > 0.0)) {
        return "";
    }
    return "<line class=\"usable\" x1=\"" + num(f.left) + "\" x2=\"" + num(f.right) + "\" y1=\"" +
           num(f.y(gib)) + "\" y2=\"" + num(f.y(gib)) + "\" stroke=\"#D55E00\"" +
           (dashed ? " stroke-dasharray=\"6 4\"" : " stroke-width=\"2\"") + "/><text x=\"" +
           num(f.right - 4) + "\" y=\"" + num(f.y(gib) - 4) +
           "\" text-anchor=\"end\" font-size=\"11\" fill=\"#D55E00\">usable " + num(gib) +
           " GiB</text>";
}

/// The fit limit with --memory-headroom: usable - headroom, a dotted line (nothing without one).
std::string limit_line(const Frame& f, double usable_gib, double headroom_gib) {
    if (!(headroom_gib > 0.0) || !(usable_gib > headroom_gib)) {
        return "";
    }
    const double y = f.y(usable_gib - headroom_gib);
    return "<line class=\"limit\" data-gib=\"" + num(usable_gib - headroom_gib, "%.6g") +
           "\" x1=\"" + num(f.left) + "\" x2=\"" + num(f.right) + "\" y1=\"" + num(y) + "\" y2=\"" +
           num(y) + "\" stroke=\"#CC79A7\" stroke-dasharray=\"2 3\"/><text x=\"" +
           num(f.right - 4) + "\" y=\"" + num(y + 12) +
           "\" text-anchor=\"end\" font-size=\"11\" fill=\"#CC79A7\" paint-order=\"stroke\" "
           "stroke=\"#fff\" stroke-width=\"3\">fit limit " +
           num(usable_gib - headroom_gib) + " GiB (" + num(headroom_gib) +
           " GiB headroom kept)</text>";
}

/// The scatter's frame: x fitted to the plans' times (nice_step), y from 0 past the largest
/// memory or the usable line.
Frame scatter_frame(const std::vector<PlanPoint>& points, double usable_memory_gib, double& step) {
    Frame f;
    double tmin = points.empty() ? 0.0 : INFINITY;
    double tmax = 0.0;
    double mmax = usable_memory_gib;
    for (const PlanPoint& p : points) {
        tmin = std::min(tmin, p.time_s);
        tmax = std::max(tmax, p.time_s);
        mmax = std::max(mmax, p.memory_gib);
    }
    f.y1 = nice_ceiling(mmax * 1.05);
    if (tmin > 0.0 && tmax > 20.0 * tmin) {
        // A few very slow plans would squeeze the rest into one corner: decades instead.
        f.log_x = true;
        f.x0 = std::pow(10.0, std::floor(std::log10(tmin)));
        f.x1 = std::pow(10.0, std::ceil(std::log10(tmax)));
        step = 10.0;
        return f;
    }
    step = nice_step(tmin, tmax);
    const double pad = tmax > tmin ? 0.03 * (tmax - tmin) : 0.1 * tmax;
    f.x0 = std::max(0.0, std::floor((tmin - pad) / step) * step);
    f.x1 = std::max(std::ceil((tmax + pad) / step) * step, f.x0 + step);
    return f;
}

/// One plan's circle: class pt (+ front, chosen), its values as data attributes, hover title.
std::string point_svg(const Frame& f, const PlanPoint& p, std::size_t i, bool on_front) {
    const std::string cls =
        std::string("pt") + (on_front ? " front" : "") + (p.chosen ? " chosen" : "");
    return "<circle class=\"" + cls + "\" data-i=\"" + std::to_string(i) + "\" data-time-s=\"" +
           num(p.time_s, "%.9g") + "\" data-memory-gib=\"" + num(p.memory_gib, "%.9g") +
           "\" cx=\"" + num(f.x(p.time_s), "%.2f") + "\" cy=\"" + num(f.y(p.memory_gib), "%.2f") +
           "\" r=\"" + (p.chosen ? "7" : "3.5") + "\" fill=\"" +
           (p.chosen ? "#D55E00" : (on_front ? "#009E73" : "#0072B2")) + "\" fill-opacity=\"" +
           (p.chosen ? "1" : "0.55") + "\"" +
           (p.chosen ? " stroke=\"#000\" stroke-width=\"1.5\"" : "") + "><title>" +
           escape(p.label) + ": " + num(p.time_s, "%.4g") + " s, " + num(p.memory_gib, "%.1f") +
           " GiB" + (p.chosen ? " (chosen)" : "") + "</title></circle>";
}

}  // namespace

std::string
scatter_svg(const std::vector<PlanPoint>& points, double usable_memory_gib, double headroom_gib) {
    double step = 1.0;
    const Frame f = scatter_frame(points, usable_memory_gib, step);
    std::string s = svg_open("scatter", 720, 400);
    s += "<g class=\"frame\"" + frame_attrs(f) + ">";
    const double ticks = f.log_x ? std::log10(f.x1 / f.x0) : (f.x1 - f.x0) / step;
    s += axes(f,
              f.log_x ? "step time (s, log scale)" : "step time (s)",
              "peak memory per GPU (GiB)",
              static_cast<int>(std::lround(ticks)),
              5);
    const std::vector<std::size_t> front = pareto_front(points);
    std::vector<bool> on_front(points.size(), false);
    std::string line;
    for (std::size_t i : front) {
        on_front[i] = true;
        line +=
            num(f.x(points[i].time_s), "%.2f") + "," + num(f.y(points[i].memory_gib), "%.2f") + " ";
    }
    s += "<polyline class=\"pareto\" points=\"" + line +
         "\" fill=\"none\" stroke=\"#009E73\" stroke-width=\"2\"/>";
    std::string chosen;
    for (std::size_t i = 0; i < points.size(); ++i) {
        (points[i].chosen ? chosen : s) += point_svg(f, points[i], i, on_front[i]);
    }
    // the memory lines and their labels over the points, the chosen plan last, so on top
    s += usable_line(f, usable_memory_gib, true) + limit_line(f, usable_memory_gib, headroom_gib);
    s += chosen + "</g>";
    s += "<g class=\"legend\" font-size=\"11\"><circle cx=\"64\" cy=\"388\" r=\"3.5\" "
         "fill=\"#0072B2\"/><text x=\"72\" y=\"392\">feasible plan</text><circle cx=\"164\" "
         "cy=\"388\" r=\"3.5\" fill=\"#009E73\"/><text x=\"172\" y=\"392\">Pareto front (no plan "
         "both faster and smaller)</text><circle cx=\"430\" cy=\"388\" r=\"6\" fill=\"#D55E00\" "
         "stroke=\"#000\"/><text x=\"440\" y=\"392\">chosen plan</text></g>";
    return s + "</svg>";
}

namespace {

/// Horizontal grid lines and labels of a 0-based y axis, and its title.
std::string y_grid(const Frame& f, const std::string& title) {
    std::string s = "<g class=\"axes\" font-size=\"11\" fill=\"#333\">";
    for (int i = 0; i <= 5; ++i) {
        const double v = f.y1 * i / 5.0;
        s += "<line x1=\"" + num(f.left) + "\" x2=\"" + num(f.right) + "\" y1=\"" + num(f.y(v)) +
             "\" y2=\"" + num(f.y(v)) + "\" stroke=\"#eee\"/><text x=\"" + num(f.left - 4) +
             "\" y=\"" + num(f.y(v) + 4) + "\" text-anchor=\"end\">" + num(v, "%.3g") + "</text>";
    }
    return s + "<text transform=\"translate(14," + num((f.top + f.bottom) / 2) +
           ") rotate(-90)\" text-anchor=\"middle\">" + escape(title) + "</text></g>";
}

/// One stage's stacked bar at x (width w), and the headroom box up to the usable memory.
std::string stage_bar(const Frame& f,
                      const StageMemory& st,
                      std::size_t i,
                      double x,
                      double w,
                      double usable_gib,
                      std::map<std::string, const char*>& colours) {
    std::string s;
    double base = 0.0;
    for (const Part& p : st.parts) {
        const double y_top = f.y(base + p.value);
        s += rect(x,
                  y_top,
                  w,
                  f.y(base) - y_top,
                  colour_of(p.name, colours),
                  " class=\"seg\" data-stage=\"" + std::to_string(i) + "\" data-part=\"" +
                      escape(p.name) + "\" data-gib=\"" + num(p.value, "%.6g") + "\"><title>" +
                      escape(st.label) + ": " + escape(p.name) + " " + num(p.value, "%.2f") +
                      " GiB</title></rect>");
        base += p.value;
    }
    if (usable_gib > base) {
        const double y_top = f.y(usable_gib);
        s += rect(x,
                  y_top,
                  w,
                  f.y(base) - y_top,
                  "none",
                  " class=\"headroom\" stroke=\"#999\" stroke-dasharray=\"3 3\" data-stage=\"" +
                      std::to_string(i) + "\" data-gib=\"" + num(usable_gib - base, "%.6g") +
                      "\"><title>" + escape(st.label) + ": headroom " +
                      num(usable_gib - base, "%.2f") + " GiB</title></rect>");
    }
    return s;
}

}  // namespace

std::string stage_memory_svg(const std::vector<StageMemory>& stages,
                             double usable_memory_gib,
                             double headroom_gib) {
    Frame f;
    f.top = 30.0;
    f.bottom = 300.0;
    double top = usable_memory_gib;
    std::map<std::string, const char*> colours;
    std::vector<std::string> names;
    for (const StageMemory& st : stages) {
        double sum = 0.0;
        for (const Part& p : st.parts) {
            sum += p.value;
            if (std::find(names.begin(), names.end(), p.name) == names.end()) {
                names.push_back(p.name);
                (void)colour_of(p.name, colours);
            }
        }
        top = std::max(top, sum);
    }
    f.y1 = nice_ceiling(top * 1.05);
    f.x1 = static_cast<double>(std::max<std::size_t>(stages.size(), 1));
    std::string s = svg_open("stage-memory", 720, 364);
    s += "<g class=\"frame\"" + frame_attrs(f) + ">" + y_grid(f, "memory per GPU (GiB)");
    const double slot = (f.right - f.left) / f.x1;
    const double w = std::min(slot * 0.7, 80.0);
    for (std::size_t i = 0; i < stages.size(); ++i) {
        const double x = f.left + slot * (static_cast<double>(i) + 0.5) - w / 2;
        s += stage_bar(f, stages[i], i, x, w, usable_memory_gib, colours);
        // Up to 8 stages by their label; more by their index (every one up to 32, then 16 in all).
        const std::size_t every = stages.size() <= 32 ? 1 : stages.size() / 16;
        if (i % every == 0) {
            s += "<text x=\"" + num(x + w / 2) + "\" y=\"" + num(f.bottom + 14) +
                 "\" text-anchor=\"middle\" font-size=\"11\">" +
                 (stages.size() <= 8 ? escape(stages[i].label) : std::to_string(i)) + "</text>";
        }
    }
    if (stages.size() > 8) {
        s += "<text x=\"" + num((f.left + f.right) / 2) + "\" y=\"" + num(f.bottom + 28) +
             "\" text-anchor=\"middle\" font-size=\"11\">pipeline stage</text>";
    }
    s += usable_line(f, usable_memory_gib, false) + limit_line(f, usable_memory_gib, headroom_gib) +
         "</g>" + legend(names, colours, f.left, 350.0);
    return s + "</svg>";
}

std::string time_svg(const std::vector<Part>& parts) {
    double total = 0.0;
    for (const Part& p : parts) {
        total += p.value;
    }
    Frame f;
    f.left = 20.0;
    f.right = 1080.0;  // a full-width card: 1100 px wide
    f.top = 10.0;
    f.bottom = 50.0;
    f.x1 = total > 0.0 ? total : 1.0;
    std::map<std::string, const char*> colours;
    std::vector<std::string> names;
    std::string s = svg_open("time-breakdown", 1100, 110);
    s += "<g class=\"frame\"" + frame_attrs(f) + ">";
    double at = 0.0;
    for (const Part& p : parts) {
        names.push_back(p.name);
        const double x = f.x(at);
        s += rect(
            x,
            f.top,
            f.x(at + p.value) - x,
            f.bottom - f.top,
            colour_of(p.name, colours),
            " class=\"seg\" data-part=\"" + escape(p.name) + "\" data-s=\"" + num(p.value, "%.6g") +
                "\"><title>" + escape(p.name) + ": " + num(p.value, "%.4g") + " s (" +
                num(total > 0 ? 100.0 * p.value / total : 0.0, "%.1f") + " %)</title></rect>");
        at += p.value;
    }
    s += "<text x=\"" + num(f.right) + "\" y=\"" + num(f.bottom + 16) +
         "\" text-anchor=\"end\" font-size=\"11\">" + num(total, "%.4g") + " s per step</text>";
    s += "</g>" + legend(names, colours, f.left, 96.0);
    return s + "</svg>";
}

std::string timeline_svg(const std::vector<TimelineEvent>& events, double end_s, int stages) {
    Frame f;
    f.left = 70.0;
    f.right = 1080.0;
    f.top = 10.0;
    const double row = stages > 16 ? 12.0 : 26.0;
    f.bottom = f.top + row * std::max(stages, 1);
    f.x1 = end_s > 0.0 ? end_s : 1.0;
    f.y0 = 0.0;
    f.y1 = std::max(stages, 1);
    std::map<std::string, const char*> colours;
    for (const char* k : {"F", "B", "W", "optimizer", "send act", "send grad", "dp bucket"}) {
        (void)colour_of(k, colours);
    }
    const double h = f.bottom + 60.0;
    std::string s = svg_open("timeline", 1100, h);
    s += "<g class=\"frame\"" + frame_attrs(f) + ">";
    for (int st = 0; st < stages; ++st) {
        const double y = f.top + row * st;
        s += "<text x=\"" + num(f.left - 4) + "\" y=\"" + num(y + row * 0.6) +
             "\" text-anchor=\"end\" font-size=\"" + (row > 20 ? "11" : "8") + "\">stage " +
             std::to_string(st) + "</text>";
    }
    for (const TimelineEvent& e : events) {
        // Lane 0 (compute) fills most of the row; sends and DP reduction are thin strips below.
        const double y =
            f.top + row * e.stage + (e.lane == 0 ? 0.0 : row * (0.55 + 0.2 * (e.lane - 1)));
        const double hh = e.lane == 0 ? row * 0.55 : row * 0.18;
        const double x = f.x(e.start_s);
        std::string t = e.kind;
        if (e.microbatch >= 0) {
            t += " mb " + std::to_string(e.microbatch);
        }
        s += rect(x,
                  y,
                  std::max(f.x(e.end_s) - x, 0.3),
                  hh,
                  colour_of(e.kind, colours),
                  " class=\"ev\" data-stage=\"" + std::to_string(e.stage) + "\" data-kind=\"" +
                      escape(e.kind) + "\"><title>stage " + std::to_string(e.stage) + ": " +
                      escape(t) + ", " + num(e.start_s * 1e3, "%.2f") + "-" +
                      num(e.end_s * 1e3, "%.2f") + " ms</title></rect>");
    }
    s += "<line x1=\"" + num(f.left) + "\" x2=\"" + num(f.right) + "\" y1=\"" + num(f.bottom + 2) +
         "\" y2=\"" + num(f.bottom + 2) + "\" stroke=\"#333\"/>";
    for (int i = 0; i <= 5; ++i) {
        const double v = f.x1 * i / 5.0;
        s += "<text x=\"" + num(f.x(v)) + "\" y=\"" + num(f.bottom + 16) +
             "\" text-anchor=\"middle\" font-size=\"11\">" + num(v, "%.3g") + " s</text>";
    }
    s += "</g>" + legend({"F", "B", "W", "optimizer", "send act", "send grad", "dp bucket"},
                         colours,
                         f.left,
                         h - 14);
    return s + "</svg>";
}

}  // namespace cleave::report
