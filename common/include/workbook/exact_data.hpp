// exact_data.hpp — data whose collective results are known exactly, for the
// checks that count wrong elements (tests, ch04_bench's #wrong, the smoke test).
//
// Note: [exact in any order] Rank r holds x[i] = (i mod 251) + r + 1. Every
// value and every partial sum of up to a thousand ranks is an integer below
// 2^24, so float32 adds them without rounding in any order: the all-reduced
// sum must equal n (i mod 251) + n (n + 1) / 2 exactly, and a single element
// off names a broken algorithm or transport, not a rounding difference.
#pragma once
#include <cstdint>

#include <torch/torch.h>

namespace workbook {

// Rank `rank`'s values, `count` elements of options' dtype and device.
torch::Tensor exact_rank_values(int64_t count, int rank, const torch::TensorOptions& options = {});

// The sum of exact_rank_values over `ranks` ranks.
torch::Tensor exact_sum_over_ranks(int64_t count, int ranks, const torch::TensorOptions& options = {});

// How `got` differs from `expected`, element by element.
struct ExactComparison {
  int64_t wrong = 0;         // elements that differ
  int64_t first_wrong = -1;  // the first of them, its value and what it should be
  double got = 0.0, expected = 0.0;
};
ExactComparison compare_exact(const torch::Tensor& got, const torch::Tensor& expected);

}  // namespace workbook
