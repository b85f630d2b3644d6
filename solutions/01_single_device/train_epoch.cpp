// train_epoch.cpp — ex1.4: one epoch, timed honestly.
#include "single_device.hpp"

#include "workbook/errors.hpp"

#include "workbook/timing.hpp"

namespace ch01 {

EpochStats train_epoch(workbook::Classifier& model, const StepFn& step_fn, const torch::Tensor& images,
                       const torch::Tensor& labels, const torch::Tensor& order, int64_t batch_size,
                       const torch::Device& device, int64_t warmup_steps,
                       const std::function<void(int64_t, int64_t)>& on_step) {
  // BEGIN SOLUTION ex1.4
  model.train();
  const int64_t steps = batches_per_epoch(order.size(0), batch_size);
  workbook::Stopwatch clock(device);  // synchronizes the device at start() and stop()
  torch::Tensor loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
  // The order goes where the data is, once: make_batch would otherwise copy
  // its slice there at every step, and a copy from the host's ordinary memory
  // waits for the GPU to finish its queue.
  const torch::Tensor order_by_data = order.to(images.device());
  EpochStats stats;
  for (int64_t step = 0; step < steps; ++step) {
    if (step == warmup_steps) clock.start();
    Batch batch = make_batch(images, labels, order_by_data, step, batch_size, device);
    const int64_t n = batch.labels.size(0);
    // The step's loss is a batch mean: weight it by the batch size so the
    // epoch's mean is over samples, and keep it on the device (no sync).
    loss_sum += step_fn(batch).to(torch::kFloat64) * static_cast<double>(n);
    stats.samples += n;
    if (step >= warmup_steps) stats.timed_samples += n;
    if (on_step) on_step(step + 1, steps);
  }
  if (warmup_steps < steps) stats.timed_seconds = clock.stop();
  stats.mean_loss = stats.samples == 0 ? 0.0 : loss_sum.item<double>() / static_cast<double>(stats.samples);
  return stats;
  // END SOLUTION
}

EpochStats train_epoch(workbook::Classifier& model, torch::optim::Optimizer& optimizer, const torch::Tensor& images,
                       const torch::Tensor& labels, const torch::Tensor& order, int64_t batch_size,
                       const torch::Device& device, int64_t warmup_steps,
                       const std::function<void(int64_t, int64_t)>& on_step) {
  const StepFn step = [&](const Batch& batch) { return train_step(model, optimizer, batch); };
  return train_epoch(model, step, images, labels, order, batch_size, device, warmup_steps, on_step);
}

}  // namespace ch01
