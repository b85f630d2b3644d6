// batches.cpp — ex1.1: the order of an epoch and the batches cut from it.
#include "single_device.hpp"

#include "workbook/errors.hpp"

namespace ch01 {

int64_t batches_per_epoch(int64_t num_samples, int64_t batch_size) {
  WB_CHECK(batch_size > 0, "batch size must be positive, got {}", batch_size);
  return (num_samples + batch_size - 1) / batch_size;
}

torch::Tensor epoch_order(int64_t num_samples, uint64_t seed, int64_t epoch, bool shuffle) {
  // BEGIN SOLUTION ex1.1
  if (!shuffle) return torch::arange(num_samples, torch::kInt64);
  // Note: a generator of our own, seeded from (seed, epoch), makes the order
  // reproducible and independent of any other use of the global RNG. Chapter 3
  // relies on this: every rank must draw the same permutation.
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed + static_cast<uint64_t>(epoch));
  return torch::randperm(num_samples, generator, torch::kInt64);
  // END SOLUTION
}

Batch make_batch(const torch::Tensor& images, const torch::Tensor& labels, const torch::Tensor& order,
                 int64_t index, int64_t batch_size, const torch::Device& device) {
  // BEGIN SOLUTION ex1.1
  const int64_t count = batches_per_epoch(order.size(0), batch_size);
  WB_CHECK(index >= 0 && index < count, "batch {} requested, but an epoch has batches 0..{}", index, count - 1);
  const int64_t begin = index * batch_size;
  const int64_t end = std::min(begin + batch_size, order.size(0));
  // Gather on the device the data lives on; the order is moved there too.
  torch::Tensor rows = order.slice(0, begin, end).to(images.device());
  torch::Tensor batch_images = images.index_select(0, rows);
  torch::Tensor batch_labels = labels.index_select(0, rows.to(labels.device()));
  // From pinned host memory a non-blocking copy overlaps with the GPU's work;
  // on the CPU, or when the data is already on the device, it is a no-op.
  const bool pin = device.is_cuda() && images.device().is_cpu();
  if (pin) {
    batch_images = batch_images.pin_memory();
    batch_labels = batch_labels.pin_memory();
  }
  return {batch_images.to(device, /*non_blocking=*/true), batch_labels.to(device, /*non_blocking=*/true)};
  // END SOLUTION
}

}  // namespace ch01
