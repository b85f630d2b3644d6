// scatter.cpp — ex2.1: one chunk of the batch per device.
#include "data_parallel.hpp"

#include <cmath>

#include "workbook/errors.hpp"

namespace ch02 {

std::vector<int64_t> chunk_sizes(int64_t samples, const std::vector<double>& speeds) {
  WB_NOT_IMPLEMENTED("ex2.1");  // TODO(ex2.1): your code here
}

std::vector<int64_t> chunk_sizes(int64_t samples, int64_t parts) {
  WB_CHECK(parts >= 1, "scatter: no devices to split the batch across");
  return chunk_sizes(samples, std::vector<double>(static_cast<size_t>(parts), 1.0));
}

std::vector<torch::Tensor> scatter(const torch::Tensor& batch, const std::vector<torch::Device>& devices) {
  WB_NOT_IMPLEMENTED("ex2.1");  // TODO(ex2.1): your code here
}

}  // namespace ch02
