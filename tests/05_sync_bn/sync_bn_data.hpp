// sync_bn_data.hpp — the global batches Chapter 5's tests split among ranks,
// and BatchNorm2d on the whole batch as the oracle.
#pragma once
#include <numeric>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace sync_bn_data {

// How many samples each of n ranks holds: the same everywhere, or uneven with
// one rank holding a single sample and (from 3 ranks) one holding none.
struct Split {
  std::string name;
  std::vector<int64_t> counts;  // one per rank
  int64_t total() const { return std::accumulate(counts.begin(), counts.end(), int64_t{0}); }
  int64_t offset(int rank) const {
    return std::accumulate(counts.begin(), counts.begin() + rank, int64_t{0});
  }
};

inline std::vector<Split> splits(int n) {
  std::vector<Split> result;
  result.push_back({"equal", std::vector<int64_t>(static_cast<size_t>(n), 3)});
  const std::vector<int64_t> uneven = {5, 1, 0, 2};
  Split split{"uneven", {}};
  for (int r = 0; r < n; ++r) split.counts.push_back(uneven[static_cast<size_t>(r % 4)]);
  result.push_back(split);
  if (n == 2) result.push_back({"one rank empty", {4, 0}});
  return result;
}

// A global batch [total, C, 3, 2] whose samples differ in mean and spread by
// their index, so each rank's own statistics are far from the global ones.
// Every rank builds the same tensor from `seed`.
inline torch::Tensor global_batch(int64_t total, int64_t channels, uint64_t seed, double mean_offset = 0.0) {
  torch::manual_seed(seed);
  const torch::Tensor index = torch::arange(total, torch::kFloat32).view({-1, 1, 1, 1});
  const torch::Tensor channel = torch::arange(channels, torch::kFloat32).view({1, -1, 1, 1});
  return torch::randn({total, channels, 3, 2}) * (1.0 + index.remainder(3)) + 0.5 * index + 2.0 * channel +
         mean_offset;
}

// max |a − b| / max |b|: 0 for empty tensors (a rank holding no samples).
inline double relative_error(const torch::Tensor& actual, const torch::Tensor& expected) {
  if (expected.numel() == 0) return actual.numel() == 0 ? 0.0 : 1.0;
  const double scale = std::max(expected.abs().max().item<double>(), 1e-30);
  return (actual.to(expected.scalar_type()) - expected).abs().max().item<double>() / scale;
}

// BatchNorm2d in training mode on the whole batch, and the gradients of
// sum(output · upstream) with respect to the input, weight and bias.
struct Oracle {
  torch::Tensor output, grad_input, grad_weight, grad_bias;
};
inline Oracle batch_norm_oracle(const torch::Tensor& global, const torch::Tensor& weight, const torch::Tensor& bias,
                                const torch::Tensor& upstream) {
  torch::Tensor x = global.clone().requires_grad_(true);
  torch::Tensor w = weight.clone().requires_grad_(true), b = bias.clone().requires_grad_(true);
  torch::nn::BatchNorm2d bn(global.size(1));
  const torch::Tensor output = torch::nn::functional::batch_norm(
      x, bn->running_mean, bn->running_var,
      torch::nn::functional::BatchNormFuncOptions().weight(w).bias(b).training(true).eps(1e-5));
  auto grads = torch::autograd::grad({(output * upstream).sum()}, {x, w, b});
  return {output.detach(), grads[0], grads[1], grads[2]};
}

}  // namespace sync_bn_data
