// master_weights.cpp — ex9.3: float32 masters behind a 16-bit model.
#include "precision.hpp"
#include "workbook/errors.hpp"

namespace ch09 {

MasterWeights::MasterWeights(torch::nn::Module& model, torch::ScalarType compute) : compute_(compute) {
  for (const torch::Tensor& p : model.parameters())
    WB_ASSERT(p.scalar_type() == torch::kFloat32, "MasterWeights: the model must be float32 on entry, a parameter is {}",
              c10::toString(p.scalar_type()));
  // BEGIN SOLUTION ex9.3
  {
    torch::NoGradGuard no_grad;
    for (const torch::Tensor& p : model.parameters()) masters_.push_back(p.detach().clone().requires_grad_(true));
  }
  model.to(compute);  // in place: parameters() now returns 16-bit tensors
  parameters_ = model.parameters();
  // END SOLUTION
}

void MasterWeights::gradients_to_masters() {
  // BEGIN SOLUTION ex9.3
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const torch::Tensor& grad = parameters_[i].grad();
    if (!grad.defined()) {  // no gradient this step: none for the optimizer either
      masters_[i].mutable_grad() = torch::Tensor();
      continue;
    }
    if (masters_[i].grad().defined())
      masters_[i].mutable_grad().copy_(grad);  // widened to float32 by the copy
    else
      masters_[i].mutable_grad() = grad.to(torch::kFloat32);
  }
  // END SOLUTION
}

void MasterWeights::masters_to_model() {
  // BEGIN SOLUTION ex9.3
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) parameters_[i].copy_(masters_[i]);  // rounded to `compute`
  // END SOLUTION
}

}  // namespace ch09
