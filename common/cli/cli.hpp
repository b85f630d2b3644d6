// cli.hpp — the pieces the `workbook` commands share: chapter manifests and
// hints, child processes, the runs of programs that write JSON lines, the
// tour's table, and test results.
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "workbook/exit_status.hpp"

namespace workbook::cli {

namespace fs = std::filesystem;

// ---- chapters: chapters/NN_name/chapter.json ----------------------------------

// A change to an exercise that a file finished before it may not survive
// (Note [learners mid-course] in revisions.hpp).
struct Revision {
  std::string on;    // "2026-11-30": the day it reached main
  std::string what;  // what changed, for a learner who had finished it
};

struct Exercise {
  std::string id;     // "ex1.2"
  std::string title;  // "The train step"
  std::string file;   // where the learner writes it, relative to the chapter folder
  std::vector<Revision> revised = {};  // oldest first
};

// A program `workbook bench` runs beside the two builds, e.g. PyTorch's own.
struct Baseline {
  std::string name;
  std::vector<std::string> command;  // {chapter_dir}, {source_dir}, {build_dir}, {python} are replaced when it runs
  std::string needs;                 // "cuda" or "cpu": runs only when the bench's device is that; "" always
};

// What a bench part measures, and so which table it prints (bench_tables.cpp).
enum class BenchKind {
  Training,   // whole training runs compared by samples/s (the manifest's default)
  Scaling,    // the same at several configurations (ranks x threads), with scaling efficiency
  Rows,       // the program measures many points itself: a "row" line per point and implementation
  Bandwidth,  // a collective's bandwidth per buffer size, nccl-tests' table
};

struct ScalingConfig {
  std::string name;  // "2x1"
  int ranks = 1;
  int threads = 1;   // per rank
};

// One part of a chapter's benchmark ("bench" in chapter.json: a part, or a list of them).
struct BenchPart {
  BenchKind kind = BenchKind::Training;
  std::string title;                   // "" when it has none
  std::string program;                 // the chapter's program unless the part names another
  std::vector<std::string> args;       // for every run of every implementation
  std::vector<Baseline> baselines;
  int repeats = 3;                     // runs of each implementation, unless --repeats says
  std::string note;                    // printed below the part's table
  std::optional<int> ranks;            // a fixed rank count; not for scaling parts
  int default_ranks = 1;               // when --ranks is not given; not for scaling parts
  std::vector<ScalingConfig> configs;  // scaling parts only
  // Rows parts only: the keys naming a point, the metric compared, and more metrics shown.
  std::vector<std::string> keys;
  std::string metric = "ms";
  std::vector<std::string> extra_metrics;
  bool lower_is_better = true;         // for the metric: true for times, false for accuracies
};

// A program of the tour and its arguments at each of the tour's scales.
struct TourProgram {
  std::string program;                 // the chapter's program unless the entry names another
  std::vector<std::string> args;       // the default tour's
  std::vector<std::string> long_args;  // `--long`: the sizes the tour had until 2026-11-28 (args when absent)
  std::vector<std::string> full_args;  // `--full`
};


// One configuration `workbook tour` runs: a row of its table.
struct TourEntry {
  std::string config;                  // "DDP, ring, overlapped"
  int ranks = 1;
  // > 0: on that many nodes of the emulated cluster, linked at `link`; the
  // tour brings one up for these rows (and down after) where the machine
  // allows it, and skips them, saying why, where it does not.
  int nodes = 0;
  std::string link = "1gbit";
  TourProgram run;
  std::string note;                    // a footnote on the row's speedup; "" when none
  std::optional<TourProgram> bandwidth;  // a collective benchmark run after it (the busbw column)
  // ch01's: a brief rerun at the end of the tour, to see whether the machine's speed held.
  std::optional<std::vector<std::string>> speed_check_args;
};

// A number the student predicts before `workbook bench` (or `workbook model`)
// measures it ("predictions" in chapter.json). The student writes it in the
// chapter's predictions.txt as `id = number`; the command prints it beside the
// measurement: the `value` field of the first summary line whose fields match
// `where` (and, for a bench, that comes from part `part`).
struct Prediction {
  std::string id;       // "busbw_4k_vs_mpi"
  std::string ask;      // the question, with its conditions
  std::string unit;     // "ms", "x", "GB/s" ...
  std::optional<int> part;
  nlohmann::json where;  // an object: field -> value
  std::string value;
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
  std::string program;            // the program `workbook run` starts, e.g. "ch01_train"
  std::vector<BenchPart> bench;   // how `workbook bench` measures the chapter: none, one or more parts
  std::vector<TourEntry> tour;    // the configurations `workbook tour` runs
  std::vector<Prediction> predictions;  // what the student predicts before measuring
  fs::path lesson() const;        // chapters/NN_name/README.md
  fs::path predictions_file() const;  // chapters/NN_name/predictions.txt
  fs::path hints_file() const;    // chapters/NN_name/hints.md
};

fs::path source_dir();
fs::path build_dir();
// Every chapters/*/chapter.json, in order. A manifest's mistake (a missing or
// unknown key, a wrong type, an unknown bench kind) is a UserError naming its
// file and the key, raised here rather than when the key is used.
std::vector<Chapter> load_chapters();
// "ch01", "1", "01" or "01_single_device"; or an exercise "ex1.2" (its chapter).
const Chapter& find_chapter(const std::vector<Chapter>& chapters, const std::string& name);
const Exercise* find_exercise(const std::vector<Chapter>& chapters, const std::string& id);

// hints.md: "## ex1.2" sections, each with "### ..." stages in order.
std::map<std::string, std::vector<std::string>> load_hints(const Chapter& chapter);

// ---- state kept between commands (build/<preset>/workbook-state.json) ----------
// "hints": exN.M -> the hint stages shown; "checks": chNN -> exN.M (or "" for the
// whole chapter's tests) -> what the last check found (commands_learner.cpp,
// Note [what `workbook list` shows]).
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
// errors (the first lines of each; not with show_errors false) and returns false.
bool build_targets(const std::vector<std::string>& targets, bool quiet, bool show_errors = true);

// The environment every MPI launch needs in this workbook's harness.
std::map<std::string, std::string> mpi_environment();

// Where a run's ranks go: `ranks` processes on this machine, or spread over
// the first `nodes` nodes of the emulated cluster (hpc/cluster.sh), ranks /
// nodes on each, rank r on node r / (ranks / nodes) + 1.
struct Placement {
  int ranks = 1;
  int nodes = 0;  // 0: this machine, no emulated cluster
  Placement(int ranks_here = 1) : ranks(ranks_here) {}  // NOLINT(google-explicit-constructor): a rank count is a placement
  // `ranks` over `nodes` (at most `ranks` of them: one rank needs one node);
  // a UserError when they do not divide evenly or the cluster is smaller.
  static Placement on_nodes(int ranks, int nodes);
  bool multi_process() const { return ranks > 1 || nodes > 0; }
  int ranks_per_node() const { return nodes > 0 ? ranks / nodes : ranks; }
  std::string describe() const;  // "2 rank(s)" or "2 rank(s) on 2 emulated nodes at 1gbit"
};

// `argv` as started with `placement`: itself for 1 rank here, under mpiexec
// (oversubscribed, so more ranks than cores work) for more, under the
// emulated cluster's mpirun (hpc/cluster.sh mpirun) on nodes.
std::vector<std::string> launch_command(const Placement& placement, std::vector<std::string> argv);

// ---- the emulated cluster (cluster.cpp) -------------------------------------------

// What `workbook cluster up` made, read from its state (/run/workbook-cluster);
// nullopt when it is not up.
struct EmulatedCluster {
  int nodes = 0;
  std::string link;  // as asked: "1gbit"
  double link_bits_per_s() const;
};
std::optional<EmulatedCluster> emulated_cluster();
// Where a run on the emulated cluster ran, for result files: nodes, ranks
// per node, the link as asked and in bits/s (`report` draws it).
nlohmann::json placement_json(const Placement& placement);
fs::path cluster_script();  // hpc/cluster.sh

// Note: [a command's own emulated cluster] `tour` and `model` bring up an
// emulated cluster for their runs, and take it down again on every way out:
// return, exception (the destructor) and Ctrl-C or a kill (a signal handler
// that runs `cluster.sh down`, async-signal-safe: fork, exec, wait; armed at
// the first `up`). What a command does about a cluster the user brought up
// is its own: the tour uses it as it is, `model` refuses to start.
// For a command that brings up its own clusters (`model`, `plan`): a
// UserError unless every rate is one hpc/cluster.sh takes, or while a
// cluster of the user's is up (theirs: neither used nor taken down).
void check_own_cluster_can_start(const std::string& command, const std::vector<std::string>& links);

class OwnCluster {
 public:
  explicit OwnCluster(std::string owner) : owner_(std::move(owner)) {}  // "the tour": who says it is down again
  OwnCluster(const OwnCluster&) = delete;
  OwnCluster& operator=(const OwnCluster&) = delete;
  ~OwnCluster() { down(); }
  // `cluster.sh up --nodes N --link RATE` (on one this brought up: a new
  // link, or new nodes); the script's reason when it could not.
  std::optional<std::string> up(int nodes, const std::string& link);
  void down();  // when this brought one up; says so
  bool brought_up() const { return brought_up_; }

 private:
  std::string owner_;
  bool brought_up_ = false;
};

// ---- programs that write JSON lines (run_protocol.cpp) --------------------------

// One run of a program that writes JSON lines (ARCHITECTURE.md, "Output").
struct RunOutcome {
  // How it ended, from its exit status (ARCHITECTURE.md, "Errors and exit
  // status"); a run stopped at the time limit counts as an internal error.
  ExitStatus status = ExitStatus::InternalError;
  bool ok = false;        // it ended Ok and its last JSON line is a result line
  nlohmann::json result;  // that result line
  std::vector<nlohmann::json> lines;  // every JSON line the run wrote
  std::string error;      // why not ok: the program's failure message, or its exit status
  std::string output;     // stdout and stderr together; "" with passthrough
  double wall_s = 0.0;
};

// Runs `argv` with `--json` into a temporary file (`json`, removed after;
// default build/<preset>/.run-PID.jsonl), placed as `placement` says, and
// reads every line back. passthrough: its output goes to the terminal (and
// so its failure message is not kept).
RunOutcome run_for_result(std::vector<std::string> argv, bool passthrough, double timeout_s, const Placement& placement,
                          const fs::path& json = {});

// ---- the tour's table (tour_table.cpp) -----------------------------------------

// A row of the table: a "tour" line of tour.jsonl, as `workbook tour` writes it.
struct TourTableRow {
  nlohmann::json line;
  std::string file;  // where it was read from, shown in a last column; "" for none
};

// The table `workbook tour` prints at its end and `workbook report` prints
// from tour.jsonl files, with its legend: the speedups' baseline, the
// footnotes, and how busbw was measured.
void print_tour_table(const std::vector<TourTableRow>& rows);

// ---- tests ---------------------------------------------------------------------

struct TestRecord {
  std::string name;
  std::vector<std::string> tags;
  bool passed = false;
  nlohmann::json failure;  // first failed assertion, when any
  std::string exercise() const;  // the [exN.M] tag, or ""
  bool not_implemented(const std::string& exercise) const;  // failed on that exercise's WB_NOT_IMPLEMENTED
};

// report_timeline.cpp: a --trace file (trace.hpp) is one JSON document with
// "traceEvents"; draw_timeline draws one of its steps (Note: [which step is
// drawn]) into out/NAME.png, beside its .dat and .gp, and returns the PNG.
bool is_trace(const nlohmann::json& value);
// commands_report.cpp: gnuplot's single-quoted string (a quote written
// twice); runs gnuplot on `script`, which must write the PNG `png`.
std::string gnuplot_quoted(const std::string& text);
void run_gnuplot(const fs::path& script, const fs::path& png);
fs::path draw_timeline(const nlohmann::json& trace, const std::string& name, const fs::path& out,
                       const std::string& source);

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
// With stop_at_failure, the further counts are not run once a test has
// failed (`dev mutants`: one refusal decides).
TestRun run_chapter_tests(const Chapter& chapter, const std::string& flavor, const std::string& filter,
                          bool stop_at_failure = false);

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
