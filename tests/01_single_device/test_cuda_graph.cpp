// Tests for the given code of ch01_train --device-adam / --cuda-graph
// (cuda_graph.hpp) that run on a CPU: DeviceAdam against torch::optim::Adam,
// and train_epoch calling the step it is given. The graph itself: test_gpu.cpp.
#include "catch2_compat.hpp"

#include "cuda_graph.hpp"
#include "oracles.hpp"
#include "single_device.hpp"
#include "workbook/errors.hpp"

TEST_CASE("ch01 DeviceAdam makes the updates torch::optim::Adam makes", "[ch01][given]") {
  torch::manual_seed(11);
  // No BatchNorm: a bias before a BatchNorm has a gradient of rounding noise
  // only, which Adam scales up to steps of size lr whose sign is the noise's.
  auto model = std::make_shared<workbook::TinyNet>(8, 0.0, /*batch_norm=*/false);
  auto reference = oracle::copy_of(*model);
  ch01::DeviceAdam device_adam(model->parameters(), 3e-3);
  torch::optim::Adam adam(reference->parameters(), torch::optim::AdamOptions(3e-3));
  for (int step = 0; step < 6; ++step) {
    CAPTURE(step);
    torch::Tensor images = torch::rand({5, 1, 28, 28}), labels = torch::randint(0, 10, {5}, torch::kInt64);
    for (auto [net, optimizer] : {std::pair<workbook::Classifier*, torch::optim::Optimizer*>{model.get(), &device_adam},
                                  {reference.get(), &adam}}) {
      optimizer->zero_grad();
      torch::nn::functional::cross_entropy(net->forward(images), labels).backward();
      optimizer->step();
    }
    const auto mine = model->parameters(), theirs = reference->parameters();
    for (size_t i = 0; i < mine.size(); ++i) {
      CAPTURE(i);
      // Adam's first steps move every weight by about lr: a bias correction
      // counted wrong (step 0, or twice per step) is off by far more than this.
      INFO("largest difference " << (mine[i] - theirs[i]).abs().max().item<double>());
      REQUIRE(torch::allclose(mine[i], theirs[i], /*rtol=*/1e-5, /*atol=*/1e-6));
    }
  }
}

TEST_CASE("ch01 DeviceAdam leaves a parameter without a gradient as it is", "[ch01][given]") {
  torch::Tensor used = torch::ones({3}, torch::requires_grad()), unused = torch::ones({2}, torch::requires_grad());
  ch01::DeviceAdam optimizer({used, unused}, 0.1);
  (used * used).sum().backward();
  optimizer.step();
  REQUIRE(torch::equal(unused.detach(), torch::ones({2})));
  REQUIRE(torch::allclose(used.detach(), torch::full({3}, 0.9)));  // Adam's first step: lr times the sign
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
  INFO("train_epoch(model, step, ...) must train through `step` alone: one call per batch of `order`");
  REQUIRE(seen == expected);
  REQUIRE(stats.mean_loss == Approx(2.0));
}

TEST_CASE("ch01 --cuda-graph on a build or device without CUDA is a UserError", "[ch01][given]") {
#if !defined(WORKBOOK_TORCH_CUDA)
  REQUIRE_THROWS_AS(ch01::captured_step([](const ch01::Batch&) { return torch::Tensor(); }, 4), workbook::UserError);
#else
  const ch01::StepFn step = ch01::captured_step([](const ch01::Batch&) { return torch::zeros({}); }, 4);
  REQUIRE_THROWS_AS(step({torch::zeros({4, 1, 28, 28}), torch::zeros({4}, torch::kInt64)}), workbook::UserError);
#endif
}
