// report.hpp — what the files of `workbook report` share: a plot as series of
// points (drawn by commands_report.cpp), the result files' lines, and the
// functions that make each plot from them (report_plots.cpp: the tour's and
// the benches'; report_model.cpp: `workbook model`'s).
#pragma once
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"

namespace workbook::cli {

struct Series {
  std::string title;
  std::string style;  // gnuplot's "with ..." part
  std::vector<std::pair<double, double>> points;
};

struct Plot {
  std::string name, title, xlabel, ylabel;
  std::vector<std::string> settings;  // more `set` lines (scales, key, formats)
  std::string extra_plot;             // drawn first, e.g. the linear ideal
  std::vector<Series> series;
};

// The lines of every file, each tagged with the file it came from.
struct Line {
  nlohmann::json value;
  std::string source;  // the file's stem; shown in legends when several files are plotted
};

// The text after a series' title naming its file, when several files are plotted.
inline std::string from(const Line& line, bool several_files) {
  return several_files ? " [" + line.source + "]" : "";
}

// report_plots.cpp
Plot speedup_plot(const std::vector<Line>& lines, bool several_files, int& max_ranks);
// A log2 x axis of message sizes (busbw, model_allreduce_*): its `set` lines.
std::vector<std::string> size_axis(const std::set<double>& sizes);
Plot busbw_plot(const std::vector<Line>& lines, bool several_files);
Plot epoch_plot(const std::vector<Line>& lines, bool several_files, const std::string& name, const std::string& title,
                const std::string& ylabel, const std::string& metric, const std::function<bool(const std::string&)>& keep);
Plot memory_plot(const std::vector<Line>& lines, bool several_files);
Plot steps_plot(const std::vector<Line>& lines, bool several_files);

// report_model.cpp
std::vector<Plot> model_allreduce_plots(const std::vector<Line>& lines, bool several_files);
Plot model_steps_plot(const std::vector<Line>& lines, bool several_files);
Plot model_bubble_plot(const std::vector<Line>& lines, bool several_files);

}  // namespace workbook::cli
