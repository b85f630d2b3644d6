// precision.cpp — given: rounding to a dtype, dtypes by name, and whether a
// device computes in one.
#include "precision.hpp"

#include "workbook/errors.hpp"

namespace ch09 {

double round_to(double value, torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat16: return static_cast<double>(static_cast<float>(c10::Half(static_cast<float>(value))));
    case torch::kBFloat16: return static_cast<double>(static_cast<float>(c10::BFloat16(static_cast<float>(value))));
    case torch::kFloat32: return static_cast<double>(static_cast<float>(value));
    case torch::kFloat64: return value;
    default: WB_ASSERT(false, "round_to: {} is not a floating-point dtype", c10::toString(dtype));
  }
  return value;
}

torch::ScalarType dtype_named(const std::string& name) {
  if (name == "fp32") return torch::kFloat32;
  if (name == "bf16") return torch::kBFloat16;
  if (name == "fp16") return torch::kFloat16;
  WB_CHECK(false, "'{}' is not a dtype: fp32, bf16 or fp16", name);
  return torch::kFloat32;
}

void check_device_computes(const torch::Device& device, torch::ScalarType dtype) {
  try {
    const auto options = torch::TensorOptions().device(device).dtype(dtype);
    torch::Tensor product = torch::matmul(torch::ones({4, 4}, options), torch::ones({4, 4}, options));
    torch::Tensor convolved = torch::conv2d(torch::ones({1, 1, 4, 4}, options), torch::ones({1, 1, 3, 3}, options));
    (void)product.sum().item<double>();
    (void)convolved.sum().item<double>();
  } catch (const c10::Error& error) {
    WB_CHECK(false, "{} cannot compute in {} with this LibTorch: {}", device.str(), c10::toString(dtype),
             error.what_without_backtrace());
  }
}

}  // namespace ch09
