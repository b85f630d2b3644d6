// oracles.hpp — independent computations the tests compare an exercise with:
// plain LibTorch on the whole batch, written without any exercise's code.
#pragma once
#include <torch/torch.h>

#include "workbook/models.hpp"

namespace oracle {

// A fresh model of the same architecture holding a copy of `model`'s state.
inline std::shared_ptr<workbook::Classifier> copy_of(workbook::Classifier& model) {
  auto copy = model.fresh();
  workbook::copy_state(model, *copy);
  copy->train(model.is_training());
  return copy;
}

// One plain SGD step (no momentum) on the mean cross-entropy of (images, labels),
// computed with torch::autograd::grad, so no .grad field is involved.
// Returns the loss before the step.
inline double sgd_step(workbook::Classifier& model, const torch::Tensor& images, const torch::Tensor& labels,
                       double lr) {
  std::vector<torch::Tensor> params = model.parameters();
  torch::Tensor loss = torch::nn::functional::cross_entropy(model.forward(images), labels);
  std::vector<torch::Tensor> grads = torch::autograd::grad({loss}, params);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) params[i].sub_(grads[i] * lr);
  return loss.item<double>();
}

// The largest absolute difference between two models' parameters.
inline double max_parameter_difference(workbook::Classifier& a, workbook::Classifier& b) {
  auto pa = a.parameters(), pb = b.parameters();
  double worst = 0.0;
  for (size_t i = 0; i < pa.size(); ++i) worst = std::max(worst, (pa[i] - pb[i]).abs().max().item<double>());
  return worst;
}

// Images whose every pixel equals the sample's index (so a batch says which
// samples it holds), and labels index % 10.
inline std::pair<torch::Tensor, torch::Tensor> indexed_samples(int64_t n) {
  torch::Tensor index = torch::arange(n, torch::kFloat32);
  torch::Tensor images = index.view({n, 1, 1, 1}).expand({n, 1, 28, 28}).contiguous();
  torch::Tensor labels = torch::arange(n, torch::kInt64).remainder(10);
  return {images, labels};
}

// `count` batches of `size` random images and labels, from `seed`.
inline std::vector<std::pair<torch::Tensor, torch::Tensor>> random_batches(int count, int64_t size, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> batches;
  for (int i = 0; i < count; ++i)
    batches.emplace_back(torch::rand({size, 1, 28, 28}), torch::randint(0, 10, {size}, torch::kInt64));
  return batches;
}

// Plain training steps, one per batch in [from, to): zero, mean
// cross-entropy, backward, optimizer step.
inline void train_steps(workbook::Classifier& model, torch::optim::Optimizer& optimizer,
                        const std::vector<std::pair<torch::Tensor, torch::Tensor>>& batches, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) {
    optimizer.zero_grad();
    torch::nn::functional::cross_entropy(model.forward(batches[i].first), batches[i].second).backward();
    optimizer.step();
  }
}

}  // namespace oracle
