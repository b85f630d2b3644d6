// ring_data.hpp — exact data for the ring tests (workbook/exact_data.hpp):
// integer-valued floats whose sums are exact in any order, so results are
// compared for equality.
#pragma once
#include <vector>

#include <torch/torch.h>

#include "ring.hpp"
#include "workbook/exact_data.hpp"

namespace ring_data {

// Rank r's buffer: element i holds (i mod 251) + r + 1 (workbook/exact_data.hpp).
inline torch::Tensor rank_values(int64_t count, int rank, torch::ScalarType dtype = torch::kFloat32) {
  return workbook::exact_rank_values(count, rank, torch::TensorOptions().dtype(dtype));
}

// The sum of rank_values over `ranks` ranks: n (i mod 251) + n (n + 1) / 2.
inline torch::Tensor sum_over_ranks(int64_t count, int ranks, torch::ScalarType dtype = torch::kFloat32) {
  return workbook::exact_sum_over_ranks(count, ranks, torch::TensorOptions().dtype(dtype));
}

// Element counts that break rings written for the easy case, for `ranks`
// ranks: none, one, fewer than the ranks, one more than them, a large odd one.
inline std::vector<int64_t> hard_counts(int ranks) {
  return {0, 1, std::max(ranks - 1, 0), ranks + 1, 1000003};
}

// The segment rank r owns after the reduce-scatter.
inline ch04::Span owned_segment(int64_t count, int ranks, int rank) {
  return ch04::ring_segment(count, ranks, (rank + 1) % ranks);
}

}  // namespace ring_data
