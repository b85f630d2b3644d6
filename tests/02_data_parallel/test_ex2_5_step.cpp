// Tests for ex2.5: the DataParallel forward pass and training step against a
// single model on the whole batch.
#include "catch2_compat.hpp"

#include <algorithm>

#include "data_parallel.hpp"
#include "oracles.hpp"
#include "spy.hpp"
#include "workbook/errors.hpp"
#include "workbook/timing.hpp"

using spy::cpus;

TEST_CASE("ex2.5 a DataParallel training step equals a single-device step on the same batch", "[ex2.5]") {
  // Without BatchNorm a sample's logits do not depend on its batch-mates, so
  // splitting the batch changes nothing but the order of float additions.
  for (size_t replicas : {1, 2, 3, 4}) {
    CAPTURE(replicas);
    torch::manual_seed(50 + replicas);
    auto model = std::make_shared<workbook::TinyNet>(32, 0.0, /*batch_norm=*/false);
    auto reference = oracle::copy_of(*model);
    const double lr = 0.1;
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(lr));
    // Two steps: a step that does not clear the gradients would add the first to the second.
    for (int step = 0; step < 2; ++step) {
      CAPTURE(step);
      const torch::Tensor images = torch::rand({37, 1, 28, 28});  // 37: uneven over 2, 3 and 4 replicas
      const torch::Tensor labels = torch::randint(0, 10, {37}, torch::kInt64);
      const double expected_loss = oracle::sgd_step(*reference, images, labels, lr);
      torch::Tensor loss = ch02::data_parallel_step(*model, optimizer, images, labels, cpus(replicas), 1);
      {
        INFO("the step returns the mean cross-entropy over the whole batch, detached");
        REQUIRE_FALSE(loss.requires_grad());
        REQUIRE(loss.item<double>() == Approx(expected_loss).epsilon(1e-5));
      }
      INFO("after the step the parameters must equal a single-device SGD step on the whole batch");
      REQUIRE(oracle::max_parameter_difference(*model, *reference) < 1e-5);
    }
  }
}

TEST_CASE("ex2.5 data_parallel_forward equals the model's forward, on the primary device", "[ex2.5]") {
  torch::manual_seed(55);
  auto model = std::make_shared<workbook::FashionCNN>();
  model->eval();  // running statistics: every split of the batch gives the same logits
  const torch::Tensor images = torch::rand({10, 1, 28, 28});
  torch::NoGradGuard no_grad;
  const torch::Tensor expected = model->forward(images);
  for (size_t replicas : {1, 3}) {
    CAPTURE(replicas);
    torch::Tensor logits = ch02::data_parallel_forward(*model, images, cpus(replicas), 1);
    REQUIRE(logits.sizes() == expected.sizes());
    REQUIRE(torch::allclose(logits, expected, 1e-5, 1e-5));
    INFO("under NoGradGuard no graph may be built");
    REQUIRE_FALSE(logits.requires_grad());
  }
}

TEST_CASE("ex2.5 the forward pass runs one replica per device, on threads of their own, at once", "[ex2.5]") {
  spy::Rendezvous rendezvous;
  rendezvous.expected = 3;
  auto model = std::make_shared<spy::Spy>(&rendezvous, false);
  torch::Tensor logits = ch02::data_parallel_forward(*model, torch::rand({10, 1, 28, 28}), cpus(3), 1);
  REQUIRE(logits.size(0) == 10);
  const std::vector<spy::Call>& calls = model->calls();
  INFO("data_parallel_forward must scatter, replicate and parallel_apply: one forward per replica");
  REQUIRE(calls.size() == 3);
  std::vector<int64_t> samples;
  for (size_t i = 0; i < calls.size(); ++i) {
    CAPTURE(i);
    REQUIRE(calls[i].thread != std::this_thread::get_id());
    for (size_t j = 0; j < i; ++j) REQUIRE(calls[i].thread != calls[j].thread);
    REQUIRE(calls[i].met_the_others);
    samples.push_back(calls[i].samples);
  }
  std::sort(samples.begin(), samples.end());
  REQUIRE(samples == std::vector<int64_t>{3, 3, 4});
}

TEST_CASE("ex2.5 the step records where its time went", "[ex2.5]") {
  torch::manual_seed(56);
  auto model = std::make_shared<workbook::TinyNet>(256, 0.0, false);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-3));
  const torch::Tensor images = torch::rand({256, 1, 28, 28});
  const torch::Tensor labels = torch::randint(0, 10, {256}, torch::kInt64);
  // Note: the untimed moments between phases (zero_grad, checks) are short,
  // but a busy machine can preempt the test there: the best of 3 steps.
  double best_coverage = 0.0;
  for (int attempt = 0; attempt < 3 && best_coverage < 0.5; ++attempt) {
    ch02::StepTimes times;
    workbook::Stopwatch wall;
    wall.start();
    ch02::data_parallel_step(*model, optimizer, images, labels, cpus(2), 1, &times);
    const double wall_s = wall.stop();
    INFO("scatter " << times.scatter_s << " replicate " << times.replicate_s << " forward " << times.forward_s
                    << " gather " << times.gather_s << " backward " << times.backward_s << " optimizer "
                    << times.optimizer_s << " wall " << wall_s);
    for (double phase : {times.scatter_s, times.gather_s}) REQUIRE(phase >= 0.0);
    for (double phase : {times.replicate_s, times.forward_s, times.backward_s, times.optimizer_s})
      REQUIRE(phase > 0.0);
    INFO("the phases are inside the step: their sum cannot exceed its wall time");
    REQUIRE(times.total() <= wall_s);
    best_coverage = std::max(best_coverage, times.total() / wall_s);
  }
  INFO("the phases must cover most of the step (best of 3: " << best_coverage << " of the wall time)");
  REQUIRE(best_coverage >= 0.5);
}

TEST_CASE("ex2.5 a batch smaller than the device list is refused with a clear error", "[ex2.5]") {
  workbook::TinyNet model(8, 0.0, false);
  torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(0.1));
  const torch::Tensor images = torch::rand({2, 1, 28, 28});
  const torch::Tensor labels = torch::randint(0, 10, {2}, torch::kInt64);
  REQUIRE_THROWS_AS(ch02::data_parallel_step(model, optimizer, images, labels, cpus(3), 1), workbook::UserError);
}
