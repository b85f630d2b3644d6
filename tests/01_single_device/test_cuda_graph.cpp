// Tests for the given code of ch01_train --device-adam / --cuda-graph
// (cuda_graph.hpp) that run on a CPU: DeviceAdam against torch::optim::Adam,
// and train_epoch calling the step it is given. The graph itself: test_gpu.cpp.
#include "catch2_compat.hpp"

#include "cuda_graph.hpp"
#include "oracles.hpp"
#include "single_device.hpp"
#include "workbook/errors.hpp"

TEST_CASE("ex1.2 train_step on a DeviceAdam (ch01_train --device-adam) makes torch::optim::Adam's updates",
          "[ex1.2]") {
  torch::manual_seed(11);
  // No BatchNorm: a bias before a BatchNorm has a gradient of rounding noise
  // only, which Adam scales up to steps of size lr whose sign is the noise's.
  auto model = std::make_shared<workbook::TinyNet>(8, 0.0, /*batch_norm=*/false);
  auto reference = oracle::copy_of(*model);
  torch::Tensor unused = torch::ones({2}, torch::requires_grad());  // no gradient: DeviceAdam leaves it alone
  std::vector<torch::Tensor> parameters = model->parameters();
  parameters.push_back(unused);
  ch01::DeviceAdam device_adam(parameters, 3e-3);
  torch::optim::Adam adam(reference->parameters(), torch::optim::AdamOptions(3e-3));
  for (int step = 0; step < 6; ++step) {
    CAPTURE(step);
    const ch01::Batch batch{torch::rand({5, 1, 28, 28}), torch::randint(0, 10, {5}, torch::kInt64)};
    ch01::train_step(*model, device_adam, batch);
    ch01::train_step(*reference, adam, batch);
    const auto mine = model->parameters(), theirs = reference->parameters();
    for (size_t i = 0; i < mine.size(); ++i) {
      CAPTURE(i);
      // Adam's first steps move every weight by about lr: a bias correction
      // counted wrong (from step 0, or twice a step) is off by far more.
      INFO("largest difference " << (mine[i] - theirs[i]).abs().max().item<double>());
      REQUIRE(torch::allclose(mine[i], theirs[i], /*rtol=*/1e-5, /*atol=*/1e-6));
    }
  }
  REQUIRE(torch::equal(unused.detach(), torch::ones({2})));
}

TEST_CASE("ex1.4 train_epoch calls the step it is given, once per batch, in order", "[ex1.4]") {
  const int64_t n = 23, batch_size = 5;
  torch::Tensor images = torch::rand({n, 1, 28, 28});
  torch::Tensor labels = torch::arange(n, torch::kInt64);  // each label names its sample
  torch::Tensor order = torch::randperm(n, torch::kInt64);
  auto model = std::make_shared<workbook::TinyNet>(8, 0.0);
  std::vector<int64_t> seen;
  const ch01::StepFn step = [&](const ch01::Batch& batch) {
    for (int64_t i = 0; i < batch.labels.size(0); ++i) seen.push_back(batch.labels[i].item<int64_t>());
    return torch::full({}, 2.0);
  };
  ch01::EpochStats stats = ch01::train_epoch(*model, step, images, labels, order, batch_size, torch::kCPU, 1);
  const std::vector<int64_t> expected(order.data_ptr<int64_t>(), order.data_ptr<int64_t>() + n);
  INFO("train_epoch(model, step_fn, ...) must train through `step_fn` alone: one call per batch of `order`");
  REQUIRE(seen == expected);
  REQUIRE(stats.mean_loss == Approx(2.0));
}
