// exact_data.cpp — integer-valued data whose sums are exact (exact_data.hpp).
#include "workbook/exact_data.hpp"

namespace workbook {

namespace {
torch::Tensor pattern(int64_t count, const torch::TensorOptions& options) {
  return torch::arange(count, options.dtype(torch::kInt64)).remainder(251);
}
torch::ScalarType dtype_of(const torch::TensorOptions& options) {
  return options.has_dtype() ? torch::typeMetaToScalarType(options.dtype()) : torch::kFloat32;
}
}  // namespace

torch::Tensor exact_rank_values(int64_t count, int rank, const torch::TensorOptions& options) {
  return (pattern(count, options) + rank + 1).to(dtype_of(options));
}

torch::Tensor exact_sum_over_ranks(int64_t count, int ranks, const torch::TensorOptions& options) {
  return (pattern(count, options) * ranks + ranks * (ranks + 1) / 2).to(dtype_of(options));
}

ExactComparison compare_exact(const torch::Tensor& got, const torch::Tensor& expected) {
  const torch::Tensor differs = got.ne(expected);
  ExactComparison comparison;
  comparison.wrong = differs.sum().item<int64_t>();
  if (comparison.wrong > 0) {
    comparison.first_wrong = differs.nonzero()[0][0].item<int64_t>();
    comparison.got = got[comparison.first_wrong].item<double>();
    comparison.expected = expected[comparison.first_wrong].item<double>();
  }
  return comparison;
}

}  // namespace workbook
