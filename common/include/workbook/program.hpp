// program.hpp — the skeleton every multi-process training and bench program is
// built on: start-up, the leader's output, and the typed result that ends a run.
// A chapter's main file then holds only its algorithm:
//
//   int train(workbook::Program& program) {
//     std::string mode = "flat";
//     program.cli().add_option("--mode", mode, "...");   // the program's own flags
//     const workbook::TrainFlags& flags = program.parse();
//     const int64_t local_batch = program.local_batch(flags.batch);  // checked on every rank
//     workbook::Communicator& comm = program.connect();
//     ... the chapter's algorithm ...
//     program.finish(result);                            // a RunResult or a BenchResult
//     return 0;
//   }
//   int main(int argc, char** argv) {
//     return workbook::program_main(argc, argv, {"ch03_train", "Chapter 3: ..."}, train);
//   }
//
// The single-process programs (Chapters 1 and 2) start through
// single_process_main: the same skeleton without a communicator (no
// connect(); device() is --device itself).
//
// Note: [checks before communication] Everything that can be checked from the
// flags alone is checked before connect(), the same way on every rank: each
// rank says it and exits 2, and no rank is left waiting in a collective for a
// peer that already left.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "workbook/communicator.hpp"
#include "workbook/fashion_mnist.hpp"
#include "workbook/launch.hpp"
#include "workbook/results.hpp"
#include "workbook/train_flags.hpp"

namespace workbook {

struct ProgramInfo {
  std::string name;         // "ch03_train": its chapter is what comes before the '_'
  std::string description;  // the first line of --help
};

// What a training run reports in its last JSON line, {"type": "result", ...}
// (ARCHITECTURE.md, Output). The program fills in what it measured; the
// skeleton adds chapter, device, ranks and threads.
struct RunResult {
  std::string config;                       // what was trained, in words: "DDP", "lars, global batch 2048"
  int64_t epochs = 0;                       // asked for
  std::optional<int64_t> epochs_trained;    // by this run: fewer than `epochs` when resumed or diverged
  int64_t batch = 0;                        // global batch
  std::optional<int64_t> local_batch;       // per rank
  int64_t train_samples = 0;
  std::optional<double> test_accuracy;      // none for a model that is not a classifier (Chapter 11's GPT)
  std::optional<int64_t> test_correct, test_total;
  std::optional<double> test_loss;
  double samples_per_s = 0.0;               // timed steps only, all ranks together
  double epoch_s = 0.0;                     // mean seconds per epoch trained
  int64_t peak_mem_bytes = 0;               // the largest rank's
  std::optional<std::string> weights_sha256;
  nlohmann::json details = nlohmann::json::object();  // the chapter's own keys ("allreduce", "buckets", ...)
  std::string summary;  // the leader's "result: ..." line; empty: the standard one from the fields above

  // The test set's verdict, in one call.
  void evaluated(double accuracy, double loss, int64_t correct, int64_t total) {
    test_accuracy = accuracy;
    test_loss = loss;
    test_correct = correct;
    test_total = total;
  }
};

// What a benchmark reports in its last JSON line: no training fields, only
// what it measured ({"type": "result", "kind": "bench", ...}). The tables
// themselves are the "row" lines written before it.
struct BenchResult {
  std::string config = "bench";
  nlohmann::json headline = nlohmann::json::object();  // the figures that sum the run up ("comm_share", ...)
};

class Program {
 public:
  // `env`: the launch environment of a multi-process program; none: a single process.
  Program(ProgramInfo info, std::optional<LaunchEnv> env, int argc, char** argv);
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  ~Program();

  // ---- start-up, in this order --------------------------------------------
  CLI::App& cli() { return app_; }         // the program adds its own flags here
  TrainFlags& flags() { return flags_; }   // change defaults here, before parse()
  // Parses the command line: --help prints usage and exits 0; a bad flag
  // prints one message and exits 2. Applies --threads. A single process also
  // opens its JSON lines here.
  const TrainFlags& parse();
  // `global_batch` / ranks, after checking that it divides and that every rank
  // gets a sample of the --train-samples (a UserError on every rank otherwise).
  int64_t local_batch(int64_t global_batch) const;
  // Starts the communicator for --device (on CUDA: this rank's GPU, chosen by
  // local rank) and the leader's JSON lines.
  Communicator& connect();
  // Fashion-MNIST as --data and --train-samples ask, on this rank's device.
  FashionMnist load_data() const;

  // ---- during the run -------------------------------------------------------
  const std::string& name() const { return info_.name; }
  const std::string& chapter() const { return chapter_; }
  const LaunchEnv& env() const { return env_; }
  int ranks() const { return env_.world_size; }
  Communicator& comm();
  torch::Device device() const;
  // The largest rank's peak memory (a collective when there are several ranks).
  int64_t peak_memory_bytes();
  bool leader() const { return env_.rank == 0; }
  JsonLines& json() { return json_; }  // writes on the leader only

  // A line printed by the leader only, and flushed: a job's log is a file or
  // a pipe, and a run that dies must keep the lines it printed.
  template <typename... Args>
  void say(fmt::format_string<Args...> format, Args&&... args) const {
    if (!leader()) return;
    fmt::print("{}\n", fmt::format(format, std::forward<Args>(args)...));
    std::fflush(stdout);
  }

  // ---- the end ----------------------------------------------------------------
  // The result line on every rank's JSON lines (the leader's only are written)
  // and the leader's "result: ..." line. Call once, on every rank.
  void finish(const RunResult& result);
  void finish(const BenchResult& result);

 private:
  nlohmann::json result_header(const std::string& config) const;

  ProgramInfo info_;
  std::string chapter_;
  LaunchEnv env_;
  bool distributed_;  // started by program_main (a communicator), not single_process_main
  torch::Device device_ = torch::kCPU;  // a single process's --device
  int argc_;
  char** argv_;
  CLI::App app_;
  TrainFlags flags_;
  CommunicatorOptions comm_options_;
  std::optional<std::string> trace_file_;  // --trace FILE (trace.hpp)
  std::unique_ptr<Communicator> comm_;
  JsonLines json_;
  bool parsed_ = false;
};

// The entry point of a multi-process program: reads the launch environment (a
// bad one is one clear message and exit 2), runs `body`, turns any failure
// into one message (prefixed with the rank when there are several) and its
// exit status (exit_status.hpp), and ends a failing rank without finalizing
// MPI, so that no peer is left waiting.
int program_main(int argc, char** argv, ProgramInfo info, const std::function<int(Program&)>& body);

// The entry point of a single-process program (Chapters 1 and 2): runs
// `body`, turning any failure into one message and its exit status.
int single_process_main(int argc, char** argv, ProgramInfo info, const std::function<int(Program&)>& body);

// The entry point of a multi-process program that does not train (the smoke
// test): program_main without the skeleton.
int run_distributed_main(const std::function<int(const LaunchEnv&)>& body);

}  // namespace workbook
