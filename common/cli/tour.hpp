// tour.hpp — what `workbook tour` (commands_tour.cpp) runs and writes per row
// (tour_rows.cpp): a row's outcome, the programs' arguments at the tour's
// scale, the bandwidth run, and the row's JSON and CSV lines.
#pragma once

#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"

namespace workbook::cli::tour {

struct TourRow {
  std::string chapter, config, error;             // error: empty when every run of the row worked
  RunOutcome outcome;
  double time_s = 0.0;
  std::optional<double> speedup;                  // none without a single-device baseline
  double busbw_ring = 0.0, busbw_library = 0.0;   // GB/s at the largest size, when measured
  int64_t busbw_bytes = 0;
  std::string library;                            // "mpi" or "nccl"
  nlohmann::json placement;                       // on emulated nodes: placement_json's; else null
};

std::string format_duration(double seconds);
std::vector<std::string> program_argv(const TourProgram& run, const std::vector<std::string>& args);
std::vector<std::string> program_argv(const TourProgram& run, TourScale scale);
std::string shown_command(const std::vector<std::string>& argv);
std::string_view scale_name(TourScale scale);  // "default", "long", "full", "smoke"

// Runs the row's bandwidth benchmark: its lines go to `json`, its busbw at the
// largest size (ring and library, memcpy aside) into the row.
void measure_bandwidth(TourRow& row, const TourProgram& bandwidth, TourScale scale, const Placement& placement,
                       std::ofstream& json);

// The first line of tour.csv, then the row's line there and its "tour" line in
// tour.jsonl; returns the "tour" line (the table is printed from it).
extern const char* const kCsvHeader;
nlohmann::json write_row(const TourRow& row, const std::string& note, std::ofstream& json, std::ofstream& csv);

}  // namespace workbook::cli::tour
