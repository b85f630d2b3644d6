// ring_cases.hpp — what the ring attention tests share: the whole sequence's
// q, k, v made alike on every rank, the layouts they are split by, and the
// whole causal attention they are held to (float64).
#pragma once
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <torch/torch.h>


namespace ring_cases {

constexpr int64_t kBatch = 2, kHeads = 2, kHeadSize = 8;

struct Layout {
  std::string name;
  torch::Tensor positions;  // [cp, T/cp]: row r, the positions rank r holds, in its order
};

// Three ways to hold a sequence, none of them ex12.2's: contiguous blocks;
// strided (rank r every cp-th position from r); and shuffled, each rank
// some positions from anywhere, in no order. A mask from anything but the
// global positions fails on the last two.
inline std::vector<Layout> layouts(int64_t T, int ranks) {
  const int64_t held = T / ranks;
  std::vector<Layout> out;
  out.push_back({"contiguous", torch::arange(T, torch::kInt64).view({ranks, held})});
  out.push_back({"strided", torch::arange(T, torch::kInt64).view({held, ranks}).t().contiguous()});
  torch::manual_seed(1000 + T);
  out.push_back({"shuffled", torch::randperm(T, torch::kInt64).view({ranks, held})});
  return out;
}

struct Whole {
  torch::Tensor q, k, v, upstream;  // [kBatch, kHeads, T, kHeadSize] float64, the same on every rank
};

inline Whole whole_sequence(int64_t T, uint64_t seed) {
  torch::manual_seed(seed);
  const auto shape = std::vector<int64_t>{kBatch, kHeads, T, kHeadSize};
  return {torch::randn(shape, torch::kFloat64), torch::randn(shape, torch::kFloat64),
          torch::randn(shape, torch::kFloat64), torch::randn(shape, torch::kFloat64)};
}

// Causal attention over the whole sequence, in float64 throughout: the
// oracle (workbook::masked_causal_attention takes its softmax in float32).
inline torch::Tensor whole_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t T = q.size(2);
  const torch::Tensor scores = torch::matmul(q, k.transpose(2, 3)) / std::sqrt(static_cast<double>(q.size(3)));
  const torch::Tensor future = torch::ones({T, T}, torch::kBool).triu(1);
  return torch::matmul(torch::softmax(scores.masked_fill(future, -std::numeric_limits<double>::infinity()), -1), v);
}

// This rank's positions of a [N, heads, T, d] tensor.
inline torch::Tensor mine(const torch::Tensor& whole, const torch::Tensor& held) {
  return whole.index_select(2, held).contiguous();
}

}  // namespace ring_cases
