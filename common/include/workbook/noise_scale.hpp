// noise_scale.hpp — the gradient noise scale (McCandlish, Kaplan, Amodei et
// al. 2018, "An Empirical Model of Large-Batch Training", §2.2 and Appendix
// A.1), from two gradient norms that data-parallel training has anyway.
//
// A gradient that is a mean over B samples has E|G_B|² = |G|² + tr(Σ)/B
// (G the true gradient, Σ the per-sample covariance). Each rank's own
// gradient is a mean over B_small samples (its part of the batch); the
// all-reduced one a mean over B_big (the global batch). Two sizes, two
// unknowns:
//   |G|²  ≈ (B_big·|G_big|² − B_small·|G_small|²) / (B_big − B_small)
//   tr Σ  ≈ (|G_small|² − |G_big|²) / (1/B_small − 1/B_big)
//   B_simple = tr Σ / |G|²
// B_simple is the batch at which a step's noise is as large as its signal:
// well below it, doubling the batch nearly halves the steps a result needs;
// well above it, a larger batch buys little but cost. Both estimates are
// noisy step by step, so they are averaged over many steps before their
// ratio is taken, as the paper does. Chapter 6 uses it (ch06_train --noise-scale).
#pragma once
#include <cstdint>

#include <torch/torch.h>

#include "workbook/communicator.hpp"
#include "workbook/errors.hpp"
#include "workbook/models.hpp"

namespace workbook {

struct NoiseScaleEstimate {
  double gradient_squared = 0.0;  // |G|²
  double trace_sigma = 0.0;       // tr Σ
  double b_simple = 0.0;          // tr Σ / |G|², in samples
  int64_t steps = 0;              // how many steps the averages cover
  // Late in training |G|² is small against tr Σ / B and its estimate, a
  // difference of two noisy averages, can come out at or below zero: then
  // the steps could not resolve the signal, and b_simple means nothing.
  bool resolved() const { return gradient_squared > 0 && trace_sigma > 0; }
};

// The two estimates and their ratio, from the mean squared norms of gradients
// averaged over `small_batch` and over `big_batch` samples.
inline NoiseScaleEstimate noise_scale_estimate(double small_squared, double big_squared, int64_t small_batch,
                                               int64_t big_batch) {
  WB_CHECK(0 < small_batch && small_batch < big_batch,
           "the noise scale needs two batch sizes, each rank's and a larger global one; got {} and {} (one rank "
           "has nothing to compare with: run 2 or more)",
           small_batch, big_batch);
  const double b_small = static_cast<double>(small_batch), b_big = static_cast<double>(big_batch);
  NoiseScaleEstimate e;
  e.gradient_squared = (b_big * big_squared - b_small * small_squared) / (b_big - b_small);
  e.trace_sigma = (small_squared - big_squared) / (1.0 / b_small - 1.0 / b_big);
  e.b_simple = e.trace_sigma / e.gradient_squared;
  return e;
}

// Σ over parameters of |grad|², as a 0-dim float64 tensor on the model's
// device (no host read: Chapter 1's rule).
inline torch::Tensor squared_gradient_norm(Classifier& model) {
  torch::Tensor sum;
  for (const torch::Tensor& p : model.parameters()) {
    if (!p.grad().defined()) continue;
    const torch::Tensor part = p.grad().to(torch::kFloat64).square().sum();
    sum = sum.defined() ? sum + part : part;
  }
  WB_CHECK(sum.defined(), "squared_gradient_norm: no parameter has a gradient");
  return sum;
}

// Sums each step's two squared norms on the device; estimate() averages
// them over the steps and over ranks (one all-reduce) and starts again.
class NoiseScale {
 public:
  NoiseScale(int64_t small_batch, int64_t big_batch) : small_batch_(small_batch), big_batch_(big_batch) {
    noise_scale_estimate(1.0, 1.0, small_batch, big_batch);  // checks the sizes now, not an epoch later
  }
  // One step's squared norms: this rank's own gradient, and the averaged one.
  void add(const torch::Tensor& small_squared, const torch::Tensor& big_squared) {
    small_sum_ = small_sum_.defined() ? small_sum_ + small_squared : small_squared.clone();
    big_sum_ = big_sum_.defined() ? big_sum_ + big_squared : big_squared.clone();
    ++steps_;
  }
  NoiseScaleEstimate estimate(Communicator& comm) {
    WB_CHECK(steps_ > 0, "NoiseScale::estimate: no steps were added");
    torch::Tensor sums = torch::stack({small_sum_, big_sum_});
    comm.all_reduce(sums, ReduceOp::Average);
    const double steps = static_cast<double>(steps_);
    NoiseScaleEstimate e = noise_scale_estimate(sums[0].item<double>() / steps, sums[1].item<double>() / steps,
                                                small_batch_, big_batch_);
    e.steps = steps_;
    small_sum_ = big_sum_ = torch::Tensor();
    steps_ = 0;
    return e;
  }

 private:
  int64_t small_batch_, big_batch_;
  torch::Tensor small_sum_, big_sum_;
  int64_t steps_ = 0;
};

}  // namespace workbook
