// scatter.cpp — ex2.1: one chunk of the batch per device.
#include "data_parallel.hpp"

#include "workbook/errors.hpp"

namespace ch02 {

std::vector<int64_t> chunk_sizes(int64_t samples, int64_t parts) {
  WB_NOT_IMPLEMENTED("ex2.1");  // TODO(ex2.1): your code here
}

std::vector<torch::Tensor> scatter(const torch::Tensor& batch, const std::vector<torch::Device>& devices) {
  WB_NOT_IMPLEMENTED("ex2.1");  // TODO(ex2.1): your code here
}

}  // namespace ch02
