// tour_table.cpp — the tour's table: printed by `workbook tour` at its end,
// and by `workbook report` from tour.jsonl files, from the same "tour" lines.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "cli.hpp"
#include "table.hpp"

namespace workbook::cli {

void print_tour_table(const std::vector<TourTableRow>& rows) {
  const bool with_files = std::any_of(rows.begin(), rows.end(), [](const TourTableRow& r) { return !r.file.empty(); });
  size_t configuration_width = 24;  // wider when a configuration is longer
  for (const TourTableRow& row : rows)
    configuration_width = std::max(configuration_width, row.line.value("configuration", std::string()).size());
  std::vector<Column> columns = {{{"chapter", ""}, 7, true},
                                 {{"configuration", ""}, static_cast<int>(configuration_width), true},
                                 {{"ranks/dev", ""}, 9},              {{"device", ""}, 6},
                                 {{"test_acc", ""}, 8},               {{"held-out", "loss"}, 8},
                                 {{"time_s", ""}, 7},
                                 {{"speedup", ""}, 8},                {{"samples/s", ""}, 9},
                                 {{"peak_mem/rank", ""}, 13},         {{"busbw ring/", "lib (GB/s)"}, 11}};
  if (with_files) columns.push_back({{"file", ""}, 0, true, "  "});
  print_heading(columns);

  std::vector<std::string> notes;  // footnotes, each once, marked *, **, ...
  std::string busbw_legend, link_legend;
  std::vector<std::string> busbw_sizes;
  bool any_speedup = false;
  for (const auto& [v, file] : rows) {
    std::string mark;
    if (v.contains("note") && v["note"].is_string()) {
      auto at = std::find(notes.begin(), notes.end(), v["note"].get<std::string>());
      if (at == notes.end()) at = notes.insert(notes.end(), v["note"].get<std::string>());
      mark = std::string(static_cast<size_t>(at - notes.begin()) + 1, '*');
    }
    const std::string error = v.value("ok", true) ? "" : v.value("error", std::string("?"));
    const std::string from_file = file.empty() ? "" : "  " + file;
    if (!v.contains("time_s")) {  // the training run itself failed: no numbers
      print_row(columns, {v.value("chapter", "?"), v.value("configuration", "")}, " failed: " + error + from_file);
      continue;
    }
    // busbw: the row's bandwidth run, when it had one; "failed" when it failed.
    std::string busbw = "-";
    if (v.value("busbw_bytes", int64_t{0}) > 0) {
      busbw = fmt::format("{:.2f}/{:.2f}", v.value("busbw_ring", 0.0), v.value("busbw_library", 0.0));
      // Each row's largest size: the rows on the emulated link may stop at a smaller one.
      const std::string size = fmt::format("{} MiB", v.value("busbw_bytes", int64_t{0}) >> 20);
      if (std::find(busbw_sizes.begin(), busbw_sizes.end(), size) == busbw_sizes.end()) busbw_sizes.push_back(size);
      busbw_legend = fmt::format("busbw: at {} (each row's largest size), {}'s reference ring / the library's all-reduce "
                                 "({}), measured in the same run; busbw = algbw x 2(n-1)/n, as nccl-tests defines it.",
                                 fmt::join(busbw_sizes, " and "), v.value("chapter", "?"), v.value("library", "?"));
    } else if (!error.empty()) {
      busbw = "failed";
    }
    if (v.value("link_bits_per_s", 0.0) > 0)
      link_legend = fmt::format("on {} nodes at {}: the emulated cluster (`workbook cluster`), each node a network "
                                "namespace, joined by links shaped to {}; busbw there cannot exceed {:.3g} GB/s.",
                                v.value("nodes", 0), v.value("link", "?"), v.value("link", "?"),
                                v.value("link_bits_per_s", 0.0) / 8e9);
    const bool has_speedup = v.contains("speedup") && v["speedup"].is_number();
    any_speedup = any_speedup || has_speedup;
    // A diverged run (ch06's warm-up at a large batch can) says so instead of its 0.1000.
    // A model that is not a classifier (Chapter 11's GPT) has no accuracy, only its held-out loss.
    const std::string accuracy = v.value("diverged", false) ? std::string("diverged")
                                 : v.contains("test_accuracy") ? fmt::format("{:.4f}", v.value("test_accuracy", 0.0))
                                                               : std::string("-");
    const std::string loss = v.contains("test_loss") && v["test_loss"].is_number()
                                 ? fmt::format("{:.4f}", v["test_loss"].get<double>())
                                 : std::string("-");
    // ranks/dev: processes, or for DataParallel (one process) its devices.
    std::vector<std::string> cells = {
        v.value("chapter", "?"),
        v.value("configuration", ""),
        std::to_string(v.value("devices", v.value("ranks", 1))),
        v.value("device", "?"),
        accuracy,
        loss,
        fmt::format("{:.1f}", v.value("time_s", 0.0)),
        has_speedup ? fmt::format("{:.2f}x{}", v["speedup"].get<double>(), mark) : "-" + mark,
        fmt::format("{:.1f}", v.value("samples_per_s", 0.0)),
        format_mib(v.value("peak_mem_bytes", 0.0)),
        busbw};
    if (with_files) cells.push_back(file);
    print_row(columns, cells);
  }
  // Every speedup is over ch01's single-device run: none when it failed.
  fmt::print("\nspeedup: samples/s over ch01's single device{} (time_s: the training time, evaluation excluded); "
             "none for a row without an accuracy, whose samples are not images.\n",
             any_speedup ? "" : " (no speedups: the single-device run failed)");
  for (size_t i = 0; i < notes.size(); ++i) fmt::print("{} {}\n", std::string(i + 1, '*'), notes[i]);
  if (!busbw_legend.empty()) fmt::print("{}\n", busbw_legend);
  if (!link_legend.empty()) fmt::print("{}\n", link_legend);
}

}  // namespace workbook::cli
