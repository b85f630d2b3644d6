// timing.hpp — honest timing: synchronize the device before every clock read.
#pragma once
#include <chrono>
#include <memory>

#include <torch/torch.h>

#include "workbook/cuda_events.hpp"

namespace workbook {

// Stopwatch that waits for `device` at start() and stop(), so the interval
// covers the work itself, not just the launching of it. On the CPU it reads the
// steady clock; on a CUDA device, in a build with the CUDA runtime, it times
// with CUDA events (the GPU's clock), else with the synchronized steady clock.
class Stopwatch {
 public:
  explicit Stopwatch(torch::Device device = torch::kCPU);
  void start();
  double stop();  // seconds since start(); also kept in seconds()
  double seconds() const { return seconds_; }

 private:
  torch::Device device_;
  std::chrono::steady_clock::time_point begin_;
  double seconds_ = 0.0;
  std::unique_ptr<CudaEventTimer> events_;
};

// Seconds on the steady clock, for coarse timings that need no device sync.
double now_seconds();

}  // namespace workbook
