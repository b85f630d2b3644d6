// accumulation_data.hpp — what the ex6.4 and ex6.5 tests share: a model whose
// samples do not interact, and global batches every rank can rebuild (the
// oracle is oracle::sgd_step on the whole global batch).
#pragma once
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "ddp.hpp"
#include "oracles.hpp"

namespace accumulation_data {

// TinyNet without BatchNorm or dropout: K micro-batches give exactly the
// gradient of the whole batch (up to float rounding).
inline std::shared_ptr<workbook::TinyNet> toy_model() {
  torch::manual_seed(71);  // the same on every rank
  return std::make_shared<workbook::TinyNet>(12, /*dropout=*/0.0, /*batch_norm=*/false);
}

// `count` global batches of `size` samples, the same on every rank.
inline std::vector<ch03::Batch> global_batches(int count, int64_t size, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<ch03::Batch> batches;
  for (int i = 0; i < count; ++i)
    batches.push_back({torch::rand({size, 1, 28, 28}), torch::randint(0, 10, {size}, torch::kInt64)});
  return batches;
}

// Rank `rank`'s share of a global batch: samples [rank · n, (rank + 1) · n).
inline ch03::Batch share(const ch03::Batch& global, int rank, int ranks) {
  const int64_t n = global.images.size(0) / ranks;
  return {global.images.narrow(0, rank * n, n), global.labels.narrow(0, rank * n, n)};
}

}  // namespace accumulation_data
