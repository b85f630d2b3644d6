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
//
// Here: the command, reading the files, and drawing a Plot (report.hpp) with
// gnuplot; the plots themselves are made in report_plots.cpp (the tour's and
// the benches') and report_model.cpp (`workbook model`'s), the timeline of a
// --trace file in report_timeline.cpp.
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "cli.hpp"
#include "commands.hpp"
#include "report.hpp"
#include "table.hpp"
#include "workbook/errors.hpp"

namespace workbook::cli {
namespace {

// A title of two lines. gnuplot runs `...` found in double-quoted strings,
// so the text stays in single-quoted pieces, joined by a "\n" of its own.
std::string two_lines(const std::string& first, const std::string& second) {
  return gnuplot_quoted(first) + ".\"\\n\"." + gnuplot_quoted(second);
}

// Every file's lines, one JSON object a line.
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
  gp << "set output " << gnuplot_quoted(png.string()) << "\n";
  gp << "set title " << two_lines(plot.title, subtitle) << "\n";
  gp << "set xlabel " << gnuplot_quoted(plot.xlabel) << "\nset ylabel " << gnuplot_quoted(plot.ylabel) << "\n";
  gp << "set grid\n";
  for (const std::string& s : plot.settings)
    if (!s.empty()) gp << s << "\n";
  std::vector<std::string> parts;
  if (!plot.extra_plot.empty()) parts.push_back(plot.extra_plot);
  for (size_t i = 0; i < plot.series.size(); ++i)
    parts.push_back(fmt::format("{} index {} using 1:2 title {} with {}", gnuplot_quoted(data.string()), i,
                                gnuplot_quoted(plot.series[i].title), plot.series[i].style));
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

int cmd_report(const std::vector<std::string>& files_given, const std::optional<std::string>& out_dir, bool table_only) {
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
      // "scale" since --long came; older files say "full" or "smoke".
      const std::string scale = line.value.value(
          "scale", line.value.value("full", false) ? "full" : line.value.value("smoke", false) ? "smoke" : "default");
      subtitle = fmt::format("workbook tour{}, {} cores, LibTorch {}, {}", scale == "default" ? "" : " --" + scale,
                             line.value.value("cores", 0), line.value.value("torch", "?"), line.value.value("date", "?"));
      break;
    } else if (line.value.value("type", "") == "model_header") {
      subtitle = fmt::format("workbook model{}, {} cores, {}", line.value.value("quick", false) ? " --quick" : "",
                             line.value.value("cores", 0), line.value.value("date", "?"));
      break;
    }

  print_tour_rows(lines, several);
  if (table_only) return 0;  // the table alone: what the README keeps, rendered by CI
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
