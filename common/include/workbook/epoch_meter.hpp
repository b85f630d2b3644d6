// epoch_meter.hpp — the bookkeeping of a data-parallel training loop: the
// training loss over every rank's samples, the timed steps' throughput, the
// leader's row per epoch and its JSON line.
//
//   workbook::EpochMeter meter(program, /*warmup_steps=*/5);
//   for (epoch ...) {
//     meter.begin_epoch(epoch, steps_per_epoch);
//     for (step ...) { meter.before_step(step); ...; meter.after_step(loss, batch_size); }
//     const workbook::EpochTotals totals = meter.end_epoch();   // one all-reduce
//     ... evaluate ...
//     meter.report(totals, test_loss, test_accuracy);
//   }
//   workbook::RunResult result = meter.result("DDP");  // then what was evaluated
//
// Note: [what is timed] The first steps of the first epoch this process trains
// are warm-up (first-call allocations, caches), left out of samples_per_s;
// epoch_s is the whole epoch's wall time. The loss is summed on the device and
// read once per epoch: reading it every step would make the host wait for the
// device every step.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>

#include <torch/torch.h>

#include "workbook/program.hpp"
#include "workbook/progress.hpp"
#include "workbook/results.hpp"
#include "workbook/timing.hpp"
#include "workbook/trace.hpp"

namespace workbook {

struct EpochTotals {
  int64_t epoch = 0;
  double train_loss = 0.0;     // mean over every rank's samples
  double epoch_s = 0.0;        // wall time of the epoch's steps
  double samples_per_s = 0.0;  // timed steps, all ranks together
};

class EpochMeter {
 public:
  // data_parallel_ranks: how many ranks train on different samples (0: all
  // of them). Where ranks split one model instead (Chapter 8), several ranks
  // step the same samples, and counting each rank's would count them twice.
  EpochMeter(Program& program, int64_t warmup_steps, int data_parallel_ranks = 0);
  ~EpochMeter();

  void begin_epoch(int64_t epoch, int64_t steps);
  void before_step(int64_t step);
  // `loss`: this rank's mean loss over `samples`; undefined where the rank
  // computes none (a pipeline stage before the last): its samples are then
  // counted for the throughput only.
  void after_step(const torch::Tensor& loss, int64_t samples);
  EpochTotals end_epoch();  // every rank: all-reduces the loss, then record()s the epoch
  // Counts an epoch into the run's totals. For a loop that measured its own
  // epoch (Chapter 1's train_epoch) instead of begin/before/after/end.
  void record(const EpochTotals& totals, double timed_seconds, int64_t timed_samples);
  // The leader's row and the epoch's JSON line.
  void report(const EpochTotals& totals, double test_loss, double test_accuracy);

  // The run's result as far as the loop measured it: config, epochs (asked
  // and trained), global and local batch, samples_per_s, epoch_s and the
  // largest rank's peak memory (a collective: every rank calls it). The
  // program adds what it evaluated and its own details.
  RunResult result(std::string config);

  int64_t epochs_trained() const { return epochs_trained_; }
  double samples_per_s() const;  // over every epoch trained
  double mean_epoch_s() const;

 private:
  Program& program_;
  int64_t warmup_steps_;
  int data_parallel_ranks_;
  Table table_;
  // This epoch.
  int64_t epoch_ = 0, warmup_ = 0, step_ = 0, timed_samples_ = 0;
  double started_ = 0.0;
  torch::Tensor loss_sum_;  // [sum of loss x samples, samples], float64, on the device
  std::unique_ptr<Stopwatch> clock_;
  std::unique_ptr<ProgressBar> bar_;
  std::optional<trace::Span> step_span_;  // from before_step to after_step, when tracing
  // Every epoch.
  int64_t epochs_trained_ = 0, all_timed_samples_ = 0;
  double all_epoch_s_ = 0.0, all_timed_s_ = 0.0;
};

}  // namespace workbook
