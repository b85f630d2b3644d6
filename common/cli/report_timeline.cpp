// report_timeline.cpp — `workbook report TRACE`: one step of a --trace file
// (trace.hpp) drawn as a timeline, a row per rank and thread, coloured by
// what the span is: computing, communicating, waiting.
//
// Note: [which step is drawn] The step of median length among rank 0's
// steps (the first fifth left out: warm-up), and the steps of the same
// name on the other ranks: all on rank 0's clock, so a rank that waits for
// another shows it. The window is from the earliest of those steps' starts
// to the latest end.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "cli.hpp"
#include "commands.hpp"
#include "workbook/errors.hpp"

namespace workbook::cli {
namespace {

struct Span {
  int rank = 0, thread = 0;
  std::string name, kind;
  double begin_us = 0, end_us = 0;
  int depth = 0;  // how many spans of its track it lies inside
};

// Colours (and legend order) by kind: what a span is.
const std::vector<std::pair<std::string, std::string>> kKinds = {
    {"step", "#e6e6e6"},         {"data", "#c9b037"},     {"compute", "#4878d0"}, {"communication", "#ee854a"},
    {"wait", "#d65f5f"},         {"optimizer", "#6acc64"}, {"checkpoint", "#956cb4"}};

}  // namespace

bool is_trace(const nlohmann::json& value) { return value.contains("traceEvents"); }

fs::path draw_timeline(const nlohmann::json& trace, const std::string& name, const fs::path& out,
                       const std::string& source) {
  std::vector<Span> spans;
  std::vector<std::pair<Span, bool>> marks;
  std::map<std::pair<int, int>, std::string> thread_names;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    const std::string phase = e.value("ph", "");
    if (phase == "M" && e.value("name", "") == "thread_name")
      thread_names[{e.value("pid", 0), e.value("tid", 0)}] = e["args"].value("name", "?");
    if (phase != "X" && phase != "i") continue;
    Span s{e.value("pid", 0), e.value("tid", 0), e.value("name", ""), e.value("cat", ""), e.value("ts", 0.0), 0, 0};
    s.end_us = s.begin_us + e.value("dur", 0.0);
    if (phase == "i") marks.push_back({s, true});
    else spans.push_back(s);
  }
  std::vector<const Span*> steps;
  for (const Span& s : spans)
    if (s.kind == "step" && s.rank == 0) steps.push_back(&s);
  WB_CHECK(!steps.empty(), "{}: no steps on rank 0 (a trace of a training or bench run has them)", source);
  std::sort(steps.begin(), steps.end(), [](const Span* a, const Span* b) { return a->begin_us < b->begin_us; });
  std::vector<const Span*> later(steps.begin() + static_cast<std::ptrdiff_t>(steps.size() / 5), steps.end());
  std::sort(later.begin(), later.end(),
            [](const Span* a, const Span* b) { return a->end_us - a->begin_us < b->end_us - b->begin_us; });
  const std::string step_name = later[later.size() / 2]->name;
  double from = 1e300, to = -1e300;
  for (const Span& s : spans)
    if (s.kind == "step" && s.name == step_name) {
      from = std::min(from, s.begin_us);
      to = std::max(to, s.end_us);
    }

  // Rows: rank by rank, its threads in order; depth within each track.
  std::map<std::pair<int, int>, int> row;
  for (const Span& s : spans) row[{s.rank, s.thread}] = 0;
  int next_row = 0;
  for (auto& [track, r] : row) r = next_row++;
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return std::tie(a.rank, a.thread, a.begin_us) < std::tie(b.rank, b.thread, b.begin_us) ||
           (std::tie(a.rank, a.thread, a.begin_us) == std::tie(b.rank, b.thread, b.begin_us) && a.end_us > b.end_us);
  });
  std::vector<const Span*> open;
  for (Span& s : spans) {
    while (!open.empty() && (open.back()->rank != s.rank || open.back()->thread != s.thread ||
                             s.begin_us >= open.back()->end_us))
      open.pop_back();
    s.depth = static_cast<int>(open.size());
    open.push_back(&s);
  }

  const fs::path data = out / (name + ".dat"), script = out / (name + ".gp"), png = out / (name + ".png");
  std::ofstream dat(data);
  WB_CHECK(dat.is_open(), "{}: cannot open for writing", data.string());
  std::vector<std::string> labels;
  const double width_us = to - from;
  // gnuplot numbers the blocks of the file (index 0, 1, ...); an empty block
  // would shift them, so only the kinds present get one.
  std::vector<std::pair<std::string, std::string>> drawn;  // kind, colour: block i
  for (const auto& [kind, colour] : kKinds) {
    const auto in_window = [&, kind = kind](const Span& s) {  // a structured binding is captured by copy (C++17)
      return s.kind == kind && s.end_us >= from && s.begin_us <= to;
    };
    if (std::none_of(spans.begin(), spans.end(), in_window)) continue;
    drawn.push_back({kind, colour});
    dat << "# " << kind << "\n";
    for (const Span& s : spans) {
      if (!in_window(s)) continue;
      const double x0 = (std::max(s.begin_us, from) - from) / 1e3, x1 = (std::min(s.end_us, to) - from) / 1e3;
      const double half = std::max(0.12, 0.42 - 0.1 * s.depth);
      const int y = row[{s.rank, s.thread}];
      dat << fmt::format("{:.4f} {} {:.4f} {:.4f} {:.3f} {:.3f}\n", (x0 + x1) / 2, y, x0, x1, y - half, y + half);
      // Names where they fit: the buckets, backward, the waits.
      if (s.kind != "step" && (x1 - x0) > 0.12 * width_us / 1e3)
        labels.push_back(fmt::format("set label {} at {:.4f},{:.3f} center front font 'Sans,8'",
                                     gnuplot_quoted(s.name.substr(0, 40)), (x0 + x1) / 2, y + half + 0.08));
    }
    dat << "\n\n";
  }
  size_t marks_drawn = 0;
  dat << "# marks\n";
  for (const auto& [m, unused] : marks)
    if (m.begin_us >= from && m.begin_us <= to && row.count({m.rank, m.thread})) {
      dat << fmt::format("{:.4f} {:.3f}\n", (m.begin_us - from) / 1e3, row[{m.rank, m.thread}] + 0.45);
      ++marks_drawn;
    }
  dat << "\n\n";
  dat.close();

  std::ofstream gp(script);
  WB_CHECK(gp.is_open(), "{}: cannot open for writing", script.string());
  gp << "# " << name << ".gp: written by `workbook report`; run `gnuplot " << script.string() << "` to draw it again.\n";
  gp << fmt::format("set terminal pngcairo size 1400,{} noenhanced font 'Sans,11'\n", 220 + 90 * next_row);
  gp << "set output " << gnuplot_quoted(png.string()) << "\n";
  gp << "set title " << gnuplot_quoted(fmt::format("One step ({}) of {}, every rank on rank 0's clock", step_name,
                                           fs::path(source).filename().string()))
     << "\n";
  gp << "set xlabel 'ms from the step''s start'\n";
  gp << fmt::format("set yrange [{:.1f}:-0.7]\n", next_row - 0.3);  // rank 0 on top
  gp << fmt::format("set xrange [0:{:.4f}]\n", width_us / 1e3);
  std::vector<std::string> tics;
  for (const auto& [track, r] : row) {
    const auto named = thread_names.find(track);
    tics.push_back(fmt::format("{} {}", gnuplot_quoted(fmt::format("rank {} {}", track.first,
                                                           named == thread_names.end() ? "?" : named->second)), r));
  }
  gp << "set ytics (" << fmt::format("{}", fmt::join(tics, ", ")) << ")\n";
  gp << "set grid xtics\nset key outside bottom center horizontal\n";
  for (const std::string& l : labels) gp << l << "\n";
  std::vector<std::string> parts;
  for (size_t i = 0; i < drawn.size(); ++i)
    parts.push_back(fmt::format("{} index {} using 1:2:3:4:5:6 with boxxyerror fillstyle solid 0.9 border "
                                "linecolor rgb 'gray30' linecolor rgb '{}' title '{}'",
                                gnuplot_quoted(data.string()), i, drawn[i].second, drawn[i].first));
  if (marks_drawn > 0)
    parts.push_back(fmt::format("{} index {} using 1:2 with points pointtype 11 pointsize 1.2 linecolor rgb 'black' "
                                "title 'bucket launched'",
                                gnuplot_quoted(data.string()), drawn.size()));
  gp << "plot " << fmt::format("{}", fmt::join(parts, ", \\\n     ")) << "\n";
  gp.close();
  run_gnuplot(script, png);
  return png;
}

}  // namespace workbook::cli
