// Tests for ex5.5: the differentiable all-gather, on exact data: forward puts
// rank r's rows at [r·B, (r+1)·B); backward sums every rank's gradient for them.
#include "catch2_compat.hpp"

#include <functional>
#include <numeric>

#include "gather.hpp"
#include "mpi_test.hpp"

namespace {
// Rank r's rows: integers that say whose they are ((r + 1) · 1000 + position).
torch::Tensor rows_of(int rank, std::vector<int64_t> shape) {
  const int64_t count = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  return (torch::arange(count, torch::kFloat32) + 1000.0 * (rank + 1)).view(shape);
}
}  // namespace

TEST_CASE("ex5.5 all_gather_with_grad concatenates every rank's rows, in rank order", "[ex5.5][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size();
  for (std::vector<int64_t> shape : {std::vector<int64_t>{3, 4}, std::vector<int64_t>{2, 3, 5}, std::vector<int64_t>{1, 1}}) {
    CAPTURE(shape);
    torch::Tensor mine = rows_of(comm->rank(), shape).requires_grad_(true);
    const int64_t calls_before = comm->stats().count(workbook::CommOp::AllGather);
    const torch::Tensor gathered = ch05::all_gather_with_grad(mine, *comm);
    std::vector<torch::Tensor> parts;
    for (int r = 0; r < n; ++r) parts.push_back(rows_of(r, shape));
    INFO("rank r's rows at [r·B, (r+1)·B), shape [n·B, ...]");
    REQUIRE(mpi_test::all_ranks(torch::equal(gathered.detach(), torch::cat(parts))));
    REQUIRE(mpi_test::all_ranks(comm->stats().count(workbook::CommOp::AllGather) - calls_before == 1));
    INFO("the result must carry autograd history back to the input");
    REQUIRE(mpi_test::all_ranks(gathered.requires_grad()));
  }
}

TEST_CASE("ex5.5 the gradient of rank r's rows is the sum of every rank's gradient for them", "[ex5.5][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size(), rank = comm->rank();
  torch::Tensor mine = rows_of(rank, {2, 3}).requires_grad_(true);
  const torch::Tensor gathered = ch05::all_gather_with_grad(mine, *comm);
  // Each rank's loss weighs the gathered rows differently: Σ gathered · (rank + 1) · k.
  auto upstream_of = [&](int r) { return torch::arange(2 * n * 3, torch::kFloat32).view({2 * n, 3}) * (r + 1); };
  const int64_t calls_before = comm->stats().count(workbook::CommOp::ReduceScatter);
  const torch::Tensor grad = torch::autograd::grad({(gathered * upstream_of(rank)).sum()}, {mine})[0];
  torch::Tensor expected = torch::zeros({2, 3});
  for (int r = 0; r < n; ++r) expected += upstream_of(r).narrow(0, 2 * rank, 2);
  INFO("backward: the rows [2r, 2r+2) of every rank's gradient, summed (exact integers)");
  REQUIRE(mpi_test::all_ranks(torch::equal(grad, expected)));
  INFO("backward: one reduce-scatter");
  REQUIRE(mpi_test::all_ranks(comm->stats().count(workbook::CommOp::ReduceScatter) - calls_before == 1));
}
