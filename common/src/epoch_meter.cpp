// epoch_meter.cpp — a training loop's loss, throughput and rows (epoch_meter.hpp).
#include "workbook/epoch_meter.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "workbook/device.hpp"
#include "workbook/memory.hpp"

namespace workbook {

EpochMeter::EpochMeter(Program& program, int64_t warmup_steps, int data_parallel_ranks)
    : program_(program),
      warmup_steps_(warmup_steps),
      data_parallel_ranks_(data_parallel_ranks > 0 ? data_parallel_ranks : program.ranks()),
      table_({{"epoch", 5}, {"train_loss", 10}, {"test_loss", 9}, {"test_acc", 8}, {"epoch_s", 8},
              {"samples/s", 10}, {"peak_mem", 10}}) {
  program_.say("{}", table_.header());
}

EpochMeter::~EpochMeter() = default;

void EpochMeter::begin_epoch(int64_t epoch, int64_t steps) {
  const torch::Device device = program_.device();
  epoch_ = epoch;
  warmup_ = epochs_trained_ == 0 ? std::min(warmup_steps_, steps - 1) : 0;
  timed_samples_ = 0;
  loss_sum_ = torch::zeros({2}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
  clock_ = std::make_unique<Stopwatch>(device);
  // Note: mpirun gives its ranks a pseudo-terminal for stdout, so rank 0 sees
  // a terminal even when the job's output goes to a file: a multi-rank run
  // draws no bar (its per-epoch rows are the progress).
  bar_ = std::make_unique<ProgressBar>(fmt::format("epoch {}", epoch), steps,
                                       program_.leader() && !program_.env().distributed() && stdout_is_terminal());
  started_ = now_seconds();
}

void EpochMeter::before_step(int64_t step) {
  step_ = step;
  if (step == warmup_) clock_->start();
  if (trace::on()) step_span_.emplace(trace::Kind::Step, fmt::format("epoch {} step {}", epoch_, step));
}

void EpochMeter::after_step(const torch::Tensor& loss, int64_t samples) {
  if (loss.defined()) {  // undefined on a rank that computes no loss (a pipeline's stages before the last)
    loss_sum_[0] += loss.detach().to(torch::kFloat64) * static_cast<double>(samples);
    loss_sum_[1] += static_cast<double>(samples);
  }
  if (step_ >= warmup_) timed_samples_ += samples * data_parallel_ranks_;
  bar_->update(step_ + 1);
  step_span_.reset();
}

EpochTotals EpochMeter::end_epoch() {
  EpochTotals totals;
  totals.epoch = epoch_;
  const double timed_s = clock_->stop();
  totals.epoch_s = now_seconds() - started_;
  bar_->finish();
  program_.comm().all_reduce(loss_sum_, ReduceOp::Sum);  // the training loss over every rank's samples
  totals.train_loss = loss_sum_[0].item<double>() / loss_sum_[1].item<double>();
  totals.samples_per_s = timed_s > 0 ? static_cast<double>(timed_samples_) / timed_s : 0.0;
  record(totals, timed_s, timed_samples_);
  return totals;
}

void EpochMeter::record(const EpochTotals& totals, double timed_seconds, int64_t timed_samples) {
  ++epochs_trained_;
  all_epoch_s_ += totals.epoch_s;
  all_timed_s_ += timed_seconds;
  all_timed_samples_ += timed_samples;
}

void EpochMeter::report(const EpochTotals& totals, double test_loss, double test_accuracy) {
  const int64_t peak = peak_memory_bytes(program_.device());
  program_.say("{}", table_.row({fmt::format("{}", totals.epoch), fmt::format("{:.4f}", totals.train_loss),
                                 fmt::format("{:.4f}", test_loss), fmt::format("{:.4f}", test_accuracy),
                                 fmt::format("{:.2f}", totals.epoch_s), fmt::format("{:.1f}", totals.samples_per_s),
                                 format_bytes(peak)}));
  program_.json().write({{"type", "epoch"}, {"chapter", program_.chapter()}, {"epoch", totals.epoch},
                         {"train_loss", totals.train_loss}, {"test_loss", test_loss},
                         {"test_accuracy", test_accuracy}, {"epoch_s", totals.epoch_s},
                         {"samples_per_s", totals.samples_per_s}, {"peak_mem_bytes", peak}});
}

RunResult EpochMeter::result(std::string config) {
  RunResult r;
  r.config = std::move(config);
  r.epochs = program_.flags().epochs;
  r.epochs_trained = epochs_trained_;
  r.batch = program_.flags().batch;
  r.local_batch = r.batch / data_parallel_ranks_;
  r.samples_per_s = samples_per_s();
  r.epoch_s = mean_epoch_s();
  r.peak_mem_bytes = program_.peak_memory_bytes();  // what one rank needs
  return r;
}

double EpochMeter::samples_per_s() const {
  return all_timed_s_ > 0 ? static_cast<double>(all_timed_samples_) / all_timed_s_ : 0.0;
}

double EpochMeter::mean_epoch_s() const {
  return epochs_trained_ > 0 ? all_epoch_s_ / static_cast<double>(epochs_trained_) : 0.0;
}

}  // namespace workbook
