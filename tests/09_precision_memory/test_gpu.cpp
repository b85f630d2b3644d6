// The GPU path ([gpu]: run where CUDA is, skipped with a warning elsewhere):
// float16 autocast, the loss scaler and the 16-bit average over NCCL (world
// size 1), and a checkpoint's random state on the GPU's generator.
#include "catch2_compat.hpp"

#include <limits>

#include "block_mlp.hpp"
#include "checkpoint.hpp"
#include "gpu_tests.hpp"
#include "mpi_test.hpp"
#include "precision.hpp"
#include "wire16.hpp"
#include "workbook/autocast.hpp"

TEST_CASE("float16 autocast on the GPU: the linear layers in float16, the loss in float32", "[gpu]") {
  if (!gpu_tests::have_gpu()) return;
  torch::manual_seed(21);
  auto model = std::make_shared<ch09::BlockMlp>();
  model->to(torch::kCUDA);
  const torch::Tensor images = torch::rand({32, 1, 28, 28}, torch::kCUDA);
  workbook::AutocastGuard guard(c10::DeviceType::CUDA, torch::kFloat16);
  const torch::Tensor hidden = model->input->forward(images.flatten(1));
  REQUIRE(hidden.scalar_type() == torch::kFloat16);
  const torch::Tensor loss =
      torch::nn::functional::cross_entropy(model->forward(images), torch::arange(32, torch::kCUDA) % 10);
  REQUIRE(loss.scalar_type() == torch::kFloat32);
  loss.backward();
  REQUIRE(model->input->weight.grad().scalar_type() == torch::kFloat32);
}

TEST_CASE("ex9.2 the scaler over NCCL: an inf in a GPU gradient skips the step and halves the scale", "[ex9.2][gpu]") {
  if (!gpu_tests::have_gpu()) return;
  auto comm = workbook::make_communicator(workbook::Backend::Nccl, mpi_test::env(),
                                          workbook::CommunicatorOptions::from_environment());
  ch09::DynamicLossScaler scaler;
  torch::Tensor weight = torch::ones({4}, torch::TensorOptions().device(comm->device()).requires_grad(true));
  torch::optim::Adam adam({weight}, torch::optim::AdamOptions(0.1));
  weight.mutable_grad() = torch::full({4}, 65536.0f, torch::TensorOptions().device(comm->device()));
  REQUIRE(ch09::scaled_step(scaler, adam, {weight}, nullptr, *comm));
  const torch::Tensor after_one = weight.detach().clone();
  weight.mutable_grad() = torch::full({4}, std::numeric_limits<float>::infinity(), torch::TensorOptions().device(comm->device()));
  REQUIRE_FALSE(ch09::scaled_step(scaler, adam, {weight}, nullptr, *comm));
  REQUIRE(torch::equal(weight.detach(), after_one));
  REQUIRE(scaler.scale_value() == 32768.0);
}

TEST_CASE("ex9.4 the 16-bit average over NCCL at world size 1 rounds to 16 bits", "[ex9.4][gpu]") {
  if (!gpu_tests::have_gpu()) return;
  auto comm = workbook::make_communicator(workbook::Backend::Nccl, mpi_test::env(),
                                          workbook::CommunicatorOptions::from_environment());
  torch::Tensor flat = torch::tensor({1.0f, 1.0f / 3, 40000.0f}).to(comm->device());
  ch09::average_in_16_bits(flat, torch::kFloat16, *comm);
  REQUIRE(torch::equal(flat.cpu(), torch::tensor({1.0f, 1.0f / 3, 40000.0f}).to(torch::kFloat16).to(torch::kFloat32)));
}

TEST_CASE("ex9.5 a checkpoint on the GPU draws the GPU generator's masks again", "[ex9.5][gpu]") {
  if (!gpu_tests::have_gpu()) return;
  auto run = [](int64_t every) {
    torch::manual_seed(31);
    ch09::BlockMlpOptions options;
    options.blocks = 4;
    options.width = 64;
    options.dropout = 0.5;
    auto model = std::make_shared<ch09::BlockMlp>(options);
    model->to(torch::kCUDA);
    model->checkpoint_every(every);
    const torch::Tensor images = torch::rand({16, 1, 28, 28}, torch::kCUDA);
    torch::manual_seed(32);
    torch::nn::functional::cross_entropy(model->forward(images), torch::arange(16, torch::kCUDA) % 10).backward();
    std::vector<torch::Tensor> gradients;
    for (const torch::Tensor& p : model->parameters()) gradients.push_back(p.grad().cpu());
    gradients.push_back(torch::rand({4}, torch::kCUDA).cpu());  // the next draw
    return gradients;
  };
  const auto plain = run(0), checkpointed = run(2);
  for (size_t i = 0; i < plain.size(); ++i) REQUIRE(torch::allclose(checkpointed[i], plain[i], 1e-4, 1e-6));
}
