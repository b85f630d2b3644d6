// report_model.cpp — `workbook report`'s plots of `workbook model`'s lines
// (commands_model.cpp): per configuration the all-reduces' time against the
// message size, a training step's time per layout, and a pipeline's idle
// share against its micro-batches; each quantity predicted from the fitted
// link and measured, in one colour.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "cli.hpp"
#include "report.hpp"

namespace workbook::cli {
namespace {

// `workbook model`'s lines (commands_model.cpp): each series' colour, and
// its number when gnuplot is given a number.
const char* const model_colours[] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#7b3294"};
const char* model_colour(size_t i) { return model_colours[i % std::size(model_colours)]; }

double model_number(const nlohmann::json& v, const char* key) {
  return v.contains(key) && v[key].is_number() ? v[key].get<double>() : std::nan("");
}

bool is_model(const nlohmann::json& v, const std::string& kind) {
  return v.value("type", "") == "model" && v.value("kind", "") == kind &&
         std::isfinite(model_number(v, "predicted")) && std::isfinite(model_number(v, "measured"));
}

// A quantity predicted and measured: two series, one colour.
using ModelPair = std::pair<Series, Series>;

void add_model_point(ModelPair& pair, const std::string& name, double x, const nlohmann::json& v) {
  auto& [predicted, measured] = pair;
  predicted.title = name + ": predicted";
  measured.title = name + ": measured";
  predicted.points.push_back({x, model_number(v, "predicted")});
  measured.points.push_back({x, model_number(v, "measured")});
}

void add_model_pair(Plot& plot, ModelPair pair, const std::string& predicted_style, double point_size, size_t colour) {
  auto& [predicted, measured] = pair;
  predicted.style = fmt::format("{} linecolor rgb '{}'", predicted_style, model_colour(colour));
  measured.style = fmt::format("points pointtype 7 pointsize {} linecolor rgb '{}'", point_size, model_colour(colour));
  for (Series* s : {&predicted, &measured}) {
    std::sort(s->points.begin(), s->points.end());
    plot.series.push_back(*s);
  }
}

}  // namespace

// A model_allreduce_<N>nodes_<link> plot per configuration: per algorithm its
// time against the message size, predicted from the link's fitted α and β (a
// line) and measured (points, the same colour); the link's own ping-pong
// and its fit beside them, and the fitted numbers in a corner.
std::vector<Plot> model_allreduce_plots(const std::vector<Line>& lines, bool several_files) {
  const std::vector<std::string> known = {"pingpong", "ring", "recursive_doubling", "rabenseifner", "workbook_ring"};
  struct Configuration {
    // (the known ones' order, then others by name; the series' name): predicted, measured
    std::map<std::pair<size_t, std::string>, ModelPair> by_algorithm;
    std::set<double> sizes;
    std::vector<std::string> fits;
  };
  std::map<std::tuple<int, double, std::string>, Configuration> configurations;  // (nodes, link's rate, link)
  auto configuration = [&](const nlohmann::json& v) -> Configuration& {
    return configurations[{v.value("nodes", 0), v.value("link_bits_per_s", 0.0), v.value("link", "?")}];
  };
  for (const Line& line : lines) {
    const nlohmann::json& v = line.value;
    if (v.value("type", "") == "model" && v.value("kind", "") == "link")
      configuration(v).fits.push_back(fmt::format(
          "fitted link{}: alpha = {:.1f} us, beta = {:.4g} ns/byte ({:.3g} Gbit/s)", from(line, several_files),
          1e6 * model_number(v, "alpha"), 1e9 * model_number(v, "beta"), model_number(v, "bits_per_s") / 1e9));
    const bool pingpong = is_model(v, "pingpong");
    if (!pingpong && !is_model(v, "allreduce")) continue;
    const std::string algorithm = pingpong ? "pingpong" : v.value("algorithm", "?");
    const std::string name = (pingpong ? "ping-pong, one way" : algorithm) + from(line, several_files);
    Configuration& c = configuration(v);
    const size_t rank = static_cast<size_t>(std::find(known.begin(), known.end(), algorithm) - known.begin());
    add_model_point(c.by_algorithm[{rank, name}], name, v.value("size", 0.0), v);
    c.sizes.insert(v.value("size", 0.0));
  }
  std::vector<Plot> plots;
  for (auto& [key, c] : configurations) {
    const auto& [nodes, rate, link] = key;
    Plot plot{fmt::format("model_allreduce_{}nodes_{}", nodes, link),
              fmt::format("All-reduce on {} nodes at {}: predicted from the fitted link (lines), measured (points)",
                          nodes, link),
              "message size (bytes, log scale)", "time (s, log scale)", {}, "", {}};
    size_t colour = 0;
    for (const auto& [order, pair] : c.by_algorithm) add_model_pair(plot, pair, "lines linewidth 2", 1.3, colour++);
    plot.settings = size_axis(c.sizes);
    plot.settings.insert(plot.settings.end(), {"set logscale y 10", "set format y '%g'", "set key top left box opaque"});
    for (size_t i = 0; i < c.fits.size(); ++i)
      plot.settings.push_back(fmt::format("set label {} {} at graph 0.98, graph {} right", i + 1, gnuplot_quoted(c.fits[i]),
                                          0.04 + 0.05 * static_cast<double>(i)));
    plots.push_back(std::move(plot));
  }
  return plots;
}

// model_steps: a training step's time per layout (the x axis's categories,
// in the order first met), predicted (a dashed line through the layouts) and
// measured (points), a colour per link.
Plot model_steps_plot(const std::vector<Line>& lines, bool several_files) {
  Plot plot{"model_steps", "A training step per layout: predicted from the fitted link (dashed), measured (points)",
            "layout", "step time (s, log scale)", {}, "", {}};
  std::vector<std::string> layouts;
  std::map<std::pair<double, std::string>, ModelPair> by_link;  // (rate, name): predicted, measured
  for (const Line& line : lines) {
    const nlohmann::json& v = line.value;
    if (!is_model(v, "step")) continue;
    const std::string layout = v.value("layout", "?");
    auto at = std::find(layouts.begin(), layouts.end(), layout);
    if (at == layouts.end()) at = layouts.insert(layouts.end(), layout);
    const double x = static_cast<double>(at - layouts.begin());
    const std::string name = fmt::format("{} nodes at {}{}", v.value("nodes", 0), v.value("link", "?"),
                                         from(line, several_files));
    add_model_point(by_link[{v.value("link_bits_per_s", 0.0), name}], name, x, v);
  }
  size_t colour = 0;
  for (const auto& [key, pair] : by_link)
    add_model_pair(plot, pair, "linespoints dashtype 2 linewidth 2 pointtype 6 pointsize 1.2", 1.6, colour++);
  std::vector<std::string> tics;
  for (size_t i = 0; i < layouts.size(); ++i) tics.push_back(fmt::format("{} {}", gnuplot_quoted(layouts[i]), i));
  plot.settings = {fmt::format("set xtics ({})", fmt::join(tics, ", ")),
                   fmt::format("set xrange [-0.5:{}]", static_cast<double>(layouts.size()) - 0.5),
                   "set xtics rotate by -35", "set logscale y 10", "set format y '%g'",
                   "set key top left box opaque"};
  return plot;
}

// model_bubble: a pipeline's idle share per stage against its micro-batches,
// a colour per link: measured (points: circles GPipe, squares 1F1B) and
// predicted from the fitted link (dashed), beside the free link's
// (p − 1)/(m + p − 1) (black, a line per pipeline depth).
Plot model_bubble_plot(const std::vector<Line>& lines, bool several_files) {
  Plot plot{"model_bubble",
            "A pipeline of equal stages: the share of a step each stage waits, measured (points), "
            "predicted (dashed), and (p - 1)/(m + p - 1) (black)",
            "micro-batches m", "idle share of the step", {}, "", {}};
  struct LinkSeries {
    std::map<std::string, Series> measured;  // per schedule
    Series predicted;
  };
  std::map<std::pair<double, std::string>, LinkSeries> by_link;  // (rate, name)
  std::map<int, Series> formula;                                 // per depth p
  for (const Line& line : lines) {
    const nlohmann::json& v = line.value;
    if (!is_model(v, "step") || !std::isfinite(model_number(v, "idle_measured"))) continue;
    const double m = model_number(v, "micro_batches");
    const std::string layout = v.value("layout", "?"), schedule = layout.substr(0, layout.find(' '));
    const std::string name = fmt::format("{} nodes at {}{}", v.value("nodes", 0), v.value("link", "?"),
                                         from(line, several_files));
    LinkSeries& link = by_link[{v.value("link_bits_per_s", 0.0), name}];
    Series& measured = link.measured[schedule];
    measured.title = schedule + ", " + name + ": measured";
    measured.points.push_back({m, model_number(v, "idle_measured")});
    if (std::isfinite(model_number(v, "idle_predicted"))) {
      link.predicted.title = name + ": predicted";
      link.predicted.points.push_back({m, model_number(v, "idle_predicted")});
    }
    Series& curve = formula[v.value("ranks", 0)];
    curve.title = fmt::format("(p - 1)/(m + p - 1), p = {}", v.value("ranks", 0));
    curve.points.push_back({m, model_number(v, "bubble")});
  }
  auto add = [&](Series series, const std::string& style) {
    std::sort(series.points.begin(), series.points.end());
    series.points.erase(std::unique(series.points.begin(), series.points.end()), series.points.end());
    series.style = style;
    plot.series.push_back(std::move(series));
  };
  for (const auto& [p, curve] : formula) add(curve, "lines linewidth 2 linecolor rgb 'black'");
  size_t colour = 0;
  for (const auto& [key, link] : by_link) {
    const char* rgb = model_colour(colour++);
    if (!link.predicted.points.empty())
      add(link.predicted, fmt::format("lines dashtype 2 linewidth 2 linecolor rgb '{}'", rgb));
    for (const auto& [schedule, measured] : link.measured)
      add(measured, fmt::format("points pointtype {} pointsize 1.5 linecolor rgb '{}'", schedule == "gpipe" ? 7 : 5, rgb));
  }
  plot.settings = {"set logscale x 2", "set format x '%g'", "set yrange [0:*]", "set key bottom left box opaque"};
  return plot;
}

}  // namespace workbook::cli
