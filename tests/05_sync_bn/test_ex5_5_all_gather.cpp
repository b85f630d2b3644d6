// Tests for ex5.5: the differentiable all-gather, on exact data: forward puts
// rank r's rows at [r·B, (r+1)·B); backward is held to one process's autograd
// on the sum of every rank's loss.
#include "catch2_compat.hpp"

#include <array>
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

TEST_CASE("ex5.5 backward: each rank's input gets its gradient of the sum of every rank's loss", "[ex5.5][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size(), rank = comm->rank();
  torch::Tensor mine = rows_of(rank, {2, 3}).requires_grad_(true);
  const torch::Tensor gathered = ch05::all_gather_with_grad(mine, *comm);
  // Each rank's loss weighs the gathered rows differently: Σ gathered · (rank + 1) · k.
  auto upstream_of = [&](int r) { return torch::arange(2 * n * 3, torch::kFloat32).view({2 * n, 3}) * (r + 1); };
  std::array<int64_t, workbook::kCommOpCount> before{};
  for (int op = 0; op < workbook::kCommOpCount; ++op) before[op] = comm->stats().count(static_cast<workbook::CommOp>(op));
  const torch::Tensor grad = torch::autograd::grad({(gathered * upstream_of(rank)).sum()}, {mine})[0];
  auto calls = [&](workbook::CommOp op) { return comm->stats().count(op) - before[static_cast<int>(op)]; };

  // The oracle: one process holding every rank's rows, autograd on the sum
  // of every rank's loss; this rank's rows of that gradient.
  std::vector<torch::Tensor> everyone;
  for (int r = 0; r < n; ++r) everyone.push_back(rows_of(r, {2, 3}));
  torch::Tensor all_rows = torch::cat(everyone).requires_grad_(true);
  torch::Tensor total = torch::zeros({});
  for (int r = 0; r < n; ++r) total = total + (all_rows * upstream_of(r)).sum();
  const torch::Tensor expected = torch::autograd::grad({total}, {all_rows})[0].narrow(0, 2 * rank, 2);
  INFO("backward: this rank's input gradient is not its rows' gradient of the sum of every rank's loss "
       "(exact integers)");
  REQUIRE(mpi_test::all_ranks(torch::equal(grad, expected)));
  int64_t collectives = 0;
  for (workbook::CommOp op : {workbook::CommOp::Broadcast, workbook::CommOp::AllReduce, workbook::CommOp::AllGather,
                              workbook::CommOp::ReduceScatter, workbook::CommOp::Barrier})
    collectives += calls(op);
  INFO("backward made " << collectives << " collective call(s); the contract is one");
  REQUIRE(mpi_test::all_ranks(collectives == 1));
  INFO("backward made an all-reduce: every rank received all n·B rows of results, where it needs only its own B");
  REQUIRE(mpi_test::all_ranks(calls(workbook::CommOp::AllReduce) == 0));
}
