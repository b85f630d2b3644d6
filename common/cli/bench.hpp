// bench.hpp — what `workbook bench`'s runs (commands_bench.cpp) hand to its
// tables (bench_tables.cpp).
#pragma once
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"

namespace workbook::cli {

// One implementation a bench part compares, and its runs so far. Every part
// has the student's build first and the reference build second, then its
// baselines.
struct Impl {
  std::string name;  // "student", "reference", or the baseline's name
  std::vector<std::string> argv;
  std::vector<RunOutcome> runs;
  std::string error() const;  // the error of the latest run that failed ("" when none did)
  // Its last run stopped at an exercise not written yet: so would another.
  bool not_done() const;
};

// A scaling part's configuration, with every implementation run at it.
struct ScalingRuns {
  ScalingConfig config;
  std::vector<Impl> impls;
};

// Every summary line of a bench run, each marked with its part ("part": i):
// the predictions are read from them; with --json they go to its file too.
class JsonFile {
 public:
  void open(const std::string& file);  // --json FILE
  bool is_open() const { return file_.has_value() && file_->is_open(); }
  void write(nlohmann::json line);     // marks it with `part`, keeps it, writes it where --json says
  int part = 0;                        // the part whose lines are written now
  const std::vector<nlohmann::json>& lines() const { return lines_; }

 private:
  std::optional<std::ofstream> file_;
  std::vector<nlohmann::json> lines_;
};

// Each prints a part's table of medians and its note, writes the summary
// lines to `json`, and returns the part's exit status: 1 when the reference
// gave no numbers to compare with.
int print_training_table(const Chapter& chapter, const BenchPart& part, const std::vector<Impl>& impls, int ranks,
                         int threads, JsonFile& json);
int print_scaling_tables(const Chapter& chapter, const BenchPart& part, const std::vector<ScalingRuns>& configs,
                         JsonFile& json);
int print_rows_table(const Chapter& chapter, const BenchPart& part, const std::vector<Impl>& impls, JsonFile& json);
int print_bandwidth_table(const Chapter& chapter, const BenchPart& part, const std::vector<Impl>& impls,
                          const Placement& placement, JsonFile& json);

}  // namespace workbook::cli
