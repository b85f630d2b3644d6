// run_config.cpp — one configuration of ch06_train trained, and a batch's split checked (run_config.hpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <numeric>
#include <optional>

#include "accumulation.hpp"
#include "ddp.hpp"  // Chapter 3's reference: broadcast_model, DistributedSampler, gather_batch, evaluate_distributed
#include "methods.hpp"
#include "optimizers.hpp"
#include "run_config.hpp"
#include "schedule.hpp"
#include "steps_to_target.hpp"
#include "workbook/errors.hpp"
#include "workbook/memory.hpp"
#include "noise_scale.hpp"
#include "workbook/program.hpp"
#include "workbook/seeds.hpp"
#include "workbook/timing.hpp"

namespace ch06 {

// The method's schedule at this configuration's batch.
ch06::LrSchedule schedule_for(const Config& config, const Setup& setup) {
  ch06::LrSchedule schedule;
  schedule.base_lr = setup.base_lr.value_or(config.method.base_lr);
  schedule.base_batch = kBaseBatch;
  schedule.global_batch = config.global_batch;
  schedule.scaling_power = config.method.scaling_power;
  const double epochs = setup.flags.epochs;
  schedule.warmup_epochs = config.method.warmup ? setup.warmup_epochs.value_or(std::min(5.0, epochs / 4.0)) : 0.0;
  if (setup.decay == "step")
    schedule.decay_epochs = {epochs * 0.5, epochs * 0.75};
  else
    schedule.end_epoch = epochs;
  return schedule;
}

Outcome train_config(const Config& config, const Setup& setup, const workbook::FashionMnist& data,
                     workbook::Communicator& comm, workbook::Table& table, workbook::JsonLines& json) {
  const workbook::TrainFlags& flags = setup.flags;
  const int ranks = comm.size();
  const torch::Device device = comm.device();
  const bool leader = comm.rank() == 0;
  const int64_t local_batch = config.global_batch / ranks;
  const int64_t micro_batch = std::min(setup.micro_batch, local_batch);  // checked before any training

  // The same initial weights for every configuration: the seed's, on rank 0.
  torch::manual_seed(workbook::initial_weights_seed(flags.seed, comm.rank()));
  auto model = std::make_shared<workbook::FashionCNN>();
  model->to(device);
  ch03::broadcast_model(*model, comm, 0);
  std::unique_ptr<torch::optim::Optimizer> optimizer =
      make_optimizer(config.method, *model, setup.momentum_correction);

  ch03::DistributedSampler sampler(data.train.size(), ranks, comm.rank(), /*shuffle=*/true, flags.seed);
  const int64_t steps_per_epoch = sampler.num_samples() / local_batch;  // whole batches only
  WB_CHECK(steps_per_epoch >= 1, "global batch {} is more than the {} training samples", config.global_batch,
           data.train.size());
  const ch06::LrSchedule schedule = schedule_for(config, setup);
  const std::string variant = fmt::format("{}@{}", config.method.name, config.global_batch);

  // --noise-scale: the same steps, a micro-batch per GradientAggregator::add,
  // whose observer sees each rank's own gradient before the all-reduce.
  std::optional<ch06::GradientAggregator> aggregator;
  std::optional<ch06::NoiseScale> noise;
  torch::Tensor local_squared;  // |this rank's gradient|², the last round's
  if (setup.noise_scale) {
    aggregator.emplace(*model, *optimizer, comm, local_batch / micro_batch);
    aggregator->observe_local_gradients([&](workbook::Classifier& m) { local_squared = ch06::squared_gradient_norm(m); });
    noise.emplace(local_batch, config.global_batch);
  }

  Outcome outcome;
  for (int64_t epoch = 1; epoch <= flags.epochs && !outcome.diverged; ++epoch) {
    sampler.set_epoch(epoch);
    const torch::Tensor indices = sampler.indices();
    double loss_sum = 0.0;
    double lr = 0.0;
    for (int64_t step = 0; step < steps_per_epoch; ++step) {
      lr = ch06::learning_rate_at(schedule, static_cast<double>(epoch - 1) +
                                                static_cast<double>(step) / static_cast<double>(steps_per_epoch));
      ch06::set_learning_rate(*optimizer, lr);
      const ch03::Batch batch =
          ch03::gather_batch(data.train.images, data.train.labels, indices, step * local_batch, local_batch);
      workbook::Stopwatch clock(device);
      clock.start();
      torch::Tensor loss;
      if (aggregator) {
        for (const ch03::Batch& micro : ch06::split_batch(batch, micro_batch)) aggregator->add(micro);
        loss = aggregator->last_loss();
      } else {
        loss = ch06::accumulated_train_step(*model, *optimizer, ch06::split_batch(batch, micro_batch), comm);
      }
      outcome.train_seconds += clock.stop();
      if (noise) noise->add(local_squared, ch06::squared_gradient_norm(*model));  // .grad: the averaged gradient
      loss_sum += loss.item<double>();
      ++outcome.steps;
      outcome.samples += config.global_batch;
    }
    torch::Tensor loss_sums =
        torch::tensor({loss_sum, static_cast<double>(steps_per_epoch)}, torch::kFloat64).to(device);
    comm.all_reduce(loss_sums, workbook::ReduceOp::Sum);  // every rank's batches: the same verdict everywhere
    const double train_loss = loss_sums[0].item<double>() / loss_sums[1].item<double>();
    // A rate too high for the model sends the loss to infinity, after which
    // nothing recovers: the configuration stops there, and says so.
    outcome.diverged = !std::isfinite(train_loss);
    const ch03::EvalResult eval =
        ch03::evaluate_distributed(*model, data.test.images, data.test.labels, kEvalBatch, comm);
    outcome.test_accuracy = eval.accuracy();
    outcome.test_loss = eval.mean_loss;
    outcome.epochs_done = epoch;
    if (!outcome.seconds_to_target && eval.accuracy() >= setup.target) {
      outcome.seconds_to_target = outcome.train_seconds;
      outcome.epochs_to_target = epoch;
    }
    if (leader)
      fmt::print("{}\n", table.row({fmt::format("{}", config.global_batch), config.method.name,
                                    fmt::format("{}", epoch), fmt::format("{:.4g}", lr),
                                    outcome.diverged ? "diverged" : fmt::format("{:.4g}", train_loss),
                                    fmt::format("{:.4f}", eval.accuracy()), fmt::format("{:.1f}", outcome.train_seconds)}));
    nlohmann::json record = {{"type", "epoch"}, {"chapter", "ch06"}, {"variant", variant},
                             {"global_batch", config.global_batch}, {"method", config.method.name}, {"epoch", epoch},
                             {"lr", lr}, {"train_loss", outcome.diverged ? nlohmann::json(nullptr) : nlohmann::json(train_loss)},
                             {"test_accuracy", eval.accuracy()}, {"train_s", outcome.train_seconds}};
    if (noise) {
      const ch06::NoiseScaleEstimate e = noise->estimate(comm);
      const bool resolved = e.resolved();
      if (leader)
        fmt::print("  noise scale over the epoch's {} steps: B_simple = {} (|G|² {:.4g}, tr Σ {:.4g}; {} per rank "
                   "against {} in all)\n",
                   e.steps, resolved ? fmt::format("{:.0f} samples", e.b_simple) : "not resolved",
                   e.gradient_squared, e.trace_sigma, local_batch, config.global_batch);
      record["noise_scale"] = {{"b_simple", resolved ? nlohmann::json(e.b_simple) : nlohmann::json(nullptr)},
                               {"gradient_squared", e.gradient_squared}, {"trace_sigma", e.trace_sigma},
                               {"steps", e.steps}};
    }
    if (leader) std::fflush(stdout);  // a row per epoch also when the log is a file or a pipe
    json.write(record);
  }
  return outcome;
}

// Every global batch is checked before the first run trains: a sweep must
// not fail hours in.
void check_batch_splits(int64_t global_batch, int ranks, int64_t micro_batch) {
  WB_CHECK(global_batch % ranks == 0, "global batch {} must divide evenly among the {} ranks", global_batch, ranks);
  const int64_t local_batch = global_batch / ranks;
  WB_CHECK(local_batch % std::min(micro_batch, local_batch) == 0,
           "global batch {} must split into {} ranks x micro-batches of {} (--micro-batch): use a multiple of {}",
           global_batch, ranks, micro_batch, ranks * micro_batch);
}

}  // namespace ch06
