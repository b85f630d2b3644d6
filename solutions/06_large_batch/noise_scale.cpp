// noise_scale.cpp — ex6.1: the gradient noise scale from each rank's gradient and the averaged one.
#include "noise_scale.hpp"

#include "workbook/errors.hpp"

namespace ch06 {
namespace {

// Given: the rule both the estimate and NoiseScale's constructor hold the sizes to.
void check_batch_sizes(int64_t small_batch, int64_t big_batch) {
  WB_CHECK(0 < small_batch && small_batch < big_batch,
           "the noise scale needs two batch sizes, each rank's and a larger global one; got {} and {} (one rank "
           "has nothing to compare with: run 2 or more)",
           small_batch, big_batch);
}

}  // namespace

NoiseScaleEstimate noise_scale_estimate(double small_squared, double big_squared, int64_t small_batch,
                                        int64_t big_batch) {
  // BEGIN SOLUTION ex6.1
  check_batch_sizes(small_batch, big_batch);
  // Note: [two sizes, two unknowns] A mean over B independent samples is G
  // plus noise whose covariance is Σ/B, so E|G_B|² = |G|² + tr(Σ)/B (the cross
  // term has mean zero). Two batch sizes give two linear equations in |G|²
  // and tr Σ; each solution is linear in the two squared norms, so unbiased
  // inputs give unbiased estimates (McCandlish et al., Appendix A.1).
  const double b_small = static_cast<double>(small_batch), b_big = static_cast<double>(big_batch);
  NoiseScaleEstimate e;
  e.gradient_squared = (b_big * big_squared - b_small * small_squared) / (b_big - b_small);
  e.trace_sigma = (small_squared - big_squared) / (1.0 / b_small - 1.0 / b_big);
  e.b_simple = e.trace_sigma / e.gradient_squared;
  return e;
  // END SOLUTION
}

NoiseScale::NoiseScale(int64_t small_batch, int64_t big_batch) : small_batch_(small_batch), big_batch_(big_batch) {
  check_batch_sizes(small_batch, big_batch);
}

void NoiseScale::add(const torch::Tensor& small_squared, const torch::Tensor& big_squared) {
  // BEGIN SOLUTION ex6.1
  // Sums on the device: one stacked pair, added in place.
  const torch::Tensor pair = torch::stack({small_squared, big_squared}).to(torch::kFloat64);
  if (kept_.empty()) {
    kept_.push_back(pair.clone());
  } else {
    kept_[0].add_(pair);
  }
  ++steps_;
  // END SOLUTION
}

NoiseScaleEstimate NoiseScale::estimate(workbook::Communicator& comm) {
  // BEGIN SOLUTION ex6.1
  // Note: [average, then divide] One step's estimate of |G|² is a difference
  // of two noisy norms and often comes out near zero or below it, so a ratio
  // per step is wild, and the mean of such ratios converges to the wrong
  // value. The squared norms are averaged over the steps and the ranks first,
  // and the two estimates, each unbiased, are divided once, as the paper does.
  WB_CHECK(steps_ > 0, "NoiseScale::estimate: no steps were added");
  torch::Tensor sums = kept_[0].clone();
  comm.all_reduce(sums, workbook::ReduceOp::Average);
  const double steps = static_cast<double>(steps_);
  NoiseScaleEstimate e = noise_scale_estimate(sums[0].item<double>() / steps, sums[1].item<double>() / steps,
                                              small_batch_, big_batch_);
  e.steps = steps_;
  kept_.clear();
  steps_ = 0;
  return e;
  // END SOLUTION
}

torch::Tensor squared_gradient_norm(workbook::Classifier& model) {
  torch::Tensor sum;
  for (const torch::Tensor& p : model.parameters()) {
    if (!p.grad().defined()) continue;
    const torch::Tensor part = p.grad().to(torch::kFloat64).square().sum();
    sum = sum.defined() ? sum + part : part;
  }
  WB_CHECK(sum.defined(), "squared_gradient_norm: no parameter has a gradient");
  return sum;
}

}  // namespace ch06
