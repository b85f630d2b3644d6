// tour_rows.cpp — a tour row's runs and lines: the programs' arguments at
// each scale, the bandwidth run (ch04's busbw column), and the row's JSON and
// CSV lines. commands_tour.cpp runs the rows in order.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "tour.hpp"

namespace workbook::cli::tour {

const char* const kCsvHeader =
    "chapter,configuration,ranks_or_devices,device,epochs,epochs_trained,train_samples,test_accuracy,diverged,"
    "time_s,speedup,samples_per_s,peak_mem_bytes,busbw_ring_GBps,busbw_library_GBps,busbw_bytes,error\n";

std::string_view scale_name(TourScale scale) {
  switch (scale) {
    case TourScale::Long: return "long";
    case TourScale::Full: return "full";
    case TourScale::Smoke: return "smoke";
    case TourScale::Default: break;
  }
  return "default";
}

std::string format_duration(double seconds) {
  const int s = static_cast<int>(seconds + 0.5);
  return fmt::format("{}:{:02d}", s / 60, s % 60);
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::vector<std::string> program_argv(const TourProgram& run, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {(build_dir() / "bin/solution" / run.program).string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// `workbook tour --smoke` (CI): every row, every program and every plot, at
// the smallest scale that still times some steps (1 epoch of 2,000 samples,
// at least one step at the largest global batch, 1,024; or 10 steps;
// evaluated on 500 test samples; bandwidth up to 1 MiB, one round).
// Its figures are not the tour's. At 6,000 and 1,000 samples it took 134 to
// 169 s in CI's runs; at these, 105 s (-O0, 2-core EPYC, 2026-11-29).
namespace {
std::vector<std::string> smoke_scale(std::vector<std::string> args) {
  const std::map<std::string, std::string> smallest = {
      {"--epochs", "1"},   {"--train-samples", "2000"}, {"--test-samples", "500"},
      {"--max-bytes", "1048576"}, {"--rounds", "1"}, {"--steps", "10"}};
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (const auto it = smallest.find(args[i]); it != smallest.end()) args[i + 1] = it->second;
  return args;
}
}  // namespace

std::vector<std::string> program_argv(const TourProgram& run, TourScale scale) {
  switch (scale) {
    case TourScale::Smoke: return program_argv(run, smoke_scale(run.args));
    case TourScale::Long: return program_argv(run, run.long_args);
    case TourScale::Full: return program_argv(run, run.full_args);
    case TourScale::Default: break;
  }
  return program_argv(run, run.args);
}

std::string shown_command(const std::vector<std::string>& argv) {
  return fmt::format("{} {}", fs::path(argv[0]).filename().string(), fmt::join(argv.begin() + 1, argv.end(), " "));
}

// A failed bandwidth run (ch04_bench fails when any sum is wrong) contributes no numbers.
void measure_bandwidth(TourRow& row, const TourProgram& bandwidth, TourScale scale, const Placement& placement,
                       std::ofstream& json) {
  const std::vector<std::string> argv = program_argv(bandwidth, scale);
  fmt::print("\n{} {}, all-reduce bandwidth: {}\n", row.chapter, row.config, shown_command(argv));
  std::fflush(stdout);
  const RunOutcome outcome = run_for_result(argv, /*passthrough=*/true, 1800, placement);
  if (!outcome.ok) {
    row.error = "bandwidth: " + outcome.error;
    fmt::print("  failed: {}\n", outcome.error);
    return;
  }
  for (const nlohmann::json& line : outcome.lines) {
    if (line.value("type", "") != "row") continue;
    std::string impl = line.value("impl", "self");
    if (impl == "self") impl = "reference-ring";  // as `workbook bench ch04` names it
    const int64_t size = line.value("size", int64_t{0});
    nlohmann::json out = {{"type", "bench_bandwidth"}, {"chapter", row.chapter}, {"source", "tour"},
                          {"impl", impl}, {"ranks", line.value("ranks", placement.ranks)}, {"size", size},
                          {"time_us", line.value("time_us", 0.0)}, {"algbw", line.value("algbw", 0.0)},
                          {"busbw", line.value("busbw", 0.0)}, {"wrong", line.value("wrong", 0)}};
    if (placement.nodes > 0) out.update(placement_json(placement));  // `report` draws the link's rate beside it
    json << out.dump() << "\n";
    if (size < row.busbw_bytes || impl == "memcpy") continue;
    if (size > row.busbw_bytes) row.busbw_ring = row.busbw_library = 0.0;  // both from one size
    row.busbw_bytes = size;
    if (impl == "reference-ring") {
      row.busbw_ring = line.value("busbw", 0.0);
    } else {
      row.busbw_library = line.value("busbw", 0.0);
      row.library = impl;
    }
  }
}

nlohmann::json write_row(const TourRow& row, const std::string& note, std::ofstream& json, std::ofstream& csv) {
  const bool ok = row.error.empty();
  const nlohmann::json& res = row.outcome.result;
  nlohmann::json line = row.outcome.ok ? res : nlohmann::json::object();
  line["type"] = "tour";
  line["chapter"] = row.chapter;
  line["configuration"] = row.config;
  line["ok"] = ok;
  if (!ok) line["error"] = row.error;
  if (row.outcome.ok) {
    line["devices"] = res.value("devices", res.value("ranks", 1));
    line["time_s"] = row.time_s;
    line["speedup"] = row.speedup ? nlohmann::json(*row.speedup) : nlohmann::json(nullptr);
  }
  if (!note.empty()) line["note"] = note;
  if (!row.placement.is_null()) line.update(row.placement);
  if (row.busbw_bytes > 0)
    line.update({{"busbw_ring", row.busbw_ring}, {"busbw_library", row.busbw_library},
                 {"busbw_bytes", row.busbw_bytes}, {"library", row.library}});
  json << line.dump() << "\n";

  std::vector<std::string> fields = {row.chapter, csv_field(row.config)};
  if (row.outcome.ok) {
    fields.insert(fields.end(),
                  {std::to_string(line["devices"].get<int>()), res.value("device", "?"),
                   std::to_string(res.value("epochs", 0)),
                   std::to_string(res.value("epochs_trained", res.value("epochs", 0))),
                   std::to_string(res.value("train_samples", 0)), res.contains("test_accuracy") ? fmt::format("{:.4f}", res.value("test_accuracy", 0.0)) : "",
                   res.value("diverged", false) ? "true" : "false", fmt::format("{:.2f}", row.time_s),
                   row.speedup ? fmt::format("{:.3f}", *row.speedup) : "", fmt::format("{:.1f}", res.value("samples_per_s", 0.0)),
                   std::to_string(res.value("peak_mem_bytes", int64_t{0}))});
  } else {
    fields.resize(fields.size() + 11);
  }
  fields.push_back(row.busbw_bytes > 0 ? fmt::format("{:.3f}", row.busbw_ring) : "");
  fields.push_back(row.busbw_bytes > 0 ? fmt::format("{:.3f}", row.busbw_library) : "");
  fields.push_back(row.busbw_bytes > 0 ? std::to_string(row.busbw_bytes) : "");
  fields.push_back(csv_field(row.error));
  csv << fmt::format("{}\n", fmt::join(fields, ","));
  json.flush();
  csv.flush();
  return line;
}

}  // namespace workbook::cli::tour
