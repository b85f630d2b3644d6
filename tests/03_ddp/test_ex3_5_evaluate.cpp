// Tests for ex3.5: exact distributed evaluation, every sample counted once.
#include "catch2_compat.hpp"

#include <algorithm>

#include "ddp.hpp"
#include "mpi_test.hpp"

namespace {

// The single-process answer: every sample once, in eval mode.
ch03::EvalResult evaluate_whole(workbook::Classifier& model, const torch::Tensor& images, const torch::Tensor& labels) {
  model.eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model.forward(images);
  ch03::EvalResult r;
  r.correct = logits.argmax(1).eq(labels).sum().item<int64_t>();
  r.total = images.size(0);
  r.mean_loss = torch::nn::functional::cross_entropy(logits, labels).item<double>();
  model.train();
  return r;
}

// A model whose predictions are right for some samples and wrong for others.
std::shared_ptr<workbook::TinyNet> trained_model(const torch::Tensor& images, const torch::Tensor& labels) {
  torch::manual_seed(3);
  auto model = std::make_shared<workbook::TinyNet>(16, 0.0, /*batch_norm=*/true);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));
  for (int i = 0; i < 10; ++i) {
    optimizer.zero_grad();
    torch::nn::functional::cross_entropy(model->forward(images.narrow(0, 0, 40)), labels.narrow(0, 0, 40)).backward();
    optimizer.step();
  }
  return model;
}

// Records the largest batch its forward was given, and whether autograd recorded.
class Watched : public workbook::Classifier {
 public:
  explicit Watched(std::shared_ptr<workbook::TinyNet> inner) : inner_(register_module("inner", std::move(inner))) {}
  torch::Tensor forward(torch::Tensor images) override {
    largest_batch = std::max(largest_batch, images.size(0));
    recorded_graph = recorded_graph || torch::GradMode::is_enabled();
    return inner_->forward(images);
  }
  std::shared_ptr<workbook::Classifier> fresh() const override { return nullptr; }
  int64_t largest_batch = 0;
  bool recorded_graph = false;

 private:
  std::shared_ptr<workbook::TinyNet> inner_;
};

}  // namespace

TEST_CASE("ex3.5 batches of batch_size at most, no autograd, and a model in eval mode left in eval mode",
          "[ex3.5]") {
  auto comm = mpi_test::communicator();
  torch::manual_seed(23);
  const torch::Tensor images = torch::rand({50, 1, 28, 28});
  const torch::Tensor labels = torch::randint(0, 10, {50}, torch::kInt64);
  Watched model(trained_model(images, labels));
  model.eval();
  ch03::evaluate_distributed(model, images, labels, /*batch_size=*/4, *comm);
  INFO("the largest batch forward was given: " << model.largest_batch << " samples, with batch_size 4");
  REQUIRE(mpi_test::all_ranks(model.largest_batch <= 4));
  INFO("forward ran with autograd recording");
  REQUIRE(mpi_test::all_ranks(!model.recorded_graph));
  INFO("a model in eval mode before the call must be in eval mode after it");
  REQUIRE(mpi_test::all_ranks(!model.is_training()));
}

TEST_CASE("ex3.5 evaluation over ranks equals single-process evaluation exactly", "[ex3.5][np3]") {
  auto comm = mpi_test::communicator();
  torch::manual_seed(21);
  // 103 samples: divides neither by 2 nor by 3, nor by the batch size.
  const torch::Tensor images = torch::rand({103, 1, 28, 28});
  const torch::Tensor labels = torch::randint(0, 10, {103}, torch::kInt64);
  auto model = trained_model(images, labels);
  const ch03::EvalResult expected = evaluate_whole(*model, images, labels);
  REQUIRE(expected.correct > 0);
  REQUIRE(expected.correct < 103);

  const ch03::EvalResult got = ch03::evaluate_distributed(*model, images, labels, /*batch_size=*/8, *comm);
  INFO("every sample counted exactly once over all ranks: no padding, no sample left out");
  REQUIRE(got.total == 103);
  INFO("the correct count is an exact sum over ranks (expected " << expected.correct << ", got " << got.correct << ")");
  REQUIRE(got.correct == expected.correct);
  REQUIRE(got.mean_loss == Approx(expected.mean_loss).epsilon(1e-5));
  REQUIRE(mpi_test::all_ranks(got.correct == expected.correct));
  INFO("the model is in train mode again afterwards");
  REQUIRE(model->is_training());
}

TEST_CASE("ex3.5 a rank with no samples still joins the sums", "[ex3.5][np3]") {
  auto comm = mpi_test::communicator();
  torch::manual_seed(22);
  const torch::Tensor images = torch::rand({1, 1, 28, 28});  // one sample: ranks 1.. have none
  const torch::Tensor labels = torch::randint(0, 10, {1}, torch::kInt64);
  auto model = trained_model(torch::rand({40, 1, 28, 28}), torch::randint(0, 10, {40}, torch::kInt64));
  const ch03::EvalResult expected = evaluate_whole(*model, images, labels);
  const ch03::EvalResult got = ch03::evaluate_distributed(*model, images, labels, 8, *comm);
  REQUIRE(got.total == 1);
  REQUIRE(got.correct == expected.correct);
  REQUIRE(got.mean_loss == Approx(expected.mean_loss).epsilon(1e-5));
}
