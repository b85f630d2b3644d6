// commands_tour.cpp — `workbook tour`: every chapter's reference solution at a
// reduced scale, one results table, and the files `workbook report` plots.
//
// Each chapter.json lists its tour configurations (TourEntry, cli.hpp).
// Every configuration is one run of the program (under mpiexec when ranks >
// 1); "bandwidth" adds a run of a collective benchmark (ch04_bench) whose
// busbw at the largest size becomes the row's last column;
// "speed_check_args" (ch01's) runs the baseline briefly before the first row
// and again after the last, to see whether the machine's speed held.
//
// Written as the runs finish, so an interrupted tour keeps what it measured:
//   tour.jsonl  {"type": "tour_header"}, then per configuration its
//               "tour_epoch" lines (loss and accuracy per epoch), its
//               "bench_bandwidth" lines (busbw per size), and its "tour" row
//               ("ok": false and "error" when it failed); at the end a
//               "tour_speed_check" line (the brief ch01 run's speed before and after)
//   tour.csv    the rows of the table
// The table itself is tour_table.cpp's, printed from the "tour" lines.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "cli.hpp"
#include "commands.hpp"
#include "tour.hpp"
#include "workbook/config.hpp"
#include "workbook/errors.hpp"

namespace workbook::cli {
namespace {

using tour::format_duration;
using tour::program_argv;
using tour::shown_command;
using tour::TourRow;

// Note: [the tour's emulated nodes] Rows with "nodes" run on the emulated
// cluster (hpc/cluster.sh). The tour brings one up for them and takes it down
// at the end, on every way out (Note: [a command's own emulated cluster],
// cli.hpp). A cluster the user brought up is used as it is and left up.
// Where the machine cannot (not root, no namespaces), the rows are skipped
// and the reason printed.
class TourCluster {
 public:
  // Nodes at `link` for `entry`, or the reason there are none.
  std::optional<std::string> ready(const TourEntry& entry) {
    if (const auto up = emulated_cluster()) {
      if (up->nodes < entry.nodes) return fmt::format("your emulated cluster has {} nodes, not {}", up->nodes, entry.nodes);
      if (up->link != entry.link && !own_.brought_up())
        return fmt::format("your emulated cluster's link is {}, not {} (the tour leaves it as it is)", up->link, entry.link);
      if (up->link == entry.link) return std::nullopt;
    }
    if (!failure_.empty()) return failure_;
    if (auto failed = own_.up(entry.nodes, entry.link)) failure_ = std::move(*failed);
    return failure_.empty() ? std::nullopt : std::optional<std::string>(failure_);
  }

 private:
  OwnCluster own_{"the tour"};
  std::string failure_;
};

}  // namespace

int cmd_tour(TourScale scale, const std::optional<std::string>& json_file, const std::optional<std::string>& csv_file) {
  const auto chapters = load_chapters();
  std::vector<std::string> targets;
  int total = 0;
  for (const Chapter& c : chapters)
    for (const TourEntry& entry : c.tour) {
      targets.push_back(entry.run.program + "_solution");
      if (entry.bandwidth) targets.push_back(entry.bandwidth->program + "_solution");
      ++total;
    }
  std::sort(targets.begin(), targets.end());
  targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
  if (!build_targets(targets, /*quiet=*/false)) return 1;

  const fs::path dir = build_dir() / "tour";
  fs::create_directories(dir);
  const fs::path json_path = json_file ? fs::path(*json_file) : dir / "tour.jsonl";
  const fs::path csv_path = csv_file ? fs::path(*csv_file) : dir / "tour.csv";
  std::ofstream json(json_path), csv(csv_path);
  WB_CHECK(json.is_open(), "{}: cannot open for writing", json_path.string());
  WB_CHECK(csv.is_open(), "{}: cannot open for writing", csv_path.string());
  const unsigned cores = std::thread::hardware_concurrency();
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M", std::localtime(&now));
  json << nlohmann::json({{"type", "tour_header"}, {"scale", tour::scale_name(scale)},
                          {"full", scale == TourScale::Full}, {"smoke", scale == TourScale::Smoke}, {"cores", cores},
                          {"torch", config::torch_version}, {"date", date}})
              .dump()
       << "\n";
  csv << tour::kCsvHeader;

  std::vector<TourTableRow> table;
  int failures = 0;
  std::optional<double> baseline_rate;  // the single-device row's samples/s
  const auto tour_start = std::chrono::steady_clock::now();
  // Note: [one run per row] Each row is a single run, and a 2-core machine's
  // speed moves with whatever else runs on it: rows measured minutes apart
  // compare only while the speed holds. A brief run of the baseline before
  // the first row and the same run after the last tell whether it held: the
  // same command twice, both warm. (Compared with the first row itself, the
  // check said "something else was running" on a quiet machine: the first
  // process of a tour runs up to a fifth slower, cold.)
  std::optional<std::vector<std::string>> speed_check;  // the baseline's brief run
  std::optional<double> speed_at_start;
  for (const Chapter& c : chapters)
    for (const TourEntry& entry : c.tour)
      if (c.id == "ch01" && entry.speed_check_args && !speed_check)
        speed_check = program_argv(entry.run, *entry.speed_check_args);
  if (speed_check) {
    fmt::print("\nch01 speed check, before the first row: {}\n", shown_command(*speed_check));
    std::fflush(stdout);
    const RunOutcome check = run_for_result(*speed_check, /*passthrough=*/false, 600, 1);
    if (check.ok && check.result.value("samples_per_s", 0.0) > 0) speed_at_start = check.result.value("samples_per_s", 0.0);
  }
  int index = 0;
  TourCluster cluster;               // Note: [the tour's emulated nodes]
  std::vector<std::string> skipped;  // rows on emulated nodes the machine could not give
  for (const Chapter& c : chapters) {
    for (const TourEntry& entry : c.tour) {
      TourRow row;
      row.chapter = c.id;
      row.config = entry.config;
      const int ranks = entry.ranks;
      const std::vector<std::string> argv = program_argv(entry.run, scale);
      fmt::print("\n[{}/{}] {} {}{}: {}\n", ++index, total, c.id, row.config,
                 ranks > 1 ? fmt::format(" ({} ranks{})", ranks,
                                         entry.nodes > 0 ? fmt::format(" on {} emulated nodes", entry.nodes) : "")
                           : "",
                 shown_command(argv));
      std::fflush(stdout);
      Placement placement(ranks);
      if (entry.nodes > 0) {
        if (const auto why_not = cluster.ready(entry)) {
          fmt::print("  skipped: {}\n", *why_not);
          skipped.push_back(fmt::format("{} {}: {}", c.id, row.config, *why_not));
          continue;
        }
        placement = Placement::on_nodes(ranks, entry.nodes);
        row.placement = placement_json(placement);
      }
      row.outcome = run_for_result(argv, /*passthrough=*/true, 3600, placement);
      if (!row.outcome.ok) {
        row.error = row.outcome.error;
        fmt::print("  failed: {}\n", row.outcome.error);
      }
      if (row.outcome.ok) {
        const nlohmann::json& res = row.outcome.result;
        const double rate = res.value("samples_per_s", 0.0);
        if (c.id == "ch01" && rate > 0) baseline_rate = rate;
        // A diverged ch06 run stops early: its time is that of the epochs it trained.
        row.time_s = res.value("epoch_s", 0.0) * res.value("epochs_trained", res.value("epochs", 1));
        // Speedups compare images a second: a row without an accuracy (Chapter 11's
        // GPT, whose samples are byte sequences) is compared with nothing.
        if (baseline_rate && res.contains("test_accuracy")) row.speedup = rate / *baseline_rate;
        // The run's epochs, for the loss and accuracy curves.
        for (const nlohmann::json& line : row.outcome.lines)
          if (line.value("type", "") == "epoch")
            json << nlohmann::json({{"type", "tour_epoch"}, {"chapter", c.id}, {"configuration", row.config},
                                    {"ranks", ranks}, {"epoch", line.value("epoch", 0)},
                                    {"train_loss", line.contains("train_loss") ? line["train_loss"] : nullptr},
                                    {"test_accuracy", line.value("test_accuracy", 0.0)}})
                        .dump()
                 << "\n";
        if (entry.bandwidth) tour::measure_bandwidth(row, *entry.bandwidth, scale, placement, json);
      }
      table.push_back({tour::write_row(row, entry.note, json, csv), ""});
      if (!row.error.empty()) ++failures;
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - tour_start).count();
      fmt::print("[{}/{}] {} {}: {} in {:.0f} s; the tour so far {}\n", index, total, c.id, row.config,
                 row.error.empty() ? "done" : "failed", row.outcome.wall_s, format_duration(elapsed));
    }
  }

  std::string speed_line;
  if (speed_check && speed_at_start) {
    fmt::print("\nch01 speed check, after the last row: {}\n", shown_command(*speed_check));
    std::fflush(stdout);
    const RunOutcome check = run_for_result(*speed_check, /*passthrough=*/false, 600, 1);
    const double again = check.ok ? check.result.value("samples_per_s", 0.0) : 0.0;
    if (again > 0) {
      const double change = again / *speed_at_start - 1.0;
      speed_line = fmt::format("speed check: a brief ch01 run trained {:.1f} samples/s before the first row and {:.1f} "
                               "after the last ({:+.0f}%).",
                               *speed_at_start, again, 100.0 * change);
      if (std::abs(change) > 0.15)
        speed_line += "\nwarning: the machine's speed changed during the tour (something else was running?): the "
                      "speedups are unreliable. Run it again on a quiet machine, or compare with `workbook bench "
                      "chNN`, which interleaves what it compares.";
      json << nlohmann::json({{"type", "tour_speed_check"}, {"samples_per_s_start", *speed_at_start},
                              {"samples_per_s_end", again}, {"change", change}})
                  .dump()
           << "\n";
    } else {
      speed_line = "speed check: the rerun of ch01 failed: " + check.error;
    }
  } else if (speed_check) {
    speed_line = "speed check: the brief ch01 run before the first row failed, so nothing was compared.";
  }

  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - tour_start).count();
  fmt::print("\nworkbook tour{}: the reference solutions on this machine ({} cores, LibTorch {}), {}, in {}\n\n",
             scale == TourScale::Default ? "" : " --" + std::string(tour::scale_name(scale)), cores, config::torch_version, date, format_duration(elapsed));
  print_tour_table(table);
  if (!speed_line.empty()) fmt::print("{}\n", speed_line);
  for (const std::string& row : skipped) fmt::print("skipped: {}\n", row);
  fmt::print("\nresults: {} and {}\nplots:   workbook report {} --out {}\n", json_path.string(), csv_path.string(),
             json_path.string(), (build_dir() / "report").string());
  fmt::print("\nStart the exercises: read chapters/01_single_device/README.md, then run `workbook check ch01`.\n"
             "`workbook list` shows every exercise; `workbook hint exN.M` helps when you are stuck.\n");
  return failures == 0 ? 0 : 1;
}

}  // namespace workbook::cli
