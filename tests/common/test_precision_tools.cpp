// What Chapter 9 measures with: autocast in a scope (workbook/autocast.hpp),
// and the bytes of live tensors (workbook/tensor_bytes.hpp).
#include "catch2_compat.hpp"

#include "workbook/autocast.hpp"
#include "workbook/tensor_bytes.hpp"

TEST_CASE("AutocastGuard: products in bfloat16, losses in float32, all undone at the end", "[precision]") {
  const torch::Tensor x = torch::rand({4, 8});
  const torch::Tensor weight = torch::rand({3, 8});
  REQUIRE_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
  {
    workbook::AutocastGuard guard(c10::DeviceType::CPU, torch::kBFloat16);
    const torch::Tensor y = torch::nn::functional::linear(x, weight);
    INFO("linear and matmul are on autocast's lower-precision list");
    REQUIRE(y.scalar_type() == torch::kBFloat16);
    REQUIRE(torch::matmul(x, weight.t()).scalar_type() == torch::kBFloat16);
    INFO("the losses run in float32 whatever their input (cross_entropy's nll_loss, mse_loss)");
    REQUIRE(torch::nn::functional::cross_entropy(y, torch::tensor({0, 1, 2, 0})).scalar_type() == torch::kFloat32);
    REQUIRE(torch::mse_loss(y, torch::zeros_like(y)).scalar_type() == torch::kFloat32);
    INFO("CPU autocast's lists are not CUDA's: log_softmax, float32 on CUDA, follows its input on the CPU");
    REQUIRE(torch::log_softmax(y, 1).scalar_type() == torch::kBFloat16);
    {
      workbook::AutocastGuard nested(c10::DeviceType::CPU, torch::kFloat16);
      REQUIRE(torch::matmul(x, weight.t()).scalar_type() == torch::kFloat16);
    }
    INFO("the inner guard's end restores the outer one's dtype");
    REQUIRE(torch::matmul(x, weight.t()).scalar_type() == torch::kBFloat16);
  }
  REQUIRE_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
  REQUIRE(torch::matmul(x, weight.t()).scalar_type() == torch::kFloat32);
}

TEST_CASE("tensor_bytes counts the CPU's tensors as they are made and freed", "[precision]") {
  workbook::tensor_bytes(torch::kCPU);  // counting starts
  const int64_t before = workbook::tensor_bytes(torch::kCPU).current;
  workbook::reset_peak_tensor_bytes(torch::kCPU);
  {
    const torch::Tensor mebibyte = torch::empty({256 * 1024}, torch::kFloat32);
    const torch::Tensor half = torch::empty({128 * 1024}, torch::kBFloat16);
    REQUIRE(workbook::tensor_bytes(torch::kCPU).current - before == (1 << 20) + (1 << 18));
  }
  const workbook::TensorBytes after = workbook::tensor_bytes(torch::kCPU);
  REQUIRE(after.current == before);
  REQUIRE(after.peak - before == (1 << 20) + (1 << 18));
  workbook::reset_peak_tensor_bytes(torch::kCPU);
  REQUIRE(workbook::tensor_bytes(torch::kCPU).peak == before);
}
