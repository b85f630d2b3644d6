// main.cpp — `workbook`: how a person uses the workbook (ARCHITECTURE.md, "The CLI").
#include <algorithm>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "commands.hpp"
#include "workbook/errors.hpp"
#include "workbook/exit_status.hpp"

int main(int argc, char** argv) {
  using namespace workbook::cli;
  using workbook::ExitStatus, workbook::exit_code, workbook::failure_prefix;
  CLI::App app{"The distributed-training workbook: exercises, checks, hints, runs and benchmarks", "workbook"};
  app.require_subcommand(1);
  int status = 0;
  // What follows `--` is never the workbook's: kept aside for `run` and `bench`.
  std::vector<std::string> own_args(argv + 1, argv + argc), after_double_dash;
  const auto double_dash = std::find(own_args.begin(), own_args.end(), std::string("--"));
  if (double_dash != own_args.end()) {
    after_double_dash.assign(double_dash + 1, own_args.end());
    own_args.erase(double_dash, own_args.end());
  }

  auto* list = app.add_subcommand(
      "list", "every exercise and its state (not started / failing / done) as the last check found it, and when");
  static bool list_check = false;
  list->add_flag("--check", list_check, "check the chapters you have changed first (builds and runs their tests)");
  list->callback([&] { status = cmd_list(list_check); });

  auto* check = app.add_subcommand("check", "build and test your code: a chapter (ch01), an exercise (ex1.2), or all");
  static std::optional<std::string> check_target;
  check->add_option("target", check_target, "chNN or exN.M (default: every chapter)");
  check->callback([&] { status = cmd_check(check_target); });

  auto* hint = app.add_subcommand("hint", "the next hint for an exercise");
  static std::string hint_exercise;
  static bool hint_all = false, hint_reset = false;
  hint->add_option("exercise", hint_exercise, "exN.M")->required();
  hint->add_flag("--all", hint_all, "every hint at once");
  hint->add_flag("--reset", hint_reset, "start again from the first hint");
  hint->callback([&] { status = cmd_hint(hint_exercise, hint_all, hint_reset); });

  auto* run = app.add_subcommand(
      "run", "run a chapter's program: workbook run ch01 [--solution] [--ranks N] [--] ARGS (e.g. ch06 --sweep)");
  static std::string run_chapter;
  static bool run_solution = false;
  static int run_ranks = 1;
  static std::optional<std::string> run_program;  // unset: the chapter's own
  run->add_option("chapter", run_chapter, "chNN")->required();
  run->add_option("--program", run_program, "another of the chapter's programs, e.g. ch04_train");
  run->add_flag("--solution", run_solution, "run the reference solution instead of your code");
  auto* ranks_option =
      run->add_option("--ranks", run_ranks, "processes (started with mpirun when more than 1)")->check(CLI::PositiveNumber);
  static int run_nodes = 0, run_ranks_per_node = 1;
  run->add_option("--nodes", run_nodes, "on N nodes of the emulated cluster (workbook cluster up)")
      ->check(CLI::PositiveNumber)
      ->excludes(ranks_option);
  run->add_option("--ranks-per-node", run_ranks_per_node, "with --nodes: processes on each node (default 1)")
      ->check(CLI::PositiveNumber)
      ->excludes(ranks_option);
  // The program's arguments: those this command does not know
  // (`workbook run ch06 --ranks 2 --sweep --batches 128,512`), then everything
  // after `--`, passed on as they are, in order.
  run->allow_extras();
  run->callback([&] {
    std::vector<std::string> args = run->remaining();
    args.insert(args.end(), after_double_dash.begin(), after_double_dash.end());
    if (run_nodes > 0) run_ranks = run_nodes * run_ranks_per_node;
    else WB_CHECK(run_ranks_per_node == 1, "--ranks-per-node is for --nodes; on this machine give --ranks");
    status = cmd_run(run_chapter, run_program, run_solution, run_ranks, run_nodes, args);
  });

  auto* bench = app.add_subcommand("bench", "your code and the reference side by side, in one run, with ratios");
  static std::string bench_chapter;
  static std::optional<int> bench_ranks;  // unset: each part's default
  static std::optional<int> bench_repeats;
  static std::optional<std::string> bench_json;
  bench->add_option("chapter", bench_chapter, "chNN")->required();
  bench->add_option("--ranks", bench_ranks, "processes")->check(CLI::PositiveNumber);
  static std::optional<int> bench_nodes;
  bench->add_option("--nodes", bench_nodes, "spread each run's ranks over N nodes of the emulated cluster")
      ->check(CLI::PositiveNumber);
  bench->add_option("--repeats", bench_repeats,
                    "runs of each, interleaved; medians are reported (default: the chapter's, usually 3)")
      ->check(CLI::PositiveNumber);
  bench->add_option("--json", bench_json, "write every run and the summary as JSON lines");
  static std::optional<int> bench_part;
  bench->add_option("--part", bench_part, "only this part of a chapter's bench (1: the first)")
      ->check(CLI::Range(1, 99));
  // More arguments for every run go after `--` (e.g. `-- --device cuda`).
  bench->callback([&] {
    status = cmd_bench(bench_chapter, bench_ranks, bench_nodes, bench_repeats, bench_part, bench_json,
                       after_double_dash);
  });

  auto* tour = app.add_subcommand("tour", "every chapter's reference at a small scale: one results table");
  static bool tour_full = false, tour_long = false, tour_smoke = false;
  static std::optional<std::string> tour_json, tour_csv;
  auto* full_flag = tour->add_flag("--full", tour_full, "full-scale runs (much longer)");
  auto* long_flag = tour->add_flag("--long", tour_long,
                                   "the sizes the tour had until 2026-11-28 (about 7.5 minutes on 2 cores, not 3)");
  auto* smoke_flag = tour->add_flag(
      "--smoke", tour_smoke, "every row at the smallest scale (1 epoch, 2,000 samples): that it all runs, not its figures (CI)");
  full_flag->excludes(long_flag)->excludes(smoke_flag);
  long_flag->excludes(smoke_flag);
  tour->add_option("--json", tour_json, "JSON lines file (default build/<preset>/tour/tour.jsonl)");
  tour->add_option("--csv", tour_csv, "CSV file (default build/<preset>/tour/tour.csv)");
  tour->callback([&] {
    const TourScale scale = tour_full    ? TourScale::Full
                            : tour_long  ? TourScale::Long
                            : tour_smoke ? TourScale::Smoke
                                         : TourScale::Default;
    status = cmd_tour(scale, tour_json, tour_csv);
  });

  auto* model = app.add_subcommand(
      "model",
      "predict each collective's and each layout's time from a fitted link, then measure it on the emulated cluster "
      "(Chapter 10)");
  static std::vector<int> model_nodes;
  static std::vector<std::string> model_links;
  static bool model_quick = false, model_no_steps = false;
  static std::optional<std::string> model_json;
  model->add_option("--nodes", model_nodes, "node counts, each a cluster of its own (default 2,4)")
      ->delimiter(',')
      ->check(CLI::Range(2, 8));  // hpc/cluster.sh's
  model->add_option("--links", model_links, "link rates, each a cluster of its own (default 100mbit,1gbit,10gbit)")
      ->delimiter(',');
  model->add_flag("--quick", model_quick, "2 nodes at 1gbit (unless given), fewer sizes and repeats (CI)");
  model->add_option("--json", model_json, "JSON lines file (default build/<preset>/model/model.jsonl)");
  model->add_flag("--no-steps", model_no_steps, "no training steps (measured on 2 nodes otherwise)");
  model->callback([&] { status = cmd_model(model_nodes, model_links, model_quick, model_json, model_no_steps); });

  auto* plan = app.add_subcommand(
      "plan",
      "rank every layout of Chapter 11's GPT on 4 ranks from its plan, then measure each, on 2 emulated nodes");
  static std::vector<std::string> plan_links;
  static bool plan_predict_only = false;
  static std::optional<std::string> plan_json;
  plan->add_option("--links", plan_links, "link rates, each a cluster of its own (default 1gbit)")->delimiter(',');
  plan->add_flag("--predict-only", plan_predict_only, "rank the layouts; measure none");
  plan->add_option("--json", plan_json, "JSON lines file (default build/<preset>/plan/plan.jsonl)");
  plan->callback([&] { status = cmd_plan(plan_links, plan_predict_only, plan_json); });

  auto* report = app.add_subcommand(
      "report", "PNG plots of result files, and a step of a --trace file: workbook report [FILE...] [--out DIR]");
  static std::vector<std::string> report_files;
  static std::optional<std::string> report_out;
  report->add_option("files", report_files, "tour.jsonl, model.jsonl, `workbook bench --json` or --trace files (default: the last tour's)")
      ->check(CLI::ExistingFile);
  report->add_option("--out", report_out, "folder for the PNGs (default build/<preset>/report)");
  static bool report_table_only = false;
  report->add_flag("--table", report_table_only, "the tour's table only: no plots drawn");
  report->callback([&] { status = cmd_report(report_files, report_out, report_table_only); });

  auto* cluster = app.add_subcommand(
      "cluster", "an emulated cluster on this machine (root): up [--nodes N] [--link RATE] | down | status | measure");
  cluster->prefix_command();  // every argument is hpc/cluster.sh's
  cluster->callback([&] { status = cmd_cluster(cluster->remaining()); });

  auto* grade = app.add_subcommand(
      "grade", "for instructors: a class's submissions built and tested, each in a sandbox, into a gradebook "
               "(workbook grade --help)");
  grade->prefix_command();  // every argument is the grader's, --help too
  grade->set_help_flag();
  grade->callback([&] { status = cmd_grade(grade->remaining()); });

  app.add_subcommand("info", "this build and this machine: LibTorch, CUDA, NCCL, MPI, cores, data")->callback([&] {
    status = cmd_info();
  });

  auto* dev = app.add_subcommand("dev", "for maintainers: regenerate or check the skeletons, try the known-wrong solutions");
  dev->require_subcommand(1);
  static bool sync_dry_run = false;
  auto* sync = dev->add_subcommand("sync", "write chapters/ from solutions/ (your edits there are backed up)");
  sync->add_flag("--dry-run", sync_dry_run, "only say which files would change");
  sync->callback([&] { status = cmd_dev_sync(sync_dry_run); });
  static bool no_reference_run = false;
  auto* dev_check =
      dev->add_subcommand("check", "fail on drift, on a student test passing on a skeleton, on a failing solution test");
  dev_check->add_flag("--no-reference-run", no_reference_run,
                      "do not run the reference tests (ctest has just run them all: CI); the rest is checked");
  dev_check->callback([&] { status = cmd_dev_check(!no_reference_run); });
  static std::optional<std::string> mutants_of;
  auto* mutants = dev->add_subcommand(
      "mutants", "every known-wrong solution in tests/mutants must fail its exercise's tests (a clean checkout only)");
  mutants->add_option("exercise", mutants_of, "only this exercise's or chapter's mutants, e.g. ex4.5 or ch04");
  mutants->callback([&] { status = cmd_dev_mutants(mutants_of); });

  try {
    const auto command = std::find_if(own_args.begin(), own_args.end(), [](const std::string& a) { return a[0] != '-'; });
    WB_CHECK(after_double_dash.empty() || (command != own_args.end() && (*command == "run" || *command == "bench")),
             "arguments after -- are for `workbook run` and `workbook bench` only");
    std::reverse(own_args.begin(), own_args.end());  // CLI11 takes a vector in reverse order
    app.parse(own_args);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help, or the mistake
    return code == 0 ? 0 : exit_code(ExitStatus::UserError);
  } catch (const workbook::UserError& e) {
    // The one message and the exit status of ARCHITECTURE.md, "Errors and exit status".
    fmt::print(stderr, "{}{}\n", failure_prefix(ExitStatus::UserError), e.what());
    return exit_code(ExitStatus::UserError);
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}{}\n", failure_prefix(ExitStatus::InternalError), e.what());
    return exit_code(ExitStatus::InternalError);
  }
  return status;
}
