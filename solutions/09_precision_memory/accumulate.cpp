// accumulate.cpp — ex9.1: one sum, three accumulators.
#include "precision.hpp"
#include "workbook/errors.hpp"

namespace ch09 {

Sums sum_in_order(const torch::Tensor& values, torch::ScalarType storage) {
  WB_ASSERT(values.dim() == 1 && values.scalar_type() == torch::kFloat32, "sum_in_order: a 1-D float32 tensor");
  Sums sums;
  // BEGIN SOLUTION ex9.1
  // The values as stored: rounded to `storage`, then read back exactly as doubles.
  const torch::Tensor stored = values.to(storage).to(torch::kFloat64).contiguous();
  const double* value = stored.data_ptr<double>();
  float float32_sum = 0.0f;
  for (int64_t i = 0; i < stored.numel(); ++i) {
    sums.exact += value[i];
    float32_sum += static_cast<float>(value[i]);
    sums.low_sum = round_to(sums.low_sum + value[i], storage);  // every partial sum back to 16 bits
  }
  sums.float32_sum = float32_sum;
  // END SOLUTION
  return sums;
}

}  // namespace ch09
