// accumulate.cpp — ex9.1: one sum, three accumulators.
#include "precision.hpp"
#include "workbook/errors.hpp"

namespace ch09 {

Sums sum_in_order(const torch::Tensor& values, torch::ScalarType storage) {
  WB_ASSERT(values.dim() == 1 && values.scalar_type() == torch::kFloat32, "sum_in_order: a 1-D float32 tensor");
  Sums sums;
  WB_NOT_IMPLEMENTED("ex9.1");  // TODO(ex9.1): your code here
  return sums;
}

}  // namespace ch09
