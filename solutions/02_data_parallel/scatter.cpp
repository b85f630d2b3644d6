// scatter.cpp — ex2.1: one chunk of the batch per device.
#include "data_parallel.hpp"

#include "workbook/errors.hpp"

namespace ch02 {

std::vector<int64_t> chunk_sizes(int64_t samples, int64_t parts) {
  // BEGIN SOLUTION ex2.1
  WB_CHECK(parts >= 1, "scatter: no devices to split the batch across");
  WB_CHECK(samples >= parts, "scatter: {} samples cannot be split across {} devices: every device needs at least one",
           samples, parts);
  // Note: torch::chunk would give ceil(B/N) per chunk and so sometimes fewer
  // chunks than devices (10 samples, 4 devices: 3 3 3 1; 10 and 6: five
  // chunks of 2). Sizes that differ by at most one keep every device busy.
  std::vector<int64_t> sizes(static_cast<size_t>(parts), samples / parts);
  for (int64_t i = 0; i < samples % parts; ++i) ++sizes[static_cast<size_t>(i)];
  return sizes;
  // END SOLUTION
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
