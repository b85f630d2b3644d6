// cli.hpp — the pieces the `workbook` commands share: chapter manifests and
// hints, child processes, and test results.
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace workbook::cli {

namespace fs = std::filesystem;

// ---- chapters: chapters/NN_name/chapter.json ----------------------------------

struct Exercise {
  std::string id;     // "ex1.2"
  std::string title;  // "The train step"
  std::string file;   // where the learner writes it, relative to the chapter folder
};

struct Chapter {
  std::string id;      // "ch01"
  std::string folder;  // "01_single_device"
  std::string title;
  int max_ranks = 1;   // 1: a single-process chapter
  // The rank counts its tests run at (under mpiexec): every test at the
  // first, the tests tagged [npN] at each further N. Empty: one process.
  std::vector<int> test_ranks;
  std::vector<Exercise> exercises;
  std::string program;         // the program `workbook run` starts, e.g. "ch01_train"
  std::vector<nlohmann::json> bench;  // how `workbook bench` measures the chapter: one or more parts
  nlohmann::json tour;         // the configurations `workbook tour` runs
  fs::path lesson() const;     // chapters/NN_name/README.md
  fs::path hints_file() const; // chapters/NN_name/hints.md
};

fs::path source_dir();
fs::path build_dir();
std::vector<Chapter> load_chapters();  // every chapters/*/chapter.json, in order
// "ch01", "1", "01" or "01_single_device"; or an exercise "ex1.2" (its chapter).
const Chapter& find_chapter(const std::vector<Chapter>& chapters, const std::string& name);
const Exercise* find_exercise(const std::vector<Chapter>& chapters, const std::string& id);

// hints.md: "## ex1.2" sections, each with "### ..." stages in order.
std::map<std::string, std::vector<std::string>> load_hints(const Chapter& chapter);

// ---- state kept between commands (build/<preset>/workbook-state.json) ----------
nlohmann::json load_state();
void save_state(const nlohmann::json& state);

// ---- child processes -----------------------------------------------------------

struct ProcessResult {
  int exit_code = -1;     // the child's status, 128+signal when killed, 124 on timeout
  bool timed_out = false;
  std::string output;     // stdout and stderr together, when captured
};

struct ProcessOptions {
  bool capture = false;            // collect output instead of passing it through
  double timeout_s = 0;            // 0: no limit
  std::map<std::string, std::string> env;  // added to the environment
};

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

// Builds CMake targets in the build tree; on failure prints the compiler's
// errors (the first lines of each) and returns false.
bool build_targets(const std::vector<std::string>& targets, bool quiet);

// The environment every MPI launch needs in this workbook's harness.
std::map<std::string, std::string> mpi_environment();

// `argv` as started with `ranks` processes: itself for 1, under mpiexec
// (oversubscribed, so more ranks than cores work) for more.
std::vector<std::string> launch_command(int ranks, std::vector<std::string> argv);

// ---- measuring -----------------------------------------------------------------

// One run of a program that writes JSON lines (DESIGN.md, Conventions: Output).
struct RunOutcome {
  bool ok = false;
  nlohmann::json result;  // the run's last JSON line
  std::vector<nlohmann::json> lines;  // every JSON line the run wrote
  std::string error;      // why not ok: the program's first line of complaint
  double wall_s = 0.0;
};

// Runs `argv` with `--json` into a temporary file, under mpiexec with `ranks`
// processes when more than 1, and reads every line back; ok when it exited 0
// and its last line is a result line. passthrough: its output goes to the terminal.
RunOutcome run_for_result(std::vector<std::string> argv, bool passthrough, double timeout_s, int ranks);

std::string format_mib(double bytes);  // "12.3 MiB"

// ---- tests ---------------------------------------------------------------------

struct TestRecord {
  std::string name;
  std::vector<std::string> tags;
  bool passed = false;
  nlohmann::json failure;  // first failed assertion, when any
  std::string exercise() const;  // the [exN.M] tag, or ""
  bool not_implemented(const std::string& exercise) const;  // failed on that exercise's WB_NOT_IMPLEMENTED
};

struct TestRun {
  bool ran = false;          // the binary ran and wrote its results
  bool aborted = false;      // it was stopped during a test (the watchdog): later tests did not run
  int exit_code = -1;
  std::string output;
  std::vector<TestRecord> records;
};

// Runs a test binary (bin: e.g. "test_ch01_student") with a Catch2 filter,
// under mpiexec with `ranks` processes when ranks > 1.
TestRun run_tests(const std::string& binary, const std::string& filter, int ranks = 1, double timeout_s = 900);

// A chapter's tests of one flavor ("student" or "solution"): once, or at each
// of its test_ranks (the further counts with [npN] added to the filter), the
// runs merged: a test passes when it passed in every run it was part of.
TestRun run_chapter_tests(const Chapter& chapter, const std::string& flavor, const std::string& filter);

enum class ExerciseState { NotStarted, Failing, Done, NoTests, NotRun };
std::string state_name(ExerciseState state);

// How an exercise's tests (those tagged [exN.M]) went in a run.
struct ExerciseTally {
  int total = 0, passed = 0, not_started = 0;
  bool stopped_early = false;  // the run was stopped before its end
  ExerciseState state() const;
};
ExerciseTally tally(const TestRun& run, const std::string& exercise);
inline ExerciseState exercise_state(const TestRun& run, const std::string& exercise) {
  return tally(run, exercise).state();
}

// Prints a failed assertion the way a learner can act on it.
void print_failure(const TestRecord& record);

}  // namespace workbook::cli
