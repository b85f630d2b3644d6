// commands_report.cpp — `workbook report FILE... --out DIR`: the tour's table
// (tour_table.cpp) and PNG plots of result files (`workbook tour`'s tour.jsonl, `workbook
// bench chNN --json`, `workbook model`'s model.jsonl), drawn by gnuplot (Debian's gnuplot-nox 5.4, its
// pngcairo terminal).
//
//   speedup.png   speedup against the number of ranks or devices, with the linear ideal
//   busbw.png     all-reduce bus bandwidth against the message size: the rings and the library
//   accuracy.png  test accuracy per epoch of the large-batch configurations (ch06), ch03 beside them
//   loss.png      training loss per epoch of every configuration
//   memory.png    bytes per rank by ZeRO stage (ch07's bench), a line per rank count
//   steps.png     steps to a target accuracy against the global batch, log-log (`ch06_train --sweep`),
//                 with perfect scaling, the fitted S_min (1 + B_crit / B) and the noise scale B_simple
//   model_allreduce_<N>nodes_<link>.png   (`workbook model`) one PNG per configuration, so that
//                 each stays readable: per all-reduce algorithm (and the link's ping-pong) its
//                 time against the message size, log-log, predicted from the fitted link as a
//                 line and measured as points of the same colour; the fitted alpha and beta
//   model_steps.png  (`workbook model`, 2 nodes) a training step's time per layout: predicted
//                 (dashed) and measured (points), a colour per link, log y
//   model_bubble.png  (`workbook model`, 2 nodes) a pipeline's measured idle share against its
//                 micro-batches, per schedule and link, beside (p - 1)/(m + p - 1)
//
// Each plot's data (NAME.dat) and script (NAME.gp) are left beside it in DIR:
// `gnuplot DIR/NAME.gp` draws it again after an edit.
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "cli.hpp"
#include "commands.hpp"
#include "table.hpp"
#include "workbook/errors.hpp"

namespace workbook::cli {
namespace {

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

std::string quoted(const std::string& text) { return gnuplot_quoted(text); }

// A title of two lines. gnuplot runs `...` found in double-quoted strings,
// so the text stays in single-quoted pieces, joined by a "\n" of its own.
std::string two_lines(const std::string& first, const std::string& second) {
  return quoted(first) + ".\"\\n\"." + quoted(second);
}

// The lines of every file, each tagged with the file it came from.
struct Line {
  nlohmann::json value;
  std::string source;  // the file's stem; shown in legends when several files are plotted
};

std::vector<Line> read_lines(const std::vector<std::string>& files) {
  std::vector<Line> lines;
  for (const std::string& file : files) {
    std::ifstream in(file);
    WB_CHECK(in.is_open(), "{}: cannot open (a file that `workbook tour` or `workbook bench chNN --json FILE` wrote)",
             file);
    std::string text;
    for (int number = 1; std::getline(in, text); ++number) {
      if (text.empty()) continue;
      nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
      WB_CHECK(value.is_object(), "{}:{}: not a JSON object: these files hold one JSON object per line", file,
               number);
      lines.push_back({std::move(value), fs::path(file).stem().string()});
    }
  }
  return lines;
}

// The text after a series' title naming its file, when several files are plotted.
std::string from(const Line& line, bool several_files) { return several_files ? " [" + line.source + "]" : ""; }

Plot speedup_plot(const std::vector<Line>& lines, bool several_files, int& max_ranks) {
  Plot plot{"speedup", "Speedup over one device (samples/s against the single-device run)",
            "ranks or devices", "speedup (x)", {}, "", {}};
  // The tour: one point per configuration, against ch01's single device.
  for (const Line& line : lines) {
    const nlohmann::json& v = line.value;
    if (v.value("type", "") != "tour" || !v.contains("speedup") || !v["speedup"].is_number()) continue;
    const int devices = v.value("devices", v.value("ranks", 1));
    std::string title = fmt::format("{} {}", v.value("chapter", "?"), v.value("configuration", ""));
    if (v.contains("note")) title += " (a larger batch)";
    plot.series.push_back({title + from(line, several_files), "points pointsize 1.6", {{devices, v["speedup"]}}});
    max_ranks = std::max(max_ranks, devices);
  }
  // `workbook bench` scaling parts: samples/s at each rank count over the same
  // implementation's at one rank, a line per implementation.
  std::map<std::string, std::map<int, double>> rates;  // series -> ranks -> samples/s
  for (const Line& line : lines) {
    const nlohmann::json& v = line.value;
    if (v.value("type", "") != "bench" || !v.contains("config") || v.value("samples_per_s", 0.0) <= 0) continue;
    const std::string key = fmt::format("{} {}, bench: against its own 1-rank run{}", v.value("chapter", "?"),
                                        v.value("impl", "?"), from(line, several_files));
    rates[key][v.value("ranks", 1)] = v.value("samples_per_s", 0.0);
  }
  for (const auto& [title, by_ranks] : rates) {
    const auto one = by_ranks.find(1);
    if (one == by_ranks.end() || by_ranks.size() < 2) continue;
    Series s{title, "linespoints pointsize 1.4 linewidth 2", {}};
    for (const auto& [ranks, rate] : by_ranks) {
      s.points.push_back({ranks, rate / one->second});
      max_ranks = std::max(max_ranks, ranks);
    }
    plot.series.push_back(s);
  }
  // Note: several configurations share a rank count (the tour's 2-rank rows):
  // the points at one count are spread sideways by a little, so that none
  // hides another.
  std::map<double, std::vector<Series*>> at_count;
  for (Series& s : plot.series)
    if (s.points.size() == 1) at_count[s.points[0].first].push_back(&s);
  for (auto& [count, group] : at_count)
    for (size_t i = 0; i < group.size(); ++i)
      group[i]->points[0].first += 0.06 * (static_cast<double>(i) - static_cast<double>(group.size() - 1) / 2);
  plot.settings = {fmt::format("set xrange [0.5:{}]", max_ranks + 0.5), "set xtics 1", "set yrange [0:*]",
                   "set key top left box opaque"};
  plot.extra_plot = "x title 'linear ideal (speedup = ranks)' with lines dashtype 2 linecolor 'gray40' linewidth 2";
  return plot;
}

// A log2 x axis of message sizes: a tic at every size (every other one past
// 12), named in binary units.
std::vector<std::string> size_axis(const std::set<double>& sizes) {
  std::vector<std::string> tics;
  const size_t step = sizes.size() > 12 ? 2 : 1;
  size_t i = 0;
  for (const double size : sizes)
    if (i++ % step == 0) tics.push_back(fmt::format("{} {}", quoted(format_bytes(size)), size));
  return {"set logscale x 2", fmt::format("set xtics ({})", fmt::join(tics, ", ")),
          sizes.empty() ? "" : fmt::format("set xrange [{}:{}]", *sizes.begin() / 1.5, *sizes.rbegin() * 1.5)};
}

Plot busbw_plot(const std::vector<Line>& lines, bool several_files) {
  Plot plot{"busbw", "All-reduce bus bandwidth (sum, float32, in place)", "message size (bytes)",
            "busbw (GB/s) = algbw x 2(n-1)/n", {}, "", {}};
  const std::map<std::string, std::string> names = {{"reference-ring", "reference ring (solutions/)"},
                                                    {"student-ring", "your ring (chapters/)"},
                                                    {"mpi", "library: MPI_Allreduce"},
                                                    {"nccl", "library: NCCL"}};
  std::map<std::string, Series> by_impl;
  std::vector<std::string> order;
  std::set<double> sizes;
  std::map<std::string, double> links;  // an emulated link's rate in GB/s: the limit busbw can reach
  for (const Line& line : lines) {
    const nlohmann::json& v = line.value;
    // memcpy (one copy of the buffer) is left out: up to ten times the
    // all-reduces' busbw here, it would flatten the curves being compared.
    if (v.value("type", "") != "bench_bandwidth" || v.value("impl", "") == "memcpy") continue;
    const std::string impl = v.value("impl", "?");
    const auto name = names.find(impl);
    const std::string over = v.contains("link") ? fmt::format(" on {} nodes at {}", v.value("nodes", 0), v.value("link", "")) : "";
    const std::string key = fmt::format("{} ranks{}, {}{}", v.value("ranks", 0) > 0 ? std::to_string(v.value("ranks", 0)) : "?",
                                        over, name != names.end() ? name->second : impl, from(line, several_files));
    if (v.value("link_bits_per_s", 0.0) > 0) links[v.value("link", "")] = v.value("link_bits_per_s", 0.0) / 8e9;
    if (!by_impl.count(key)) {
      order.push_back(key);
      by_impl[key] = {key, "linespoints linewidth 2 pointsize 1.2", {}};
    }
    by_impl[key].points.push_back({v.value("size", 0.0), v.value("busbw", 0.0)});
    sizes.insert(v.value("size", 0.0));
  }
  for (const std::string& key : order) {
    Series s = by_impl[key];
    std::sort(s.points.begin(), s.points.end());
    plot.series.push_back(s);
  }
  // The link's rate, the physical limit: busbw is what each rank's link carries.
  std::vector<std::string> limits;
  for (const auto& [link, gbytes] : links)
    limits.push_back(fmt::format("{} title {} with lines dashtype 2 linecolor 'gray40' linewidth 2", gbytes,
                                 quoted(fmt::format("link rate, {} ({:.3g} GB/s)", link, gbytes))));
  if (!limits.empty()) plot.extra_plot = fmt::format("{}", fmt::join(limits, ", "));
  plot.settings = size_axis(sizes);
  plot.settings.push_back("set key top left box opaque");
  // A link's 0.125 GB/s beside shared memory's several GB/s: only a log
  // scale shows both, and how far each curve stays below its limit.
  if (!limits.empty()) {
    plot.settings.push_back("set logscale y 10");
    plot.ylabel = "busbw (GB/s, log scale) = algbw x 2(n-1)/n";
  } else {
    plot.settings.push_back("set yrange [0:*]");
  }
  return plot;
}

// Per-epoch curves of the tour's configurations: `metric` of the tour_epoch
// lines of the chapters accepted by `keep`.
Plot epoch_plot(const std::vector<Line>& lines, bool several_files, const std::string& name, const std::string& title,
                const std::string& ylabel, const std::string& metric, const std::function<bool(const std::string&)>& keep) {
  Plot plot{name, title, "epoch", ylabel, {}, "", {}};
  std::map<std::string, Series> by_config;
  std::vector<std::string> order;
  std::set<std::string> diverged;  // a diverged epoch's loss is null: its curve stops there
  auto key_of = [&](const Line& line) {
    return fmt::format("{} {}{}", line.value.value("chapter", "?"), line.value.value("configuration", ""),
                       from(line, several_files));
  };
  for (const Line& line : lines)
    if (line.value.value("type", "") == "tour_epoch" && line.value.contains("train_loss") &&
        line.value["train_loss"].is_null())
      diverged.insert(key_of(line));
  for (const Line& line : lines) {
    const nlohmann::json& v = line.value;
    if (v.value("type", "") != "tour_epoch" || !keep(v.value("chapter", "")) || !v.contains(metric) ||
        !v[metric].is_number())
      continue;
    const std::string key = key_of(line);
    if (!by_config.count(key)) {
      order.push_back(key);
      const std::string title = fmt::format("{} {}{}{}", v.value("chapter", "?"), v.value("configuration", ""),
                                            diverged.count(key) ? " (diverged)" : "", from(line, several_files));
      by_config[key] = {title, "linespoints linewidth 2 pointsize 1.2", {}};
    }
    by_config[key].points.push_back({v.value("epoch", 0.0), v[metric].get<double>()});
  }
  for (const std::string& key : order) plot.series.push_back(by_config[key]);
  plot.settings = {"set xtics 1", "set key outside right top box"};
  // A run that diverged in its first epoch has no point to draw: say so on the plot.
  std::vector<std::string> missing;
  for (const std::string& key : diverged)
    if (!by_config.count(key) && std::find(missing.begin(), missing.end(), key) == missing.end()) {
      bool kept = false;
      for (const Line& line : lines)
        kept = kept || (line.value.value("type", "") == "tour_epoch" && key_of(line) == key &&
                        keep(line.value.value("chapter", "")));
      if (kept) missing.push_back(key);
    }
  if (!missing.empty())
    plot.settings.push_back(fmt::format("set label 1 {} at graph 0.02, graph 0.04",
                                        quoted(fmt::format("diverged, nothing to draw: {}", fmt::join(missing, "; ")))));
  return plot;
}

// ch07's bench rows: what one rank holds (parameters + gradients + optimizer
// state, counted from the tensors after a step) at each stage, a line per
// rank count and implementation.
Plot memory_plot(const std::vector<Line>& lines, bool several_files) {
  Plot plot{"memory", "Bytes per rank by ZeRO stage: parameters + gradients + optimizer state (FashionCNN, Adam)",
            "stage (0 = DDP, 1 = optimizer state sharded, 2 = gradients too, 3 = parameters too)",
            "MiB held by the rank holding the most", {}, "", {}};
  std::map<std::string, Series> by_key;
  for (const Line& line : lines) {
    const nlohmann::json& v = line.value;
    if (v.value("type", "") != "bench_row" || v.value("chapter", "") != "ch07" || !v.contains("stage") ||
        !v.contains("held_mib"))
      continue;
    auto number = [&](const char* key) {
      const nlohmann::json& x = v[key];
      return x.is_string() ? std::stod(x.get<std::string>()) : x.get<double>();
    };
    const std::string title = fmt::format("{} rank(s), {}{}", v["ranks"].is_string() ? v["ranks"].get<std::string>()
                                                                                      : v["ranks"].dump(),
                                          v.value("impl", "?"), from(line, several_files));
    const double total = number("held_mib");
    Series& held = by_key[title + " held"];
    held.title = title + ": held after a step";
    held.style = "linespoints linewidth 2 pointsize 1.4";
    held.points.push_back({number("stage"), total});
  }
  for (auto& [key, series] : by_key) {
    std::sort(series.points.begin(), series.points.end());
    plot.series.push_back(series);
  }
  plot.settings = {"set xrange [-0.3:3.3]", "set xtics 1", "set yrange [0:*]", "set key top right box opaque"};
  return plot;
}

// `ch06_train --sweep --json FILE`: the steps each batch needed to reach the
// target (its best rate's), a line per method, on log-log axes; beside them
// perfect scaling from the smallest batch (S ∝ 1/B), the fitted model
// S = S_min (1 + B_crit / B), and the measured noise scale B_simple as a
// vertical line: where McCandlish et al. predict the halving stops.
Plot steps_plot(const std::vector<Line>& lines, bool several_files) {
  Plot plot{"steps", "Steps to the target test accuracy against the global batch, each batch's rate tuned",
            "global batch B (samples per step, log scale)", "steps to the target (log scale)", {}, "", {}};
  std::map<std::string, Series> measured;
  std::map<std::string, std::string> extra;
  std::vector<std::string> arrows;
  double smallest = 0, largest = 0;
  for (const Line& line : lines) {
    const nlohmann::json& v = line.value;
    const std::string type = v.value("type", "");
    const std::string key = fmt::format("{}, target {:.2f}{}", v.value("method", "?"), v.value("target", 0.0),
                                        from(line, several_files));
    if (type == "steps_to_target" && v.contains("steps") && v["steps"].is_number()) {
      Series& s = measured[key];
      s.title = "measured: " + key;
      s.style = "linespoints linewidth 2 pointsize 1.4";
      const double b = v.value("global_batch", 0.0);
      s.points.push_back({b, v["steps"].get<double>()});
      smallest = smallest == 0 ? b : std::min(smallest, b);
      largest = std::max(largest, b);
    }
    if (type == "steps_model" && v.contains("s_min") && v["s_min"].is_number()) {
      const double s_min = v["s_min"].get<double>(), b_crit = v["b_crit"].get<double>();
      extra[key] = fmt::format("{} * (1 + {} / x) title {} with lines dashtype 3 linewidth 2", s_min, b_crit,
                               quoted(fmt::format("fit: S_min (1 + B_crit / B), S_min = {:.0f}, B_crit = {:.0f} ({})",
                                                  s_min, b_crit, key)));
    }
    if (type == "steps_model" && v.contains("b_simple") && v["b_simple"].is_number()) {
      const double b_simple = v["b_simple"].get<double>();
      arrows.push_back(fmt::format("set arrow from {0}, graph 0 to {0}, graph 1 nohead dashtype 2 linewidth 2 "
                                   "linecolor 'gray30'", b_simple));
      arrows.push_back(fmt::format("set label {} at {}, graph 0.95 offset 0.5, 0", 
                                   quoted(fmt::format("B_simple = {:.0f} ({})", b_simple, key)), b_simple));
    }
  }
  std::vector<std::string> drawn;
  for (auto& [key, s] : measured) {
    std::sort(s.points.begin(), s.points.end());
    // Perfect scaling from the smallest batch: S(B) = S(B0) · B0 / B.
    const auto [b0, s0] = s.points.front();
    drawn.push_back(fmt::format("{} / x title {} with lines dashtype 2 linecolor 'gray50' linewidth 1", b0 * s0,
                                quoted("perfect scaling (doubling the batch halves the steps): " + key)));
    plot.series.push_back(s);
    if (extra.count(key)) drawn.push_back(extra[key]);
  }
  plot.extra_plot = fmt::format("{}", fmt::join(drawn, ", "));
  plot.settings = {"set logscale xy 2", "set key bottom left box opaque",
                   smallest > 0 ? fmt::format("set xrange [{}:{}]", smallest / 1.5, largest * 1.5) : ""};
  plot.settings.insert(plot.settings.end(), arrows.begin(), arrows.end());
  return plot;
}

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

// Writes NAME.dat and NAME.gp into `out` and runs gnuplot; returns the PNG's path.
fs::path draw(const Plot& plot, const fs::path& out, const std::string& subtitle) {
  const fs::path data = out / (plot.name + ".dat"), script = out / (plot.name + ".gp"),
                 png = out / (plot.name + ".png");
  {
    std::ofstream dat(data);
    WB_CHECK(dat.is_open(), "{}: cannot open for writing", data.string());
    for (size_t i = 0; i < plot.series.size(); ++i) {
      dat << "# " << plot.series[i].title << "\n";
      for (const auto& [x, y] : plot.series[i].points) dat << fmt::format("{:.9g} {:.9g}\n", x, y);
      dat << "\n\n";  // gnuplot: the next index
    }
  }
  std::ofstream gp(script);
  WB_CHECK(gp.is_open(), "{}: cannot open for writing", script.string());
  gp << "# " << plot.name << ".gp: written by `workbook report`; run `gnuplot " << script.string()
     << "` to draw it again.\n";
  gp << "set terminal pngcairo size 1100,650 noenhanced font 'Sans,11'\n";
  gp << "set output " << quoted(png.string()) << "\n";
  gp << "set title " << two_lines(plot.title, subtitle) << "\n";
  gp << "set xlabel " << quoted(plot.xlabel) << "\nset ylabel " << quoted(plot.ylabel) << "\n";
  gp << "set grid\n";
  for (const std::string& s : plot.settings)
    if (!s.empty()) gp << s << "\n";
  std::vector<std::string> parts;
  if (!plot.extra_plot.empty()) parts.push_back(plot.extra_plot);
  for (size_t i = 0; i < plot.series.size(); ++i)
    parts.push_back(fmt::format("{} index {} using 1:2 title {} with {}", quoted(data.string()), i,
                                quoted(plot.series[i].title), plot.series[i].style));
  gp << "plot " << fmt::format("{}", fmt::join(parts, ", \\\n     ")) << "\n";
  gp.close();
  run_gnuplot(script, png);
  return png;
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && access((fs::path(dir) / program).c_str(), X_OK) == 0) return true;
  return false;
}

// The tour rows of the files, one table (tour_table.cpp), file after file
// (two machines, two days: the same rows in the same order).
void print_tour_rows(const std::vector<Line>& lines, bool several_files) {
  std::vector<TourTableRow> rows;
  for (const Line& line : lines)
    if (line.value.value("type", "") == "tour") rows.push_back({line.value, several_files ? line.source : ""});
  if (rows.empty()) return;
  print_tour_table(rows);
  fmt::print("\n");
}

}  // namespace

std::string gnuplot_quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

void run_gnuplot(const fs::path& script, const fs::path& png) {
  fs::remove(png);
  ProcessOptions options;
  options.capture = true;
  options.timeout_s = 60;
  const ProcessResult done = run_process({"gnuplot", script.string()}, options);
  WB_CHECK(done.exit_code == 0, "gnuplot {} failed (exit status {}):\n{}", script.string(), done.exit_code,
           done.output);
  std::ifstream in(png, std::ios::binary);
  char signature[8] = {};
  in.read(signature, 8);
  WB_CHECK(in && std::string(signature, 8) == "\x89PNG\r\n\x1a\n", "gnuplot wrote no PNG at {}:\n{}", png.string(),
           done.output);
}

int cmd_report(const std::vector<std::string>& files_given, const std::optional<std::string>& out_dir) {
  std::vector<std::string> files = files_given;
  if (files.empty()) {
    const fs::path tour = build_dir() / "tour" / "tour.jsonl";
    WB_CHECK(fs::exists(tour), "no FILE given, and no {} yet: run `workbook tour` first, or name result files "
                               "(`workbook bench chNN --json FILE` writes them)", tour.string());
    files.push_back(tour.string());
  }
  const std::vector<Line> all_lines = read_lines(files);
  const bool several = files.size() > 1;
  // Absolute: the scripts left in DIR draw again from anywhere.
  const fs::path out = fs::absolute(out_dir ? fs::path(*out_dir) : build_dir() / "report");

  // A --trace file is one document: its timeline. The rest are results.
  std::vector<Line> lines;
  int timelines = 0;
  for (const Line& line : all_lines) {
    if (!is_trace(line.value)) {
      lines.push_back(line);
      continue;
    }
    if (timelines++ == 0) {
      WB_CHECK(on_path("gnuplot"), "gnuplot not found: `workbook report` draws with Debian's gnuplot-nox "
                                   "(./install-packages installs it)");
      fs::create_directories(out);
    }
    const fs::path png = draw_timeline(line.value, "timeline-" + line.source, out, line.source);
    fmt::print("{:<13} one step of every rank: {}\n", "timeline", png.string());
  }
  if (timelines > 0 && lines.empty()) return 0;

  // The subtitle: where the numbers come from.
  std::string subtitle = fmt::format("from {}", fmt::join(files.begin(), files.end(), ", "));
  for (const Line& line : lines)
    if (line.value.value("type", "") == "tour_header") {
      subtitle = fmt::format("workbook tour{}, {} cores, LibTorch {}, {}", line.value.value("full", false) ? " --full" : line.value.value("smoke", false) ? " --smoke" : "",
                             line.value.value("cores", 0), line.value.value("torch", "?"), line.value.value("date", "?"));
      break;
    } else if (line.value.value("type", "") == "model_header") {
      subtitle = fmt::format("workbook model{}, {} cores, {}", line.value.value("quick", false) ? " --quick" : "",
                             line.value.value("cores", 0), line.value.value("date", "?"));
      break;
    }

  print_tour_rows(lines, several);
  int max_ranks = 1;
  std::vector<Plot> plots = {
      speedup_plot(lines, several, max_ranks),
      busbw_plot(lines, several),
      epoch_plot(lines, several, "accuracy", "Test accuracy per epoch: large global batches (ch06) beside DDP (ch03)",
                 "test accuracy (fraction correct)", "test_accuracy",
                 [](const std::string& chapter) { return chapter == "ch06" || chapter == "ch03"; }),
      epoch_plot(lines, several, "loss", "Training loss per epoch, every configuration",
                 "training loss (cross-entropy, mean over the epoch)", "train_loss",
                 [](const std::string&) { return true; }),
      memory_plot(lines, several),
      steps_plot(lines, several),
  };
  std::vector<Plot> model_plots = model_allreduce_plots(lines, several);
  if (model_plots.empty()) model_plots.push_back({"model_allreduce_*", "", "", "", {}, "", {}});  // to say it is skipped
  plots.insert(plots.end(), model_plots.begin(), model_plots.end());
  plots.push_back(model_steps_plot(lines, several));
  plots.push_back(model_bubble_plot(lines, several));
  const std::map<std::string, std::string> needs = {
      {"speedup", "tour rows, or `workbook bench` scaling lines"},
      {"busbw", "bench_bandwidth lines (the tour's ch04 row, or `workbook bench ch04 --json FILE`)"},
      {"accuracy", "tour_epoch lines of ch06 (the tour)"},
      {"loss", "tour_epoch lines (the tour)"},
      {"memory", "ch07 bench rows (`workbook bench ch07 --json FILE`)"},
      {"steps", "steps_to_target lines (`workbook run ch06 --ranks 2 --sweep -- --json FILE`)"},
      {"model_allreduce_*", "model lines of kind allreduce or pingpong (`workbook model`)"},
      {"model_steps", "model lines of kind step (`workbook model` on 2 nodes)"},
      {"model_bubble", "model lines of kind step with idle_measured (`workbook model`'s pipelines)"}};
  int drawn = 0;
  for (const Plot& plot : plots) {
    if (plot.series.empty()) {
      fmt::print("{:<13} skipped: no {} in the files\n", plot.name + ".png", needs.at(plot.name));
      continue;
    }
    if (drawn == 0) {
      WB_CHECK(on_path("gnuplot"), "gnuplot not found: `workbook report` draws with Debian's gnuplot-nox "
                                   "(./install-packages installs it)");
      fs::create_directories(out);
    }
    const fs::path png = draw(plot, out, subtitle);
    fmt::print("{:<13} {} series: {}\n", plot.name + ".png", plot.series.size(), png.string());
    ++drawn;
  }
  WB_CHECK(drawn > 0, "nothing to plot in {}: no tour, tour_epoch, bench, bench_bandwidth, bench_row, steps_to_target or model lines",
           fmt::join(files.begin(), files.end(), ", "));
  return 0;
}

}  // namespace workbook::cli
