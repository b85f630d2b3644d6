// bench_tables.cpp — `workbook bench`'s tables, one per kind of part
// (BenchKind), each printed through the one table printer (table.hpp): the
// medians of every implementation's runs, the student's against the
// reference's, and the summary lines --json writes.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "bench.hpp"
#include "table.hpp"
#include "workbook/statistics.hpp"

namespace workbook::cli {
namespace {

std::string format_metric(double value) {
  if (value == 0.0) return "0";
  const double magnitude = std::abs(value);
  return magnitude >= 100 ? fmt::format("{:.1f}", value) : magnitude >= 1 ? fmt::format("{:.3f}", value)
                                                                           : fmt::format("{:.4f}", value);
}

// A failed implementation's line says why, without the how-to-go-on part of a
// "not done yet" message (the footer and `workbook check` say it).
std::string short_error(const Impl& impl) {
  const std::string error = impl.error();
  return error.substr(0, error.find(": replace"));
}

// Below a part's table: why the student's column is empty (if it is), and the part's note.
void print_footer(const BenchPart& part, const std::vector<Impl>& impls) {
  if (!impls[0].error().empty()) fmt::print("\nstudent: {}\n", short_error(impls[0]));
  if (!part.note.empty()) fmt::print("\n{}\n", part.note);
}

// ---- training and scaling parts: whole training runs, by samples/s --------------

// The medians of an implementation's successful runs (runs == 0: none succeeded).
// A run's quality: its test accuracy, or (a language model's) its held-out
// loss when it reports one and no accuracy.
struct RunMedians {
  size_t runs = 0;
  double samples_per_s = 0, epoch_s = 0, quality = 0, peak_mem_bytes = 0;
  bool quality_is_loss = false;
  std::optional<int64_t> parameters;  // the model's size, when its runs say
};

RunMedians medians_of(const Impl& impl) {
  std::vector<double> rate, epoch, quality, memory;
  RunMedians m;
  for (const RunOutcome& o : impl.runs) {
    if (!o.ok) continue;
    rate.push_back(o.result.value("samples_per_s", 0.0));
    epoch.push_back(o.result.value("epoch_s", 0.0));
    m.quality_is_loss = !o.result.contains("test_accuracy") && o.result.contains("test_loss");
    quality.push_back(o.result.value(m.quality_is_loss ? "test_loss" : "test_accuracy", 0.0));
    memory.push_back(o.result.value("peak_mem_bytes", 0.0));
    if (o.result.contains("parameters")) m.parameters = o.result["parameters"].get<int64_t>();
  }
  m.runs = rate.size();
  m.samples_per_s = median(rate), m.epoch_s = median(epoch), m.quality = median(quality), m.peak_mem_bytes = median(memory);
  return m;
}

// The columns of both: the implementation, a scaling part's configuration, then the medians.
std::vector<Column> training_columns(int impl_width, bool with_config, bool quality_is_loss = false) {
  std::vector<Column> columns = {{{"impl"}, impl_width, /*left=*/true}};
  if (with_config) columns.push_back({{"config"}, 6});
  columns.insert(columns.end(), {{{"samples/s"}, 11}, {{"epoch_s"}, 9}, {{quality_is_loss ? "val_loss" : "test_acc"}, 9}, {{"peak_mem"}, 12},
                                 {{"vs_reference"}, 13}});
  return columns;
}

// An implementation's line: its cells in `columns`, or (no run succeeded) why not.
void print_training_row(const std::vector<Column>& columns, std::vector<std::string> cells, const Impl& impl,
                        const RunMedians& m, double ratio) {
  if (m.runs == 0) return print_row(columns, cells, " " + short_error(impl));
  cells.insert(cells.end(), {fmt::format("{:.1f}", m.samples_per_s), fmt::format("{:.2f}", m.epoch_s),
                             fmt::format("{:.4f}", m.quality), format_mib(m.peak_mem_bytes),
                             fmt::format("{:.2f}x", ratio)});
  print_row(columns, cells);
}

nlohmann::json training_line(const Chapter& chapter, const Impl& impl, const RunMedians& m, double ratio) {
  return {{"type", "bench"},         {"chapter", chapter.id},          {"impl", impl.name},
          {"runs", m.runs},          {"samples_per_s", m.samples_per_s}, {"epoch_s", m.epoch_s},
          {m.quality_is_loss ? "test_loss" : "test_accuracy", m.quality}, {"peak_mem_bytes", m.peak_mem_bytes},
          {"vs_reference", ratio}};
}

}  // namespace

int print_training_table(const Chapter& chapter, const BenchPart& part, const std::vector<Impl>& impls, int ranks,
                         int threads, JsonFile& json) {
  const RunMedians reference = medians_of(impls[1]);
  const double reference_rate = reference.samples_per_s;
  const std::vector<Column> columns = training_columns(16, /*with_config=*/false, reference.quality_is_loss);
  fmt::print("\n");
  print_heading(columns);
  for (const Impl& impl : impls) {
    const RunMedians m = medians_of(impl);
    const double ratio = reference_rate > 0 ? m.samples_per_s / reference_rate : 0.0;
    print_training_row(columns, {impl.name}, impl, m, ratio);
    // A baseline of another size does other work: its ratio says nothing.
    if (m.parameters && reference.parameters && *m.parameters != *reference.parameters)
      fmt::print("  ^ {}: a model of {} parameters, the reference's has {}: not the same work\n", impl.name,
                 *m.parameters, *reference.parameters);
    if (m.runs > 0) {
      nlohmann::json line = training_line(chapter, impl, m, ratio);
      line.update({{"ranks", ranks}, {"threads", threads}});
      json.write(line);
    }
  }
  if (!part.note.empty()) fmt::print("\n{}\n", part.note);
  return reference_rate > 0 ? 0 : 1;  // without the reference there is nothing to compare with
}

// Then each multi-rank configuration's scaling efficiency against the
// single-rank one: rate_N / (N x rate_1).
int print_scaling_tables(const Chapter& chapter, const BenchPart& part, const std::vector<ScalingRuns>& configs,
                         JsonFile& json) {
  auto median_rate = [](const Impl& impl) { return medians_of(impl).samples_per_s; };
  const std::vector<Column> columns = training_columns(14, /*with_config=*/true);
  fmt::print("\n");
  print_heading(columns);
  bool reference_ok = false;
  for (const ScalingRuns& runs : configs) {
    const double reference_rate = median_rate(runs.impls[1]);
    reference_ok = reference_ok || reference_rate > 0;
    for (const Impl& impl : runs.impls) {
      const RunMedians m = medians_of(impl);
      const double ratio = reference_rate > 0 ? m.samples_per_s / reference_rate : 0.0;
      print_training_row(columns, {impl.name, runs.config.name}, impl, m, ratio);
      if (m.runs > 0) {
        nlohmann::json line = training_line(chapter, impl, m, ratio);
        line.update({{"config", runs.config.name}, {"ranks", runs.config.ranks}, {"threads", runs.config.threads}});
        json.write(line);
      }
    }
  }
  const auto single =
      std::find_if(configs.begin(), configs.end(), [](const ScalingRuns& c) { return c.config.ranks == 1; });
  if (single != configs.end()) {
    const std::vector<Column> efficiency_columns = {
        {{"impl"}, 14, /*left=*/true}, {{"config"}, 6}, {{"efficiency"}, 11}};
    fmt::print("\n");
    print_heading(efficiency_columns);
    for (const ScalingRuns& runs : configs) {
      if (runs.config.ranks == 1) continue;
      for (size_t i = 0; i < runs.impls.size(); ++i) {
        const double one = median_rate(single->impls[i]), many = median_rate(runs.impls[i]);
        if (one <= 0 || many <= 0) continue;
        const double efficiency = many / (runs.config.ranks * one);
        print_row(efficiency_columns, {runs.impls[i].name, runs.config.name, fmt::format("{:.3f}", efficiency)},
                  fmt::format("   = {:.1f} / ({} x {:.1f})", many, runs.config.ranks, one));
        json.write({{"type", "bench_scaling"}, {"chapter", chapter.id}, {"impl", runs.impls[i].name},
                    {"config", runs.config.name}, {"ranks", runs.config.ranks}, {"efficiency", efficiency}});
      }
    }
  }
  if (!part.note.empty()) fmt::print("\n{}\n", part.note);
  return reference_ok ? 0 : 1;
}

// ---- rows parts ------------------------------------------------------------------

// The program measures many points itself and writes one JSON line per point
// and implementation: {"type": "row", <keys>, "impl", <metric>, <extra
// metrics>}, where impl "self" is the code the binary was built from. Rows
// from the student's build become "student", from the reference build
// "reference"; other impls (baselines inside the program) are pooled from
// both. Printed: one line per point, a column per impl for the metric, then
// the student's speed relative to the reference, then each extra metric for
// the student and the reference.
int print_rows_table(const Chapter& chapter, const BenchPart& part, const std::vector<Impl>& impls, JsonFile& json) {
  const std::vector<std::string>& keys = part.keys;
  std::vector<std::string> metrics = {part.metric};
  metrics.insert(metrics.end(), part.extra_metrics.begin(), part.extra_metrics.end());
  struct Point {
    std::vector<std::string> key;  // the key columns, printed
    std::map<std::string, std::map<std::string, std::vector<double>>> values;  // impl -> metric -> samples
  };
  std::vector<Point> points;
  std::vector<std::string> impl_order = {"student", "reference"};
  auto add_rows = [&](const RunOutcome& outcome, const std::string& self_name) {
    for (const nlohmann::json& line : outcome.lines) {
      if (line.value("type", "") != "row") continue;
      std::vector<std::string> key;
      for (const auto& k : keys)
        key.push_back(!line.contains(k) ? "-" : line[k].is_string() ? line[k].get<std::string>() : line[k].dump());
      auto it = std::find_if(points.begin(), points.end(), [&](const Point& p) { return p.key == key; });
      if (it == points.end()) it = points.insert(points.end(), Point{key, {}});
      std::string impl = line.value("impl", "self");
      if (impl == "self") impl = self_name;
      if (std::find(impl_order.begin(), impl_order.end(), impl) == impl_order.end()) impl_order.push_back(impl);
      for (const std::string& m : metrics)
        if (line.contains(m) && line[m].is_number()) it->values[impl][m].push_back(line[m].get<double>());
    }
  };
  bool reference_ok = false;
  for (const Impl& impl : impls)
    for (const RunOutcome& outcome : impl.runs)
      if (outcome.ok) {
        add_rows(outcome, impl.name);
        reference_ok = reference_ok || impl.name == "reference";
      }
  auto median_of = [](const Point& p, const std::string& impl, const std::string& m) -> std::optional<double> {
    auto i = p.values.find(impl);
    if (i == p.values.end()) return std::nullopt;
    auto j = i->second.find(m);
    if (j == i->second.end() || j->second.empty()) return std::nullopt;
    return median(j->second);
  };
  auto cell = [](std::optional<double> v) { return v ? format_metric(*v) : std::string("-"); };

  // The key columns: wide enough for every cell, right-aligned, with a space before each.
  const int width = 13;
  std::vector<Column> columns;
  for (size_t k = 0; k < keys.size(); ++k) {
    size_t key_width = std::max<size_t>(9, keys[k].size() + 1);
    for (const Point& p : points) key_width = std::max(key_width, p.key[k].size() + 1);
    columns.push_back({{keys[k]}, static_cast<int>(key_width), false, ""});
  }
  for (const auto& impl : impl_order) columns.push_back({{impl.substr(0, width - 3) + " " + part.metric}, width});
  columns.push_back({{"speed"}, 9});
  for (const auto& extra : part.extra_metrics)
    for (const char* impl : {"stu", "ref"}) columns.push_back({{fmt::format("{} {}", impl, extra)}, width + 4});
  fmt::print("\n");
  print_heading(columns);

  for (const Point& p : points) {
    std::vector<std::string> cells = p.key;
    for (const auto& impl : impl_order) cells.push_back(cell(median_of(p, impl, part.metric)));
    auto student = median_of(p, "student", part.metric), reference = median_of(p, "reference", part.metric);
    if (student && reference && *student > 0 && *reference > 0)
      cells.push_back(fmt::format("{:.2f}x", part.lower_is_better ? *reference / *student : *student / *reference));
    else
      cells.push_back("-");
    for (const auto& extra : part.extra_metrics)
      for (const char* impl : {"student", "reference"}) cells.push_back(cell(median_of(p, impl, extra)));
    print_row(columns, cells);
    for (const auto& impl : impl_order) {
        nlohmann::json row = {{"type", "bench_row"}, {"chapter", chapter.id}, {"impl", impl}};
        for (size_t k = 0; k < keys.size(); ++k) row[keys[k]] = p.key[k];
        bool any = false;
        for (const std::string& m : metrics)
          if (auto v = median_of(p, impl, m)) {
            row[m] = *v;
            any = true;
          }
      if (any) json.write(row);
    }
  }
  print_footer(part, impls);
  return reference_ok ? 0 : 1;
}

// ---- bandwidth parts ---------------------------------------------------------------

// nccl-tests' table: the program writes one row per buffer size and
// implementation, {"type": "row", "size", "count", "impl", "time_us",
// "algbw", "busbw", "wrong"}, where impl "self" is the build's own collective
// and the others the library's ("mpi", "nccl") and "memcpy". Printed: a line
// per size with a group of columns per implementation (the student's, the
// reference's, the library's), then the reference's busbw over the library's
// measured in the same run ("ref/lib"), and memcpy.
int print_bandwidth_table(const Chapter& chapter, const BenchPart& part, const std::vector<Impl>& impls,
                          const Placement& placement, JsonFile& json) {
  struct Cell {
    std::vector<double> time_us, algbw, busbw, vs_library;
    int64_t wrong = 0;
    int ranks = 0;
  };
  std::map<int64_t, std::map<std::string, Cell>> by_size;  // size -> impl -> samples
  std::vector<std::string> groups = {"student-ring", "reference-ring"};
  for (const Impl& impl : impls)
    for (const RunOutcome& outcome : impl.runs) {
      if (!outcome.ok) continue;
      for (const nlohmann::json& line : outcome.lines) {
        if (line.value("type", "") != "row") continue;
        std::string name = line.value("impl", "self");
        if (name == "self") name = impl.name + "-ring";
        else if (impl.name != "reference") continue;  // the library's numbers: from the reference's runs
        if (name != "memcpy" && std::find(groups.begin(), groups.end(), name) == groups.end()) groups.push_back(name);
        Cell& cell = by_size[line.value("size", int64_t{0})][name];
        cell.time_us.push_back(line.value("time_us", 0.0));
        cell.algbw.push_back(line.value("algbw", 0.0));
        cell.busbw.push_back(line.value("busbw", 0.0));
        if (line.contains("vs_library")) cell.vs_library.push_back(line.value("vs_library", 0.0));
        cell.wrong = std::max(cell.wrong, line.value("wrong", int64_t{0}));
        cell.ranks = line.value("ranks", 0);
      }
    }
  std::vector<Column> columns = {{{"", "size", "(B)"}, 10}, {{"", "count", "(elements)"}, 10}, {{"", "type", ""}, 5}};
  for (const std::string& g : groups)
    columns.insert(columns.end(), {{{"", "time", "(us)"}, 9, false, " | ", g},
                                   {{"", "algbw", "(GB/s)"}, 6, false, " ", g},
                                   {{"", "busbw", "(GB/s)"}, 6, false, " ", g},
                                   {{"", "#wrong", ""}, 6, false, " ", g}});
  columns.insert(columns.end(),
                 {{{"ref/lib", "busbw", ""}, 7, false, " | "}, {{"memcpy", "", "(GB/s)"}, 7, false, " | "}});
  fmt::print("\n");
  print_heading(columns);

  std::map<std::string, std::vector<double>> busbw_of;
  for (const auto& [size, cells_of] : by_size) {
    std::vector<std::string> cells = {std::to_string(size), std::to_string(size / 4), "float"};
    for (const std::string& g : groups) {
      auto it = cells_of.find(g);
      if (it == cells_of.end()) {
        cells.insert(cells.end(), {"-", "-", "-", "-"});
        continue;
      }
      const Cell& cell = it->second;
      cells.insert(cells.end(), {fmt::format("{:.1f}", median(cell.time_us)), fmt::format("{:.2f}", median(cell.algbw)),
                                 fmt::format("{:.2f}", median(cell.busbw)), std::to_string(cell.wrong)});
      busbw_of[g].push_back(median(cell.busbw));
    }
    auto ref = cells_of.find("reference-ring");
    auto copy = cells_of.find("memcpy");
    const double vs = ref != cells_of.end() ? median(ref->second.vs_library) : 0.0;
    cells.push_back(vs > 0 ? fmt::format("{:.2f}x", vs) : "-");
    cells.push_back(copy != cells_of.end() ? fmt::format("{:.2f}", median(copy->second.algbw)) : "-");
    print_row(columns, cells);
    for (const auto& [name, cell] : cells_of) {
        nlohmann::json row = {{"type", "bench_bandwidth"}, {"chapter", chapter.id}, {"impl", name},
                              {"ranks", cell.ranks}, {"size", size},
                              {"time_us", median(cell.time_us)}, {"algbw", median(cell.algbw)},
                              {"busbw", median(cell.busbw)}, {"wrong", cell.wrong}};
        if (!cell.vs_library.empty()) row["vs_library"] = median(cell.vs_library);
        if (placement.nodes > 0) row.update(placement_json(placement));  // `report` draws the link's rate
      json.write(row);
    }
  }
  std::string average = "# Avg bus bandwidth:";
  for (const std::string& g : groups)
    if (!busbw_of[g].empty()) average += fmt::format(" {} {:.3f} GB/s;", g, mean(busbw_of[g]));
  fmt::print("\n{}\n", average);
  print_footer(part, impls);
  return by_size.empty() ? 1 : 0;
}

}  // namespace workbook::cli
