// Chapter 2 on CUDA devices (one GPU repeated when there is only one): the
// same answers as on the CPU. Tagged [gpu]: run by `ctest --preset cuda`,
// skipped elsewhere.
#include "catch2_compat.hpp"

#include "data_parallel.hpp"
#include "gpu_tests.hpp"
#include "oracles.hpp"
#include "workbook/device.hpp"
#include "workbook/errors.hpp"

using gpu_tests::have_gpu;

TEST_CASE("ex2.5 a DataParallel step on GPUs equals a single-device step", "[ex2.5][gpu]") {
  if (!have_gpu()) return;
  const std::vector<torch::Device> devices = workbook::replica_devices(torch::Device(torch::kCUDA, 0), 2);
  torch::manual_seed(60);
  auto model = std::make_shared<workbook::TinyNet>(32, 0.0, false);
  auto reference = oracle::copy_of(*model);
  model->to(devices[0]);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  const torch::Tensor images = torch::rand({37, 1, 28, 28}), labels = torch::randint(0, 10, {37}, torch::kInt64);
  oracle::sgd_step(*reference, images, labels, 0.1);
  torch::Tensor loss =
      ch02::data_parallel_step(*model, optimizer, images.to(devices[0]), labels.to(devices[0]), devices, 1);
  REQUIRE(loss.device() == devices[0]);
  model->to(torch::kCPU);
  REQUIRE(oracle::max_parameter_difference(*model, *reference) < 1e-5);
}

TEST_CASE("ex2.2 replicate refuses a model that is not on the primary device", "[ex2.2][gpu]") {
  if (!have_gpu()) return;
  workbook::TinyNet model(8);
  REQUIRE_THROWS_AS(ch02::replicate(model, {torch::Device(torch::kCUDA, 0)}), workbook::UserError);
}
