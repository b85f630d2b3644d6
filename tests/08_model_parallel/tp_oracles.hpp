// tp_oracles.hpp — Chapter 8's single-process oracles, written without any
// exercise's code: whole Linear layers on exact data, and FashionCNN's forward
// with a given dropout mask.
#pragma once
#include <cstdint>
#include <functional>
#include <numeric>

#include <torch/torch.h>

#include "tensor_parallel.hpp"
#include "workbook/models.hpp"

namespace tp_oracle {

// Integer-valued floats small enough that every product and sum in a Linear
// is exact in any order: the split layers must then match bit for bit.
inline torch::Tensor exact(std::vector<int64_t> shape, int64_t salt) {
  const int64_t count = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  return ((torch::arange(count, torch::kFloat32) * 7 + salt * 3) % 9 - 4).view(shape);
}

// A Linear(in → out) whose weight and bias are exact, every rank alike.
inline torch::nn::Linear exact_linear(int64_t in, int64_t out) {
  torch::nn::Linear linear(in, out);
  torch::NoGradGuard no_grad;
  linear->weight.copy_(exact({out, in}, 1));
  linear->bias.copy_(exact({out}, 2) * 10);  // large, so that a bias added n times shows
  return linear;
}

// The same columns (dim 1) a rank holds: its part of the whole [rows, total].
inline torch::Tensor columns_of(const torch::Tensor& whole, int rank, int ranks) {
  const ch08::Shard shard = ch08::shard_of(whole.size(1), rank, ranks);
  return whole.narrow(1, shard.begin, shard.size);
}
inline torch::Tensor rows_of(const torch::Tensor& whole, int rank, int ranks) {
  const ch08::Shard shard = ch08::shard_of(whole.size(0), rank, ranks);
  return whole.narrow(0, shard.begin, shard.size);
}

// FashionCNN's forward, in train or eval mode as the model is, with `mask`
// (or none) after fc1 in place of its own dropout.
inline torch::Tensor fashion_cnn_forward(workbook::FashionCNN& model, const torch::Tensor& images,
                                         const torch::Tensor& mask) {
  torch::Tensor x = torch::max_pool2d(torch::relu(model.normalize("bn1", model.conv1(images))), 2);
  x = torch::max_pool2d(torch::relu(model.normalize("bn2", model.conv2(x))), 2).flatten(1);
  x = model.fc1(x);
  if (mask.defined()) x = x * mask.to(x.device(), x.scalar_type());
  return model.fc3(model.fc2(x));
}

// The largest absolute difference, as a double (0 for equal tensors).
inline double max_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

}  // namespace tp_oracle
