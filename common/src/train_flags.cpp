// train_flags.cpp — the flags every training program takes.
#include "workbook/train_flags.hpp"
#include "workbook/parse_flags.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "workbook/device.hpp"

namespace workbook {

namespace {

// CLI11's own range check prints the whole range of a double; this says it plainly.
const CLI::Validator kPositive(
    [](std::string& value) -> std::string {
      try {
        if (std::stod(value) > 0) return "";
      } catch (const std::exception&) {
      }
      return "must be a positive number, got " + value;
    },
    "POSITIVE");

}  // namespace

void add_train_flags(CLI::App& app, TrainFlags& flags) {
  // A flag given twice takes its last value, so wrappers can append overrides.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--epochs", flags.epochs, "passes over the training set")->check(kPositive)
      ->capture_default_str();
  app.add_option("--batch", flags.batch, "global batch size (all ranks together)")->check(kPositive)
      ->capture_default_str();
  app.add_option("--lr", flags.lr, "learning rate")->check(kPositive)->capture_default_str();
  app.add_option("--data", flags.data, "directory with the Fashion-MNIST IDX files (.gz or not)");
  app.add_option("--device", flags.device, "cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--seed", flags.seed, "random seed")->capture_default_str();
  app.add_option("--threads", flags.threads, "CPU threads per rank (default: the cores this process may use)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--train-samples", flags.train_samples, "train on the first N samples (quick runs)")
      ->check(kPositive);
  app.add_option("--test-samples", flags.test_samples,
                 "evaluate on the first N test samples (quick runs; the accuracy is then of those N)")
      ->check(kPositive);
  app.add_option("--json", flags.json, "write JSON lines (per epoch, then the result) to FILE ('-': stdout)");
}

void parse_flags_or_exit(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    std::exit(app.exit(e));
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "{}: {}\nRun with --help for the flags.\n", app.get_name(), e.what());
    std::exit(2);
  }
}

TrainFlags parse_train_flags(CLI::App& app, TrainFlags& flags, int argc, char** argv) {
  parse_flags_or_exit(app, argc, argv);
  if (flags.threads == 0) flags.threads = available_cores();
  set_threads(flags.threads);
  return flags;
}

void add_distributed_flags(CLI::App& app, CommunicatorOptions& options) {
  app.add_option("--comm-timeout", options.timeout_s,
                 "seconds a collective may wait for the other ranks before this rank gives up and says where it "
                 "was (<= 0: forever; also $WORKBOOK_COMM_TIMEOUT)")
      ->capture_default_str();
  app.add_flag("--check-collectives", options.check_collectives,
               "compare every collective across ranks before it runs: a mismatch fails at once, naming the ranks "
               "and calls (also $WORKBOOK_CHECK_COLLECTIVES=1)");
}

}  // namespace workbook
