#pragma once
// The HTML report (cleave report): one self-contained page with inline SVG plots, built from
// plain values so the layout can be tested without the cost model (docs/report.md).
//
// Every function here is pure: values in, text out. No I/O, no clock, no external resources in
// the page (no scripts, fonts, stylesheets or images from elsewhere).

#include <cstddef>
#include <string>
#include <vector>

namespace cleave::report {

/// One feasible plan on the step-time / memory plot.
struct PlanPoint {
    std::string label;  // plan flags, shown as hover text
    double time_s = 0.0;
    double memory_gib = 0.0;  // peak memory per GPU
    bool chosen = false;
};

/// One named part of a stacked bar (memory in GiB, time in seconds).
struct Part {
    std::string name;
    double value = 0.0;
};

/// Memory of one pipeline stage, part by part (weights, gradients, ...).
struct StageMemory {
    std::string label;  // "stage 0 (12 layers)"
    std::vector<Part> parts;
};

/// One interval of the simulated timeline.
struct TimelineEvent {
    int stage = 0;
    int lane = 0;  // 0 compute, 1 pipeline sends, 2 data-parallel reduction
    double start_s = 0.0;
    double end_s = 0.0;
    std::string kind;  // "F", "B", "W", "send act", "send grad", "dp bucket", "optimizer"
    int microbatch = -1;
};

/// A table: header and rows of cells, already formatted.
struct Table {
    std::vector<std::string> header;
    std::vector<std::vector<std::string>> rows;
};

/// Everything the page shows about one job on one hardware profile.
struct Section {
    std::string title;                  // "Llama-3-70B on dgx-h100"
    std::string subtitle;               // job line
    std::vector<std::string> headline;  // "iteration 1.23 s", "MFU 45.6 %", ...
    Table top_plans;  // row 0 is the chosen plan; cells that differ from it are marked
    std::size_t compare_from_column = 1;  // first column compared with the chosen plan
    std::vector<PlanPoint> points;
    std::size_t points_total = 0;  // feasible plans in the search (points may be fewer)
    double usable_memory_gib = 0.0;
    double memory_headroom_gib = 0.0;  // --memory-headroom: a plan fits below usable - this
    std::vector<StageMemory> stages;
    std::vector<Part> time_parts;  // where one step's time goes
    std::vector<TimelineEvent> timeline;
    double timeline_end_s = 0.0;
    Table train;  // time and cost to train (empty without --tokens)
    Table why_not;
    Table risks;
    std::vector<std::string> cautions;  // where the prediction is known to be optimistic
};

struct Page {
    std::string title;
    std::string intro;
    Table comparison;  // --clusters: one row per profile (empty for one profile)
    std::vector<Section> sections;
};

/// The index of every point on the Pareto front (no other point is both faster and smaller),
/// sorted by time. Ties: a point equal in both to an earlier one is on the front too.
[[nodiscard]] std::vector<std::size_t> pareto_front(const std::vector<PlanPoint>& points);

/// "&<>\"'" escaped for HTML text and attributes.
[[nodiscard]] std::string escape(const std::string& s);

/// A round upper end for an axis that must reach `v` (1, 2, 2.5, 5 times a power of ten).
[[nodiscard]] double nice_ceiling(double v);

/// Tick step for an axis over [lo, hi]: about five intervals after 3 % of margin each side
/// (a flat range gets 10 % of its value), rounded by nice_ceiling().
[[nodiscard]] double nice_step(double lo, double hi);

/// Plot of every plan: x step time, y peak memory per GPU; Pareto front as a line, the chosen
/// plan marked, the usable memory as a dashed line. Time is on a log scale (decades,
/// data-log-x="1" on the frame) when the slowest plan takes more than 20x the fastest. Each plan is
/// <circle class="pt" data-i="index" data-time-s data-memory-gib cx cy> with a <title>; the frame
/// carries data-x0/x1/y0/y1 (axis ranges) and data-left/right/top/bottom (pixels).
[[nodiscard]] std::string scatter_svg(const std::vector<PlanPoint>& points,
                                      double usable_memory_gib,
                                      double headroom_gib = 0.0);

/// Stacked bar per stage (<rect class="seg" data-stage data-part data-gib>) and the usable
/// memory as a line; the space left under it is drawn as headroom. With `headroom_gib` > 0
/// (--memory-headroom) the fit limit, usable - headroom, is a second line (class "limit").
[[nodiscard]] std::string stage_memory_svg(const std::vector<StageMemory>& stages,
                                           double usable_memory_gib,
                                           double headroom_gib = 0.0);

/// One horizontal stacked bar of a step's time (<rect class="seg" data-part data-s>).
[[nodiscard]] std::string time_svg(const std::vector<Part>& parts);

/// One row per stage and lane (<rect class="ev" data-stage data-kind>), time left to right.
[[nodiscard]] std::string
timeline_svg(const std::vector<TimelineEvent>& events, double end_s, int stages);

/// The table as HTML; with `diff_from` > 0 (or 0 with mark), cells in rows 1.. from column
/// `diff_from` on that differ from row 0 get class "diff".
[[nodiscard]] std::string table_html(const Table& t, bool mark_diff, std::size_t diff_from);

/// The whole page.
[[nodiscard]] std::string page_html(const Page& page);

}  // namespace cleave::report
