// step.cpp — ex2.5: DataParallel's forward pass and its training step.
#include "data_parallel.hpp"

#include "workbook/device.hpp"
#include "workbook/errors.hpp"
#include "workbook/timing.hpp"

namespace ch02 {

PhaseTimer::PhaseTimer(StepTimes* times, const std::vector<torch::Device>& devices)
    : times_(times), devices_(devices) {
  if (!times_) return;
  workbook::synchronize(devices_);
  last_ = workbook::now_seconds();
}

void PhaseTimer::lap(double StepTimes::*phase) {
  if (!times_) return;
  workbook::synchronize(devices_);  // CUDA work is asynchronous: wait before reading the clock
  const double now = workbook::now_seconds();
  times_->*phase += now - last_;
  last_ = now;
}

torch::Tensor data_parallel_forward(workbook::Classifier& model, const torch::Tensor& images,
                                    const std::vector<torch::Device>& devices, int threads_per_replica,
                                    StepTimes* times) {
  // BEGIN SOLUTION ex2.5
  PhaseTimer timer(times, devices);
  std::vector<torch::Tensor> chunks = scatter(images, devices);
  timer.lap(&StepTimes::scatter_s);
  // Note: the replicas are rebuilt on every call. After the optimizer step
  // the original's parameters have changed, and copies made earlier would be
  // stale; copying again is the simple, always-correct answer. Chapter 3
  // keeps one model per process and sends gradients instead.
  std::vector<workbook::ClassifierPtr> replicas = replicate(model, devices);
  timer.lap(&StepTimes::replicate_s);
  std::vector<torch::Tensor> outputs = parallel_apply(replicas, chunks, devices, threads_per_replica);
  timer.lap(&StepTimes::forward_s);
  torch::Tensor logits = gather(outputs, devices[0]);
  timer.lap(&StepTimes::gather_s);
  return logits;
  // END SOLUTION
}

torch::Tensor data_parallel_step(workbook::Classifier& model, torch::optim::Optimizer& optimizer,
                                 const torch::Tensor& images, const torch::Tensor& labels,
                                 const std::vector<torch::Device>& devices, int threads_per_replica,
                                 StepTimes* times) {
  // BEGIN SOLUTION ex2.5
  WB_CHECK(!devices.empty(), "data_parallel_step: no devices");
  WB_CHECK(labels.device() == devices[0], "data_parallel_step: the labels are on {}, the primary device is {}",
           labels.device().str(), devices[0].str());
  optimizer.zero_grad();
  torch::Tensor logits = data_parallel_forward(model, images, devices, threads_per_replica, times);
  PhaseTimer timer(times, devices);
  // The loss needs every sample's logits: this is why they all come to the
  // primary device, and why it holds more than the others.
  torch::Tensor loss = torch::nn::functional::cross_entropy(logits, labels);
  loss.backward();  // through gather, the replicas, and their edges into model's .grad
  timer.lap(&StepTimes::backward_s);
  optimizer.step();
  timer.lap(&StepTimes::optimizer_s);
  return loss.detach();
  // END SOLUTION
}

}  // namespace ch02
