// sampler.cpp — ex3.2: the DistributedSampler, as PyTorch defines it.
#include "ddp.hpp"

#include "workbook/errors.hpp"

namespace ch03 {

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank, bool shuffle, uint64_t seed,
                                       bool drop_last)
    : dataset_size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  WB_CHECK(dataset_size >= 0, "DistributedSampler: dataset size {} is negative", dataset_size);
  WB_CHECK(num_replicas >= 1, "DistributedSampler: {} replicas: need at least 1", num_replicas);
  WB_CHECK(rank >= 0 && rank < num_replicas, "DistributedSampler: rank {} is not in 0..{}", rank, num_replicas - 1);
}

int64_t DistributedSampler::num_samples() const {
  // BEGIN SOLUTION ex3.2
  const int64_t replicas = num_replicas_;
  if (drop_last_) return dataset_size_ / replicas;        // the tail that does not fill a round is dropped
  return (dataset_size_ + replicas - 1) / replicas;       // ceil: the order is padded up to a full round
  // END SOLUTION
}

torch::Tensor DistributedSampler::indices() const {
  // BEGIN SOLUTION ex3.2
  torch::Tensor order;
  if (shuffle_) {
    // Seeded by seed + epoch alone: every rank draws the same permutation.
    auto generator = at::make_generator<at::CPUGeneratorImpl>(seed_ + static_cast<uint64_t>(epoch_));
    order = torch::randperm(dataset_size_, generator, torch::kInt64);
  } else {
    order = torch::arange(dataset_size_, torch::kInt64);
  }
  const int64_t total = total_size();
  if (total > dataset_size_) {
    // Pad by repeating the order from its start (more than once when there
    // are more replicas than samples).
    const int64_t repeats = (total + dataset_size_ - 1) / std::max<int64_t>(dataset_size_, 1);
    order = order.repeat({repeats}).narrow(0, 0, total);
  } else {
    order = order.narrow(0, 0, total);
  }
  // Rank r takes every num_replicas-th position, starting at r.
  return order.slice(0, rank_, total, num_replicas_).contiguous();
  // END SOLUTION
}

}  // namespace ch03
