// The report's SVG layout against the values it draws (report/report.hpp): every plan a point
// where its step time and memory put it, the Pareto front, the chosen plan, the stacked bars.
#include "report/report.hpp"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <doctest/doctest.h>

using namespace cleave::report;

namespace {

/// The value of attribute `name` in one SVG tag.
double attr(const std::string& tag, const std::string& name) {
    const std::string key = " " + name + "=\"";
    const auto at = tag.find(key);
    const std::string what = name + " in " + tag;
    REQUIRE_MESSAGE(at != std::string::npos, what);
    const auto from = at + key.size();
    const auto to = tag.find('"', from);
    REQUIRE_MESSAGE(to != std::string::npos, what);
    return std::stod(tag.substr(from, to - from));
}

/// Every opening tag `<name class="..." ...>` whose class attribute holds the word `cls`.
std::vector<std::string>
tags(const std::string& svg, const std::string& name, const std::string& cls) {
    std::vector<std::string> out;
    const std::string open = "<" + name + " class=\"";
    for (auto at = svg.find(open); at != std::string::npos; at = svg.find(open, at + 1)) {
        const auto from = at + open.size();
        const auto quote = svg.find('"', from);
        const auto end = svg.find('>', from);
        if (quote == std::string::npos || end == std::string::npos || end < quote) {
            continue;
        }
        const std::string c = " " + svg.substr(from, quote - from) + " ";
        if (c.find(" " + cls + " ") != std::string::npos) {
            out.push_back(svg.substr(at, end + 1 - at));
        }
    }
    return out;
}

std::vector<PlanPoint> plans() {
    // time (s), memory (GiB): the front is a (1, 60), b (2, 40), d (4, 20); c (3, 50) and
    // e (5, 30) are each beaten by b and d.
    return {{"a", 1.0, 60.0, true},
            {"b", 2.0, 40.0, false},
            {"c", 3.0, 50.0, false},
            {"d", 4.0, 20.0, false},
            {"e", 5.0, 30.0, false}};
}

}  // namespace

TEST_SUITE("report") {
    TEST_CASE("report: Pareto front of step time and memory") {
        const std::vector<std::size_t> front = pareto_front(plans());
        REQUIRE(front.size() == 3);
        CHECK(front[0] == 0);
        CHECK(front[1] == 1);
        CHECK(front[2] == 3);
        CHECK(pareto_front({}).empty());
    }

    TEST_CASE("report: nice axis steps") {
        // 3.84 .. 5.2 s: (1.36 * 1.06 = 1.44) / 5 = 0.288 -> 0.5
        CHECK(nice_step(3.84, 5.2) == doctest::Approx(0.5));
        // flat: 0.1 * 2 = 0.2 of margin each side, 0.4 / 5 = 0.08 -> 0.1
        CHECK(nice_step(2.0, 2.0) == doctest::Approx(0.1));
    }

    TEST_CASE("report: nice axis ends") {
        CHECK(nice_ceiling(5.25) == doctest::Approx(10.0));
        CHECK(nice_ceiling(1.9) == doctest::Approx(2.0));
        CHECK(nice_ceiling(2.1) == doctest::Approx(2.5));
        CHECK(nice_ceiling(84.0) == doctest::Approx(100.0));
        CHECK(nice_ceiling(0.031) == doctest::Approx(0.05));
    }

    TEST_CASE("report: each plan is a point where its time and memory put it") {
        const std::vector<PlanPoint> ps = plans();
        const std::string svg = scatter_svg(ps, 74.5);
        const std::vector<std::string> frame = tags(svg, "g", "frame");
        REQUIRE(frame.size() == 1);
        // x: times 1..5, margin 0.03 * 4 = 0.12, step nice((4 + 0.24) / 5 = 0.848) = 1, so
        // floor(0.88) = 0 .. ceil(5.12) = 6; y: 0 .. nice(74.5 * 1.05 = 78.2) = 100
        CHECK(attr(frame[0], "data-x0") == doctest::Approx(0.0));
        CHECK(attr(frame[0], "data-x1") == doctest::Approx(6.0));
        CHECK(attr(frame[0], "data-y1") == doctest::Approx(100.0));
        const double left = attr(frame[0], "data-left");
        const double right = attr(frame[0], "data-right");
        const double top = attr(frame[0], "data-top");
        const double bottom = attr(frame[0], "data-bottom");
        const std::vector<std::string> pts = tags(svg, "circle", "pt");
        REQUIRE(pts.size() == ps.size());
        std::map<int, std::string> by_index;
        for (const std::string& t : pts) {
            by_index[static_cast<int>(attr(t, "data-i"))] = t;
        }
        REQUIRE(by_index.size() == ps.size());
        for (std::size_t i = 0; i < ps.size(); ++i) {
            const std::string& t = by_index[static_cast<int>(i)];
            CHECK(attr(t, "data-time-s") == doctest::Approx(ps[i].time_s));
            CHECK(attr(t, "data-memory-gib") == doctest::Approx(ps[i].memory_gib));
            // cx = left + t / 6 * (right - left); cy = bottom - m / 100 * (bottom - top)
            CHECK(attr(t, "cx") ==
                  doctest::Approx(left + ps[i].time_s / 6.0 * (right - left)).epsilon(1e-3));
            CHECK(
                attr(t, "cy") ==
                doctest::Approx(bottom - ps[i].memory_gib / 100.0 * (bottom - top)).epsilon(1e-3));
        }
        // a (1 s, 60 GiB): cx = 60 + 640 / 6 = 166.67; cy = 340 - 0.6 * 320 = 148
        CHECK(attr(by_index[0], "cx") == doctest::Approx(166.67).epsilon(1e-4));
        CHECK(attr(by_index[0], "cy") == doctest::Approx(148.0));
        // the chosen plan is one point, marked; the front holds a, b and d
        const std::vector<std::string> chosen = tags(svg, "circle", "chosen");
        REQUIRE(chosen.size() == 1);
        CHECK(attr(chosen[0], "data-i") == 0);
        CHECK(tags(svg, "circle", "front").size() == 3);
        CHECK(tags(svg, "polyline", "pareto").size() == 1);
        CHECK(svg.find("<title>c: 3 s, 50.0 GiB</title>") != std::string::npos);
        CHECK(svg.find("<title>a: 1 s, 60.0 GiB (chosen)</title>") != std::string::npos);
    }

    TEST_CASE("report: times spanning more than 20x go on a log axis") {
        const std::vector<PlanPoint> ps = {
            {"fast", 2.0, 60.0, true}, {"mid", 20.0, 30.0, false}, {"slow", 300.0, 20.0, false}};
        const std::string svg = scatter_svg(ps, 70.0);
        const std::string frame = tags(svg, "g", "frame").at(0);
        CHECK(attr(frame, "data-log-x") == 1.0);
        // decades: 10^floor(log10 2) = 1 .. 10^ceil(log10 300) = 1000, three decades over
        // 640 px: x = 60 + log10(t) / 3 * 640
        CHECK(attr(frame, "data-x0") == doctest::Approx(1.0));
        CHECK(attr(frame, "data-x1") == doctest::Approx(1000.0));
        const std::vector<std::string> pts = tags(svg, "circle", "pt");
        REQUIRE(pts.size() == 3);
        std::map<int, double> cx;
        for (const std::string& t : pts) {
            cx[static_cast<int>(attr(t, "data-i"))] = attr(t, "cx");
        }
        CHECK(cx[0] == doctest::Approx(60.0 + 0.30103 / 3.0 * 640.0).epsilon(1e-4));  // 124.22
        CHECK(cx[1] == doctest::Approx(60.0 + 1.30103 / 3.0 * 640.0).epsilon(1e-4));  // 337.55
        CHECK(cx[2] == doctest::Approx(60.0 + 2.47712 / 3.0 * 640.0).epsilon(1e-4));  // 588.45
        CHECK(svg.find("log scale") != std::string::npos);
    }

    TEST_CASE("report: stacked memory bars per stage and their headroom") {
        const std::vector<StageMemory> st = {
            {"stage 0", {{"weights", 10.0}, {"activations", 30.0}}},
            {"stage 1", {{"weights", 10.0}, {"activations", 50.0}}}};
        const std::string svg = stage_memory_svg(st, 70.0);
        const std::vector<std::string> segs = tags(svg, "rect", "seg");
        REQUIRE(segs.size() == 4);
        const std::string frame = tags(svg, "g", "frame").at(0);
        // y axis 0 .. nice(70 * 1.05 = 73.5) = 100 GiB over 300 - 30 = 270 px: 2.7 px per GiB
        CHECK(attr(frame, "data-y1") == doctest::Approx(100.0));
        CHECK(attr(segs[0], "height") == doctest::Approx(27.0));   // 10 GiB
        CHECK(attr(segs[3], "height") == doctest::Approx(135.0));  // 50 GiB
        // the activations of stage 1 sit on its weights: bottom at 300 - 27
        CHECK(attr(segs[3], "y") + attr(segs[3], "height") == doctest::Approx(273.0));
        const std::vector<std::string> head = tags(svg, "rect", "headroom");
        REQUIRE(head.size() == 2);
        CHECK(attr(head[0], "data-gib") == doctest::Approx(30.0));  // 70 - 40
        CHECK(attr(head[1], "data-gib") == doctest::Approx(10.0));  // 70 - 60
    }

    TEST_CASE("report: --memory-headroom draws the fit limit below the usable memory") {
        const std::vector<StageMemory> st = {{"stage 0", {{"weights", 10.0}}}};
        const std::string svg = stage_memory_svg(st, 70.0, 3.5);
        const std::vector<std::string> limit = tags(svg, "line", "limit");
        REQUIRE(limit.size() == 1);
        // 70 - 3.5 = 66.5 GiB: y = 300 - 66.5 / 100 * 270 = 120.45
        CHECK(attr(limit[0], "data-gib") == doctest::Approx(66.5));
        CHECK(attr(limit[0], "y1") == doctest::Approx(120.45).epsilon(1e-3));
        CHECK(tags(stage_memory_svg(st, 70.0), "line", "limit").empty());
        CHECK(tags(scatter_svg(plans(), 74.5, 3.7), "line", "limit").size() == 1);
    }

    TEST_CASE("report: the step's time as one stacked bar") {
        const std::string svg = time_svg({{"compute", 3.0}, {"bubble", 1.0}});
        const std::vector<std::string> segs = tags(svg, "rect", "seg");
        REQUIRE(segs.size() == 2);
        // 1060 px (20 .. 1080) for 4 s: compute 795 px, bubble 265 px after it
        CHECK(attr(segs[0], "width") == doctest::Approx(795.0));
        CHECK(attr(segs[1], "x") == doctest::Approx(815.0));
        CHECK(attr(segs[1], "width") == doctest::Approx(265.0));
        CHECK(svg.find("bubble: 1 s (25.0 %)") != std::string::npos);
    }

    TEST_CASE("report: the timeline places each event by stage and time") {
        const std::vector<TimelineEvent> ev = {{0, 0, 0.0, 1.0, "F", 0},
                                               {1, 0, 1.0, 2.0, "F", 0},
                                               {1, 0, 2.0, 4.0, "B", 0},
                                               {0, 2, 3.0, 4.0, "dp bucket", -1}};
        const std::string svg = timeline_svg(ev, 4.0, 2);
        const std::vector<std::string> r = tags(svg, "rect", "ev");
        REQUIRE(r.size() == 4);
        // 1010 px (70 .. 1080) for 4 s; rows of 26 px from y = 10
        CHECK(attr(r[1], "x") == doctest::Approx(70.0 + 252.5));
        CHECK(attr(r[1], "y") == doctest::Approx(36.0));
        CHECK(attr(r[2], "width") == doctest::Approx(505.0));
        CHECK(attr(r[3], "y") > attr(r[0], "y") + attr(r[0], "height"));  // DP lane below compute
    }

    TEST_CASE("report: the page is self-contained and marks differences") {
        Page p;
        p.title = "t <1>";
        Section s;
        s.title = "m on c";
        s.top_plans = {{"#", "tp", "pp"}, {{"1", "8", "4"}, {"2", "8", "8"}}};
        s.points = plans();
        s.points_total = 5;
        p.sections.push_back(s);
        const std::string html = page_html(p);
        CHECK(html.find("<title>t &lt;1&gt;</title>") != std::string::npos);
        CHECK(html.find("<td class=\"diff\">8</td>") != std::string::npos);  // pp 8 vs 4
        CHECK(html.find("<script") == std::string::npos);
        // the only URL is the SVG namespace (an identifier, never fetched)
        std::size_t urls = 0;
        std::size_t ns = 0;
        for (std::size_t at = html.find("http"); at != std::string::npos;
             at = html.find("http", at + 1)) {
            ++urls;
            ns += html.compare(at, 26, "http://www.w3.org/2000/svg") == 0 ? 1 : 0;
        }
        CHECK(urls == ns);
        CHECK(html.find("<link") == std::string::npos);
        CHECK(html.find("@import") == std::string::npos);
        CHECK(html.find("Cautions") == std::string::npos);  // none given, none shown
        p.sections[0].cautions = {"sinks <slow>"};
        CHECK(page_html(p).find("<ul class=\"cautions\"><li>sinks &lt;slow&gt;</li></ul>") !=
              std::string::npos);
    }
}
