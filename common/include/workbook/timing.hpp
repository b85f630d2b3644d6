// timing.hpp — honest timing: synchronize the device before every clock read.
#pragma once
#include <chrono>

#include <torch/torch.h>

namespace workbook {

// Wall-clock stopwatch that waits for `device` at start() and stop(), so the
// interval covers the work itself, not just the launching of it.
class Stopwatch {
 public:
  explicit Stopwatch(torch::Device device = torch::kCPU) : device_(device) {}
  void start();
  double stop();  // seconds since start(); also kept in seconds()
  double seconds() const { return seconds_; }

 private:
  torch::Device device_;
  std::chrono::steady_clock::time_point begin_;
  double seconds_ = 0.0;
};

// Seconds on the steady clock, for coarse timings that need no device sync.
double now_seconds();

}  // namespace workbook
