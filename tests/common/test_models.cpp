// The models: FashionCNN's exact size and shapes; TinyNet; copying state.
#include "catch2_compat.hpp"

#include "workbook/models.hpp"

TEST_CASE("FashionCNN has the course model's 1,475,338 parameters and outputs 10 logits", "[models]") {
  workbook::FashionCNN model;
  REQUIRE(workbook::count_parameters(model) == 1475338);
  REQUIRE(model.fc1->weight.sizes() == torch::IntArrayRef{600, 2304});
  REQUIRE(model.forward(torch::rand({3, 1, 28, 28})).sizes() == torch::IntArrayRef{3, 10});
}

TEST_CASE("TinyNet is small and fresh() gives a same-shaped, independent model", "[models]") {
  workbook::TinyNet model(16);
  REQUIRE(workbook::count_parameters(model) < 20000);
  auto copy = model.fresh();
  REQUIRE(workbook::count_parameters(*copy) == workbook::count_parameters(model));
  workbook::copy_state(model, *copy);
  model.eval();
  copy->eval();
  torch::Tensor x = torch::rand({4, 1, 28, 28});
  REQUIRE(torch::allclose(model.forward(x), copy->forward(x)));
  torch::NoGradGuard no_grad;
  model.fc1->weight.add_(1.0);
  REQUIRE_FALSE(torch::allclose(model.forward(x), copy->forward(x)));
}
