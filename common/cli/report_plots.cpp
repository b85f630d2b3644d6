// report_plots.cpp — `workbook report`'s plots of the tour's and the benches'
// lines (commands_report.cpp lists them and draws each): speedup against the
// ranks, all-reduce bus bandwidth, accuracy and loss per epoch, ch07's bytes
// per rank, and ch06's steps to a target against the batch. Each function
// returns a Plot (report.hpp); one with no series is skipped.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "cli.hpp"
#include "report.hpp"
#include "table.hpp"

namespace workbook::cli {

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
  // The legend right of the plot, outside it: inside, its line per tour row
  // covered the points at the top, the largest speedups (ch09's bf16 row).
  // Left-aligned, the marker first; width -4 takes back some of the room
  // gnuplot reserves beyond the longest title.
  plot.settings = {fmt::format("set xrange [0.5:{}]", max_ranks + 0.5), "set xtics 1", "set yrange [0:*]",
                   "set key outside right top box Left reverse width -4"};
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
    if (i++ % step == 0) tics.push_back(fmt::format("{} {}", gnuplot_quoted(format_bytes(size)), size));
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
                                 gnuplot_quoted(fmt::format("link rate, {} ({:.3g} GB/s)", link, gbytes))));
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
    plot.settings.push_back(
        fmt::format("set label 1 {} at graph 0.02, graph 0.04",
                    gnuplot_quoted(fmt::format("diverged, nothing to draw: {}", fmt::join(missing, "; ")))));
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
                               gnuplot_quoted(fmt::format("fit: S_min (1 + B_crit / B), S_min = {:.0f}, "
                                                          "B_crit = {:.0f} ({})", s_min, b_crit, key)));
    }
    if (type == "steps_model" && v.contains("b_simple") && v["b_simple"].is_number()) {
      const double b_simple = v["b_simple"].get<double>();
      arrows.push_back(fmt::format("set arrow from {0}, graph 0 to {0}, graph 1 nohead dashtype 2 linewidth 2 "
                                   "linecolor 'gray30'", b_simple));
      arrows.push_back(fmt::format("set label {} at {}, graph 0.95 offset 0.5, 0", 
                                   gnuplot_quoted(fmt::format("B_simple = {:.0f} ({})", b_simple, key)), b_simple));
    }
  }
  std::vector<std::string> drawn;
  for (auto& [key, s] : measured) {
    std::sort(s.points.begin(), s.points.end());
    // Perfect scaling from the smallest batch: S(B) = S(B0) · B0 / B.
    const auto [b0, s0] = s.points.front();
    drawn.push_back(fmt::format("{} / x title {} with lines dashtype 2 linecolor 'gray50' linewidth 1", b0 * s0,
                                gnuplot_quoted("perfect scaling (doubling the batch halves the steps): " + key)));
    plot.series.push_back(s);
    if (extra.count(key)) drawn.push_back(extra[key]);
  }
  plot.extra_plot = fmt::format("{}", fmt::join(drawn, ", "));
  plot.settings = {"set logscale xy 2", "set key bottom left box opaque",
                   smallest > 0 ? fmt::format("set xrange [{}:{}]", smallest / 1.5, largest * 1.5) : ""};
  plot.settings.insert(plot.settings.end(), arrows.begin(), arrows.end());
  return plot;
}

}  // namespace workbook::cli
