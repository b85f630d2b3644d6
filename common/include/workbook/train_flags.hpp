// train_flags.hpp — the flags every training program takes, the same everywhere:
// --epochs --batch --lr --data --device --seed --threads --train-samples --test-samples --json.
#pragma once
#include <filesystem>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include "workbook/communicator.hpp"

namespace workbook {

struct TrainFlags {
  int epochs = 1;
  int64_t batch = 100;   // global batch: split across ranks from Chapter 3 on
  double lr = 1e-3;
  std::optional<std::filesystem::path> data;
  std::string device = "cpu";
  uint64_t seed = 0;
  int threads = 0;       // 0: every core this process may use (set per rank)
  int64_t train_samples = -1;  // -1: the whole training set
  int64_t test_samples = -1;   // -1: the whole test set
  std::optional<std::filesystem::path> json;
};

// Registers the flags on `app`, with `defaults` as their defaults.
void add_train_flags(CLI::App& app, TrainFlags& flags);

// Parses argv. --help prints usage and exits 0; a bad flag prints one message
// and exits 2. After parsing, the thread count is applied to LibTorch.
TrainFlags parse_train_flags(CLI::App& app, TrainFlags& flags, int argc, char** argv);

// The flags of the multi-process programs (Chapter 3 on): --comm-timeout
// and --check-collectives, with `options` (read from the environment) as defaults.
void add_distributed_flags(CLI::App& app, CommunicatorOptions& options);

}  // namespace workbook
