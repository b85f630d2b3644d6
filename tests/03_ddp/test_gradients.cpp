// Tests for all_reduce_gradients (given code, ex3.3 until 2026-11-30): it
// averages exactly, in one all-reduce.
#include "catch2_compat.hpp"

#include "ddp.hpp"
#include "mpi_test.hpp"

namespace {

// A model with parameters of several shapes: two layers and a frozen one.
struct ThreeLayers : torch::nn::Module {
  ThreeLayers() {
    a = register_module("a", torch::nn::Linear(5, 3));
    frozen = register_module("frozen", torch::nn::Linear(3, 3));
    b = register_module("b", torch::nn::Linear(3, 2));
    for (auto& p : frozen->parameters()) p.set_requires_grad(false);
  }
  torch::nn::Linear a{nullptr}, frozen{nullptr}, b{nullptr};
};

// Exact gradients: on rank r, parameter k's gradient is (r + 1) * (k + 1) * [1, 2, 3, ...].
// Their mean over R ranks is (R + 1) / 2 * (k + 1) * [1, 2, ...]. Compared to
// 1e-6 relative: dividing before summing (as PyTorch's DDP does) rounds.
torch::Tensor rank_gradient(const torch::Tensor& p, int rank, int k) {
  return (torch::arange(1, p.numel() + 1, torch::kFloat32) * static_cast<float>((rank + 1) * (k + 1))).view_as(p);
}

}  // namespace

TEST_CASE("all_reduce_gradients leaves every rank with the mean gradient", "[given][np3]") {
  auto comm = mpi_test::communicator();
  ThreeLayers model;
  const std::vector<torch::Tensor> params = model.parameters();
  for (size_t k = 0; k < params.size(); ++k)
    if (params[k].requires_grad()) params[k].mutable_grad() = rank_gradient(params[k], comm->rank(), static_cast<int>(k));
  ch03::all_reduce_gradients(model, *comm);
  const float mean_factor = static_cast<float>(comm->size() + 1) / 2.0f;
  for (size_t k = 0; k < params.size(); ++k) {
    CAPTURE(k);
    if (!params[k].requires_grad()) {
      INFO("a frozen parameter (requires_grad false) has no gradient and must keep none");
      REQUIRE_FALSE(params[k].grad().defined());
      continue;
    }
    const torch::Tensor expected = rank_gradient(params[k], 0, static_cast<int>(k)) * mean_factor;
    INFO("parameter " << k << "'s gradient must be the mean over ranks (sum / ranks)");
    REQUIRE(mpi_test::all_ranks(torch::allclose(params[k].grad(), expected, /*rtol=*/1e-6, /*atol=*/0.0)));
  }
  INFO("the gradients took " << comm->stats().collectives() << " collective calls; the contract allows one per step");
  REQUIRE(comm->stats().count(workbook::CommOp::AllReduce) == 1);
  REQUIRE(comm->stats().collectives() == 1);
  int64_t trainable = 0;
  for (const auto& p : params)
    if (p.requires_grad()) trainable += p.numel();
  REQUIRE(comm->stats().elements[static_cast<int>(workbook::CommOp::AllReduce)] == trainable);
}

TEST_CASE("all_reduce_gradients counts a parameter without a gradient as zeros on that rank", "[given]") {
  auto comm = mpi_test::communicator();
  ThreeLayers model;
  // Rank 0's layer `b` got no gradient this step; every other rank's did.
  for (auto& p : model.a->parameters()) p.mutable_grad() = torch::ones_like(p);
  if (comm->rank() != 0)
    for (auto& p : model.b->parameters()) p.mutable_grad() = torch::full_like(p, static_cast<double>(comm->size()));
  ch03::all_reduce_gradients(model, *comm);
  const double expected_b = comm->size() == 1 ? 0.0 : static_cast<double>(comm->size() - 1);  // (R-1) * R / R
  for (auto& p : model.b->parameters()) {
    REQUIRE(p.grad().defined());
    REQUIRE(mpi_test::all_ranks(torch::allclose(p.grad(), torch::full_like(p, expected_b), 1e-6, 0.0)));
  }
  for (auto& p : model.a->parameters()) REQUIRE(torch::allclose(p.grad(), torch::ones_like(p), 1e-6, 0.0));
}
