// gpu_tests.hpp — for [gpu] test cases: run on a machine with CUDA, skipped
// (with a warning, not a pass in disguise) elsewhere.
#pragma once
#include "catch2_compat.hpp"
#include <torch/torch.h>

namespace gpu_tests {

// True when a CUDA device is there; otherwise warns "skipped" and returns false.
inline bool have_gpu() {
  if (torch::cuda::is_available()) return true;
  WARN("no CUDA device: skipped");
  return false;
}

}  // namespace gpu_tests
