// Tests for ex1.2: train_step against an SGD step computed by hand.
#include "catch2_compat.hpp"

#include "oracles.hpp"
#include "single_device.hpp"

TEST_CASE("ex1.2 train_step equals SGD steps computed by hand", "[ex1.2]") {
  torch::manual_seed(1);
  auto model = std::make_shared<workbook::TinyNet>(8, /*dropout=*/0.0);
  auto reference = oracle::copy_of(*model);
  const double lr = 0.1;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(lr));

  // Two steps on different batches: the second's update must come from the
  // second batch alone.
  for (int step = 0; step < 2; ++step) {
    CAPTURE(step);
    ch01::Batch batch{torch::rand({12, 1, 28, 28}), torch::randint(0, 10, {12}, torch::kInt64)};
    const double expected_loss = oracle::sgd_step(*reference, batch.images, batch.labels, lr);
    torch::Tensor loss = ch01::train_step(*model, optimizer, batch);
    INFO("train_step returns the mean cross-entropy of the batch, detached, as a 0-dim tensor");
    REQUIRE(loss.dim() == 0);
    REQUIRE_FALSE(loss.requires_grad());
    REQUIRE(loss.item<double>() == Approx(expected_loss).epsilon(1e-6));
    INFO("after the step every parameter must equal the hand-computed SGD update");
    REQUIRE(oracle::max_parameter_difference(*model, *reference) < 1e-6);
  }
}

TEST_CASE("ex1.2 train_step makes progress on a batch it sees repeatedly", "[ex1.2]") {
  torch::manual_seed(2);
  auto model = std::make_shared<workbook::TinyNet>(16, 0.0);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));
  ch01::Batch batch{torch::rand({32, 1, 28, 28}), torch::randint(0, 10, {32}, torch::kInt64)};
  const double first = ch01::train_step(*model, optimizer, batch).item<double>();
  double last = first;
  for (int i = 0; i < 30; ++i) last = ch01::train_step(*model, optimizer, batch).item<double>();
  INFO("30 Adam steps on one batch must at least halve its loss (first " << first << ", last " << last << ")");
  REQUIRE(last < 0.5 * first);
}
