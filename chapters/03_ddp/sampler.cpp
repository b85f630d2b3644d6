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
  WB_NOT_IMPLEMENTED("ex3.2");  // TODO(ex3.2): your code here
}

torch::Tensor DistributedSampler::indices() const {
  WB_NOT_IMPLEMENTED("ex3.2");  // TODO(ex3.2): your code here
}

}  // namespace ch03
