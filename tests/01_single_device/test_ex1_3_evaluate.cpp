// Tests for ex1.3: evaluate against a full-batch computation in eval mode.
#include "catch2_compat.hpp"

#include "oracles.hpp"
#include "single_device.hpp"

namespace {

// A TinyNet whose BatchNorm running statistics differ from a fresh one's, and
// whose dropout is strong, so train-mode and eval-mode outputs clearly differ.
std::shared_ptr<workbook::TinyNet> model_with_history() {
  torch::manual_seed(3);
  auto model = std::make_shared<workbook::TinyNet>(16, /*dropout=*/0.5);
  model->train();
  torch::NoGradGuard no_grad;
  for (int i = 0; i < 5; ++i) model->forward(torch::rand({64, 1, 28, 28}) * 3 + 1);
  return model;
}

// Records, at each forward pass, whether autograd was recording and the mode.
class Spy : public workbook::Classifier {
 public:
  explicit Spy(std::shared_ptr<workbook::Classifier> inner) : inner_(register_module("inner", std::move(inner))) {}
  torch::Tensor forward(torch::Tensor images) override {
    grad_mode_seen.push_back(torch::GradMode::is_enabled());
    training_seen.push_back(is_training());
    return inner_->forward(images);
  }
  std::shared_ptr<workbook::Classifier> fresh() const override { return std::make_shared<Spy>(inner_->fresh()); }
  std::vector<bool> grad_mode_seen, training_seen;

 private:
  std::shared_ptr<workbook::Classifier> inner_;
};

}  // namespace

TEST_CASE("ex1.3 evaluate runs every forward pass in eval mode without autograd", "[ex1.3]") {
  auto spy = std::make_shared<Spy>(model_with_history());
  spy->train();
  torch::Tensor images = torch::rand({25, 1, 28, 28});
  torch::Tensor labels = torch::randint(0, 10, {25}, torch::kInt64);
  ch01::evaluate(*spy, images, labels, 10, torch::kCPU);
  INFO("25 samples in batches of 10 are 3 forward passes");
  REQUIRE(spy->grad_mode_seen.size() == 3);
  INFO("each forward pass must run under torch::NoGradGuard (no graph recorded)");
  for (bool recording : spy->grad_mode_seen) REQUIRE_FALSE(recording);
  INFO("each forward pass must run in eval mode");
  for (bool training : spy->training_seen) REQUIRE_FALSE(training);
  INFO("autograd is recording again afterwards");
  REQUIRE(torch::GradMode::is_enabled());
}

TEST_CASE("ex1.3 evaluate counts every sample once and equals a full-batch oracle", "[ex1.3]") {
  auto model = model_with_history();
  const int64_t n = 103;  // batches of 10: the last holds 3
  torch::Tensor images = torch::rand({n, 1, 28, 28});
  torch::Tensor labels = torch::randint(0, 10, {n}, torch::kInt64);

  auto reference = oracle::copy_of(*model);
  reference->eval();
  torch::Tensor logits;
  {
    torch::NoGradGuard no_grad;
    logits = reference->forward(images);
  }
  const int64_t expected_correct = logits.argmax(1).eq(labels).sum().item<int64_t>();
  const double expected_loss = torch::nn::functional::cross_entropy(logits, labels).item<double>();
  const torch::Tensor running_mean_before = model->bn->running_mean.clone();

  ch01::EvalResult result = ch01::evaluate(*model, images, labels, /*batch_size=*/10, torch::kCPU);
  INFO("total counts every sample exactly once, the short last batch included");
  REQUIRE(result.total == n);
  INFO("correct must be exact: eval mode (BatchNorm running statistics, no dropout), arg-max of the logits");
  REQUIRE(result.correct == expected_correct);
  INFO("mean_loss is the loss summed over samples divided by their number, not a mean of batch means");
  REQUIRE(result.mean_loss == Approx(expected_loss).epsilon(1e-5));
  REQUIRE(result.accuracy() == Approx(static_cast<double>(expected_correct) / n));
  INFO("evaluation must not change BatchNorm's running statistics (eval mode)");
  REQUIRE(torch::equal(model->bn->running_mean, running_mean_before));
  INFO("the model goes back to the mode it was in (train)");
  REQUIRE(model->is_training());
  INFO("no gradients are computed during evaluation");
  for (const auto& p : model->parameters()) REQUIRE_FALSE(p.grad().defined());
}

TEST_CASE("ex1.3 evaluate leaves a model in eval mode in eval mode", "[ex1.3]") {
  auto model = model_with_history();
  model->eval();
  torch::Tensor images = torch::rand({8, 1, 28, 28});
  torch::Tensor labels = torch::randint(0, 10, {8}, torch::kInt64);
  ch01::EvalResult result = ch01::evaluate(*model, images, labels, 3, torch::kCPU);
  REQUIRE(result.total == 8);
  REQUIRE_FALSE(model->is_training());
}
