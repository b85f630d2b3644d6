// run_config.hpp — what ch06_train runs (given code): one configuration
// trained for its epochs (train_config), the checks of a batch's split, and
// --sweep's steps to a target per batch (run_sweep). main_train.cpp reads as
// the choice between them.
#pragma once
#include <optional>
#include <string>

#include "methods.hpp"
#include "schedule.hpp"
#include "steps_to_target.hpp"
#include "workbook/program.hpp"

namespace ch06 {

inline constexpr int64_t kEvalBatch = 1000;

// One configuration of --compare (or the single run).
struct Config {
  int64_t global_batch;
  Method method;
};

struct Outcome {
  double test_accuracy = 0.0;
  double test_loss = 0.0;
  double train_seconds = 0.0;                 // training steps only, every rank in step
  std::optional<double> seconds_to_target;    // training time when an evaluation first reached --target
  std::optional<int64_t> epochs_to_target;
  int64_t steps = 0;
  int64_t samples = 0;
  bool diverged = false;
  int64_t epochs_done = 0;
};

struct Setup {
  workbook::TrainFlags flags;
  int64_t micro_batch = 256;
  std::optional<double> warmup_epochs;  // default: a quarter of the epochs, at most 5
  std::optional<double> base_lr;        // default: the method's
  double target = 0.85;
  bool momentum_correction = false;  // LARS only (Note: [momentum correction] in lars.cpp)
  bool noise_scale = false;          // estimate B_simple every epoch (noise_scale.hpp)
  std::string decay = "linear";      // "linear": to 0 at the run's end; "step": x0.1 at 1/2 and 3/4
};

// The method's schedule at this configuration's batch.
ch06::LrSchedule schedule_for(const Config& config, const Setup& setup);

// One configuration trained for setup.flags.epochs: a row per epoch to
// `table` and `json`, the outcome at the end.
Outcome train_config(const Config& config, const Setup& setup, const workbook::FashionMnist& data,
                     workbook::Communicator& comm, workbook::Table& table, workbook::JsonLines& json);

// Every global batch is checked before the first run trains: a sweep must
// not fail hours in.
void check_batch_splits(int64_t global_batch, int ranks, int64_t micro_batch);

// --sweep: steps to the target at every batch, each batch's rate tuned
// (steps_to_target.hpp), then the model S = S_min · (1 + B_crit / B) fitted
// to them beside the noise scale B_simple measured from the gradients.
int run_sweep(workbook::Program& program, const ch06::SweepSetup& sweep);

}  // namespace ch06
