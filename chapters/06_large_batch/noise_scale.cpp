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
  WB_NOT_IMPLEMENTED("ex6.1");  // TODO(ex6.1): your code here
}

NoiseScale::NoiseScale(int64_t small_batch, int64_t big_batch) : small_batch_(small_batch), big_batch_(big_batch) {
  check_batch_sizes(small_batch, big_batch);
}

void NoiseScale::add(const torch::Tensor& small_squared, const torch::Tensor& big_squared) {
  WB_NOT_IMPLEMENTED("ex6.1");  // TODO(ex6.1): your code here
}

NoiseScaleEstimate NoiseScale::estimate(workbook::Communicator& comm) {
  WB_NOT_IMPLEMENTED("ex6.1");  // TODO(ex6.1): your code here
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
