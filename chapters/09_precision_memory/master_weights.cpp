// master_weights.cpp — ex9.3: float32 masters behind a 16-bit model.
#include "precision.hpp"
#include "workbook/errors.hpp"

namespace ch09 {

MasterWeights::MasterWeights(torch::nn::Module& model, torch::ScalarType compute) : compute_(compute) {
  for (const torch::Tensor& p : model.parameters())
    WB_ASSERT(p.scalar_type() == torch::kFloat32, "MasterWeights: the model must be float32 on entry, a parameter is {}",
              c10::toString(p.scalar_type()));
  WB_NOT_IMPLEMENTED("ex9.3");  // TODO(ex9.3): your code here
}

void MasterWeights::gradients_to_masters() {
  WB_NOT_IMPLEMENTED("ex9.3");  // TODO(ex9.3): your code here
}

void MasterWeights::masters_to_model() {
  WB_NOT_IMPLEMENTED("ex9.3");  // TODO(ex9.3): your code here
}

}  // namespace ch09
