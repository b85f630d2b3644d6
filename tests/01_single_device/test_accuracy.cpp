// The whole chapter on real data: FashionCNN, Adam 1e-3, batch 100, as
// ch01_train runs it. Needs every exercise of Chapter 1 and Fashion-MNIST.
#include "catch2_compat.hpp"

#include "single_device.hpp"
#include "workbook/fashion_mnist.hpp"

namespace {

double train_and_test(int64_t train_samples, int epochs) {
  workbook::LoadOptions options;
  options.train_samples = train_samples;
  workbook::FashionMnist data = workbook::load_fashion_mnist(workbook::find_fashion_mnist(std::nullopt), options);
  torch::manual_seed(0);
  auto model = std::make_shared<workbook::FashionCNN>();
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-3));
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    torch::Tensor order = ch01::epoch_order(data.train.size(), 0, epoch, true);
    ch01::train_epoch(*model, optimizer, data.train.images, data.train.labels, order, 100, torch::kCPU, 0);
  }
  return ch01::evaluate(*model, data.test.images, data.test.labels, 1000, torch::kCPU).accuracy();
}

}  // namespace

TEST_CASE("ch01 FashionCNN reaches 0.80 test accuracy after 1 epoch on 10,000 samples", "[ch01][accuracy]") {
  const double accuracy = train_and_test(10000, 1);
  CAPTURE(accuracy);
  REQUIRE(accuracy >= 0.80);
}

TEST_CASE("ch01 FashionCNN reaches 0.88 test accuracy after 2 epochs on the full set", "[ch01][accuracy][slow]") {
  const double accuracy = train_and_test(-1, 2);
  CAPTURE(accuracy);
  REQUIRE(accuracy >= 0.88);
}

TEST_CASE("ch01 FashionCNN reaches 0.90 test accuracy after 10 epochs", "[ch01][accuracy][slow]") {
  const double accuracy = train_and_test(-1, 10);
  CAPTURE(accuracy);
  REQUIRE(accuracy >= 0.90);
}
