// scatter.cpp — ex2.1: one chunk of the batch per device.
#include "data_parallel.hpp"

#include <cmath>

#include "workbook/errors.hpp"

namespace ch02 {

std::vector<int64_t> chunk_sizes(int64_t samples, const std::vector<double>& speeds) {
  // BEGIN SOLUTION ex2.1
  const int64_t parts = static_cast<int64_t>(speeds.size());
  WB_CHECK(parts >= 1, "scatter: no devices to split the batch across");
  WB_CHECK(samples >= parts, "scatter: {} samples cannot be split across {} devices: every device needs at least one",
           samples, parts);
  for (size_t i = 0; i < speeds.size(); ++i)
    WB_CHECK(std::isfinite(speeds[i]) && speeds[i] > 0, "scatter: device {}'s speed is {}: it must be positive", i,
             speeds[i]);
  // Note: [the next sample where it finishes first] Every device gets one
  // sample; then each further sample goes to the device that would finish
  // it soonest, (size + 1) / speed, the earliest device on a tie. No split
  // is faster: let T be this one's longest time, on device k. When k took
  // its last sample no device could have finished one more before T, and
  // sizes only grow, so (s_i + 1) / v_i >= T for every i. A split with every
  // time under T would give each device at most s_i and k less: fewer
  // samples than there are. At equal speeds it deals them round: 10 over 4
  // is 3 3 2 2 (torch::chunk's 3 3 3 1 is as fast, but 10 over 6 it cuts
  // into five chunks, and one device sits idle).
  std::vector<int64_t> sizes(speeds.size(), 1);
  for (int64_t given = parts; given < samples; ++given) {
    size_t best = 0;
    for (size_t i = 1; i < sizes.size(); ++i)
      if ((sizes[i] + 1) / speeds[i] < (sizes[best] + 1) / speeds[best]) best = i;
    ++sizes[best];
  }
  return sizes;
  // END SOLUTION
}

std::vector<int64_t> chunk_sizes(int64_t samples, int64_t parts) {
  WB_CHECK(parts >= 1, "scatter: no devices to split the batch across");
  return chunk_sizes(samples, std::vector<double>(static_cast<size_t>(parts), 1.0));
}

std::vector<torch::Tensor> scatter(const torch::Tensor& batch, const std::vector<torch::Device>& devices) {
  // BEGIN SOLUTION ex2.1
  WB_CHECK(batch.defined() && batch.dim() >= 1 && batch.size(0) > 0, "scatter: the batch is empty");
  const std::vector<int64_t> sizes = chunk_sizes(batch.size(0), static_cast<int64_t>(devices.size()));
  std::vector<torch::Tensor> chunks;
  chunks.reserve(devices.size());
  int64_t start = 0;
  for (size_t i = 0; i < devices.size(); ++i) {
    // narrow() is a view (no copy); to() copies only when the device differs.
    // On CUDA, non_blocking lets the copies to several GPUs proceed together.
    chunks.push_back(batch.narrow(0, start, sizes[i]).to(devices[i], /*non_blocking=*/true));
    start += sizes[i];
  }
  return chunks;
  // END SOLUTION
}

}  // namespace ch02
