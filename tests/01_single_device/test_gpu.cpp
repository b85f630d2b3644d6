// Chapter 1 on a CUDA device: the same answers as on the CPU. Tagged [gpu]:
// run by `ctest --preset cuda` on a machine with a GPU, skipped elsewhere.
#include <catch2/catch.hpp>

#include "gpu_tests.hpp"
#include "oracles.hpp"
#include "single_device.hpp"

using gpu_tests::have_gpu;

TEST_CASE("ex1.1 make_batch delivers batches to the GPU, from CPU or GPU data", "[ex1.1][gpu]") {
  if (!have_gpu()) return;
  const torch::Device gpu(torch::kCUDA, 0);
  auto [images, labels] = oracle::indexed_samples(30);
  torch::Tensor order = torch::randperm(30, torch::kInt64);
  for (bool data_on_gpu : {false, true}) {
    CAPTURE(data_on_gpu);
    torch::Tensor x = data_on_gpu ? images.to(gpu) : images, y = data_on_gpu ? labels.to(gpu) : labels;
    ch01::Batch batch = ch01::make_batch(x, y, order, 1, 8, gpu);
    REQUIRE(batch.images.device() == gpu);
    REQUIRE(batch.labels.device() == gpu);
    REQUIRE(torch::equal(batch.labels.cpu(), labels.index_select(0, order.slice(0, 8, 16))));
  }
}

TEST_CASE("ex1.2 ex1.3 ex1.4 on the GPU match the CPU", "[ex1.4][gpu]") {
  if (!have_gpu()) return;
  const torch::Device gpu(torch::kCUDA, 0);
  torch::manual_seed(6);
  const int64_t n = 64;
  torch::Tensor images = torch::rand({n, 1, 28, 28});
  torch::Tensor labels = torch::randint(0, 10, {n}, torch::kInt64);
  torch::Tensor order = torch::randperm(n, torch::kInt64);
  auto on_cpu = std::make_shared<workbook::TinyNet>(16, 0.0);
  auto on_gpu = oracle::copy_of(*on_cpu);
  on_gpu->to(gpu);
  torch::optim::SGD cpu_sgd(on_cpu->parameters(), torch::optim::SGDOptions(0.05));
  torch::optim::SGD gpu_sgd(on_gpu->parameters(), torch::optim::SGDOptions(0.05));
  auto cpu_stats = ch01::train_epoch(*on_cpu, cpu_sgd, images, labels, order, 16, torch::kCPU, 1);
  auto gpu_stats = ch01::train_epoch(*on_gpu, gpu_sgd, images.to(gpu), labels.to(gpu), order, 16, gpu, 1);
  REQUIRE(gpu_stats.mean_loss == Approx(cpu_stats.mean_loss).epsilon(1e-4));
  REQUIRE(gpu_stats.timed_seconds > 0);
  for (const auto& p : on_gpu->parameters()) REQUIRE(p.device() == gpu);
  auto cpu_eval = ch01::evaluate(*on_cpu, images, labels, 10, torch::kCPU);
  auto gpu_eval = ch01::evaluate(*on_gpu, images.to(gpu), labels.to(gpu), 10, gpu);
  REQUIRE(gpu_eval.total == cpu_eval.total);
  REQUIRE(gpu_eval.mean_loss == Approx(cpu_eval.mean_loss).epsilon(1e-4));
}
