// schedule.cpp — given: linear scaling, gradual warm-up, step or linear decay.
#include "schedule.hpp"

#include <algorithm>
#include <cmath>

#include "workbook/errors.hpp"

namespace ch06 {

double peak_learning_rate(const LrSchedule& schedule) {
  WB_CHECK(schedule.base_lr > 0 && schedule.base_batch > 0 && schedule.global_batch > 0,
           "learning-rate schedule: base_lr {}, base_batch {} and global_batch {} must be positive", schedule.base_lr,
           schedule.base_batch, schedule.global_batch);
  WB_CHECK(schedule.end_epoch <= 0 || schedule.end_epoch > schedule.warmup_epochs,
           "learning-rate schedule: the decay ends at epoch {}, not after the warm-up's {}", schedule.end_epoch,
           schedule.warmup_epochs);
  const double ratio = static_cast<double>(schedule.global_batch) / static_cast<double>(schedule.base_batch);
  return schedule.base_lr * std::pow(ratio, schedule.scaling_power);
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (torch::optim::OptimizerParamGroup& group : optimizer.param_groups()) group.options().set_lr(lr);
}

double learning_rate_at(const LrSchedule& schedule, double epoch) {
  const double peak = peak_learning_rate(schedule);
  double lr = peak;
  if (schedule.warmup_epochs > 0 && epoch < schedule.warmup_epochs) {
    // Goyal et al.: from the single-device rate, by the same amount every step.
    const double start = std::min(schedule.base_lr, peak);
    lr = start + (peak - start) * std::max(epoch, 0.0) / schedule.warmup_epochs;
  } else if (schedule.end_epoch > 0) {
    // A straight line to 0 at the run's end: the rate is still large while the
    // run has far to go, and small for its last steps, however long it is.
    lr = peak * std::max(schedule.end_epoch - epoch, 0.0) / (schedule.end_epoch - schedule.warmup_epochs);
  }
  for (const double milestone : schedule.decay_epochs)
    if (epoch >= milestone) lr *= schedule.decay_factor;
  return lr;
}

}  // namespace ch06
