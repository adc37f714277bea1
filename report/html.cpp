// The report page: HTML around the plots of svg.cpp, one inline stylesheet, no scripts.
#include "report/report.hpp"

#include <cctype>

namespace cleave::report {

namespace {

constexpr const char* style = R"css(
body{font-family:sans-serif;margin:24px auto;max-width:1180px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 4px;border-bottom:2px solid #0072B2}
h3{font-size:15px;margin:18px 0 6px} p.sub{color:#555;margin:0 0 10px}
.headline{display:flex;flex-wrap:wrap;gap:8px;margin:8px 0}
.headline span{background:#eef4fa;border-radius:4px;padding:4px 10px;font-size:14px}
table{border-collapse:collapse;font-size:12px;margin:4px 0}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right} th{background:#f3f3f3}
td.l,th.l{text-align:left} td.diff{background:#ffe3b3;font-weight:bold}
tr.chosen td{background:#e3f1e8}
.grid{display:flex;flex-wrap:wrap;gap:12px}
.card{border:1px solid #ddd;border-radius:6px;padding:8px;flex:1 1 520px;min-width:0}
.card.wide{flex-basis:100%} .card svg{width:100%;height:auto;display:block}
.note{color:#666;font-size:12px}
)css";

/// A number ("12", "-3.5", "3e+11", "$4", "300B"): right-aligned; anything else left-aligned.
bool numeric(const std::string& s) {
    const auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
    if (s.empty()) {
        return false;
    }
    if (s[0] == '-' || s[0] == '$') {
        return s.size() > 1 && digit(s[1]);
    }
    return digit(s[0]);
}

std::string card(const std::string& title,
                 const std::string& body,
                 const std::string& note,
                 bool wide = false) {
    return std::string(wide ? "<div class=\"card wide\"><h3>" : "<div class=\"card\"><h3>") +
           escape(title) + "</h3>" + body +
           (note.empty() ? "" : "<p class=\"note\">" + escape(note) + "</p>") + "</div>";
}

std::string section_html(const Section& s, std::size_t index) {
    std::string h = "<section id=\"section-" + std::to_string(index) + "\"><h2>" + escape(s.title) +
                    "</h2><p class=\"sub\">" + escape(s.subtitle) + "</p>";
    h += "<div class=\"headline\">";
    for (const std::string& x : s.headline) {
        h += "<span>" + escape(x) + "</span>";
    }
    h += "</div>";
    h += "<h3>Chosen plan and the next best</h3>" +
         table_html(s.top_plans, true, s.compare_from_column) +
         "<p class=\"note\">Row 1 is the chosen plan; a highlighted cell differs from it.</p>";
    if (!s.train.rows.empty()) {
        h += "<h3>Time and cost to train</h3>" + table_html(s.train, false, 0);
    }
    h += "<div class=\"grid\">";
    h += card("Every feasible plan: step time against peak memory",
              scatter_svg(s.points, s.usable_memory_gib, s.memory_headroom_gib),
              std::to_string(s.points.size()) + " of " + std::to_string(s.points_total) +
                  " feasible plans drawn; hover a point for its plan.");
    h += card("Memory per pipeline stage (chosen plan)",
              stage_memory_svg(s.stages, s.usable_memory_gib, s.memory_headroom_gib),
              "Stacked parts per GPU of each stage against the usable memory; the dashed box "
              "is the headroom.");
    h += card("Where one step's time goes (chosen plan, slowest stage)",
              time_svg(s.time_parts),
              "Exposed communication only: what overlaps compute is not counted again.",
              true);
    h += card("Simulated timeline of one iteration, per stage",
              timeline_svg(s.timeline,
                           s.timeline_end_s,
                           static_cast<int>(s.stages.empty() ? 1 : s.stages.size())),
              "The discrete-event simulator's events (cleave simulate --trace): forward F, "
              "backward B, pipeline sends and the data-parallel reduction below each stage.",
              true);
    h += "</div>";
    h += "<h3>Why not the others</h3>" + table_html(s.why_not, false, 0);
    if (!s.cautions.empty()) {
        h += "<h3>Cautions on the prediction</h3><ul class=\"cautions\">";
        for (const std::string& c : s.cautions) {
            h += "<li>" + escape(c) + "</li>";
        }
        h += "</ul>";
    }
    h += "<h3>Risks of the chosen plan</h3>" +
         (s.risks.rows.empty() ? std::string("<p>None found.</p>") : table_html(s.risks, false, 0));
    return h + "</section>";
}

}  // namespace

std::string escape(const std::string& s) {
    std::string o;
    o.reserve(s.size());
    for (char c : s) {
        switch (c) {
        case '&':
            o += "&amp;";
            break;
        case '<':
            o += "&lt;";
            break;
        case '>':
            o += "&gt;";
            break;
        case '"':
            o += "&quot;";
            break;
        case '\'':
            o += "&#39;";
            break;
        default:
            o += c;
        }
    }
    return o;
}

std::string table_html(const Table& t, bool mark_diff, std::size_t diff_from) {
    std::string h = "<table><tr>";
    for (const std::string& c : t.header) {
        h += std::string("<th") + (numeric(c) ? "" : " class=\"l\"") + ">" + escape(c) + "</th>";
    }
    h += "</tr>";
    for (std::size_t r = 0; r < t.rows.size(); ++r) {
        h += (mark_diff && r == 0) ? "<tr class=\"chosen\">" : "<tr>";
        for (std::size_t c = 0; c < t.rows[r].size(); ++c) {
            const std::string& v = t.rows[r][c];
            const bool diff =
                mark_diff && r > 0 && c >= diff_from && c < t.rows[0].size() && v != t.rows[0][c];
            std::string cls = numeric(v) ? "" : "l";
            if (diff) {
                cls += cls.empty() ? "diff" : " diff";
            }
            h += "<td" + (cls.empty() ? std::string() : " class=\"" + cls + "\"") + ">" +
                 escape(v) + "</td>";
        }
        h += "</tr>";
    }
    return h + "</table>";
}

std::string page_html(const Page& page) {
    std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" +
                    escape(page.title) + "</title><style>" + style + "</style></head><body>";
    h += "<h1>" + escape(page.title) + "</h1><p class=\"sub\">" + escape(page.intro) + "</p>";
    if (!page.comparison.rows.empty()) {
        h += "<h2>Across hardware profiles</h2>" + table_html(page.comparison, false, 0);
    }
    for (std::size_t i = 0; i < page.sections.size(); ++i) {
        h += section_html(page.sections[i], i);
    }
    return h + "</body></html>\n";
}

}  // namespace cleave::report
