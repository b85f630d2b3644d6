// train_flags.hpp — the flags every training program takes, the same everywhere:
// --epochs --batch --lr --data --device --seed --threads --train-samples --json.
#pragma once
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include "workbook/communicator.hpp"
#include "workbook/fashion_mnist.hpp"
#include "workbook/launch.hpp"

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
  std::optional<std::filesystem::path> json;
};

// Registers the flags on `app`, with `defaults` as their defaults.
void add_train_flags(CLI::App& app, TrainFlags& flags);

// Parses argv. --help prints usage and exits 0; a bad flag prints one message
// and exits 2. After parsing, the thread count is applied to LibTorch.
TrainFlags parse_train_flags(CLI::App& app, TrainFlags& flags, int argc, char** argv);

// The data a training program asked for: Fashion-MNIST found from --data (or
// the usual places), checked, cut to --train-samples, and moved to `device`.
// Note: Fashion-MNIST is 188 MB as float32: it fits on any GPU, so the whole
// set moves there once and batches are gathered on the device. On the CPU
// the tensors already are where the model is.
FashionMnist load_training_data(const TrainFlags& flags, const torch::Device& device);

// Runs `body`, turning a UserError into one message on stderr and exit 2.
// Every program's main() is `return workbook::run_main([&] { ... });`.
int run_main(const std::function<int()>& body);

// The flags of the multi-process programs (Chapter 3 on): --comm-timeout
// and --check-collectives, with `options` (read from the environment) as defaults.
void add_distributed_flags(CLI::App& app, CommunicatorOptions& options);

// run_main for the multi-process programs: reads the launch environment
// first (a bad one is one clear message and exit 2), prefixes every error
// with the rank when there are several, and ends a failing rank without
// finalizing MPI (exit_distributed), so that no peer is left waiting.
int run_distributed_main(const std::function<int(const LaunchEnv&)>& body);

}  // namespace workbook
