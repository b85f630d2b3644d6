// batches.cpp — ex1.1: the order of an epoch and the batches cut from it.
#include "single_device.hpp"

#include "workbook/errors.hpp"

namespace ch01 {

int64_t batches_per_epoch(int64_t num_samples, int64_t batch_size) {
  WB_CHECK(batch_size > 0, "batch size must be positive, got {}", batch_size);
  return (num_samples + batch_size - 1) / batch_size;
}

torch::Tensor epoch_order(int64_t num_samples, uint64_t seed, int64_t epoch, bool shuffle) {
  WB_NOT_IMPLEMENTED("ex1.1");  // TODO(ex1.1): your code here
}

Batch make_batch(const torch::Tensor& images, const torch::Tensor& labels, const torch::Tensor& order,
                 int64_t index, int64_t batch_size, const torch::Device& device) {
  WB_NOT_IMPLEMENTED("ex1.1");  // TODO(ex1.1): your code here
}

}  // namespace ch01
