// train_epoch.cpp — ex1.4: one epoch, timed honestly.
#include "single_device.hpp"

#include "workbook/errors.hpp"

#include "workbook/timing.hpp"

namespace ch01 {

EpochStats train_epoch(workbook::Classifier& model, const StepFn& step_fn, const torch::Tensor& images,
                       const torch::Tensor& labels, const torch::Tensor& order, int64_t batch_size,
                       const torch::Device& device, int64_t warmup_steps,
                       const std::function<void(int64_t, int64_t)>& on_step) {
  WB_NOT_IMPLEMENTED("ex1.4");  // TODO(ex1.4): your code here
}

EpochStats train_epoch(workbook::Classifier& model, torch::optim::Optimizer& optimizer, const torch::Tensor& images,
                       const torch::Tensor& labels, const torch::Tensor& order, int64_t batch_size,
                       const torch::Device& device, int64_t warmup_steps,
                       const std::function<void(int64_t, int64_t)>& on_step) {
  const StepFn step = [&](const Batch& batch) { return train_step(model, optimizer, batch); };
  return train_epoch(model, step, images, labels, order, batch_size, device, warmup_steps, on_step);
}

}  // namespace ch01
