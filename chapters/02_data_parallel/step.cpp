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
  WB_NOT_IMPLEMENTED("ex2.5");  // TODO(ex2.5): your code here
}

torch::Tensor data_parallel_step(workbook::Classifier& model, torch::optim::Optimizer& optimizer,
                                 const torch::Tensor& images, const torch::Tensor& labels,
                                 const std::vector<torch::Device>& devices, int threads_per_replica,
                                 StepTimes* times) {
  WB_NOT_IMPLEMENTED("ex2.5");  // TODO(ex2.5): your code here
}

}  // namespace ch02
