// timing.cpp — a stopwatch that waits for the device before reading the clock (timing.hpp).
#include "workbook/timing.hpp"

#include "workbook/device.hpp"  // synchronize
#include "workbook/cuda_events.hpp"  // built_with_cuda_runtime

namespace workbook {

Stopwatch::Stopwatch(torch::Device device) : device_(device) {
  if (device_.is_cuda() && built_with_cuda_runtime()) events_ = std::make_unique<CudaEventTimer>(device_.has_index() ? device_.index() : 0);
}

void Stopwatch::start() {
  synchronize(device_);
  if (events_) events_->start();
  begin_ = std::chrono::steady_clock::now();
}

double Stopwatch::stop() {
  if (events_) return seconds_ = events_->stop();
  synchronize(device_);
  seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin_).count();
  return seconds_;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace workbook
