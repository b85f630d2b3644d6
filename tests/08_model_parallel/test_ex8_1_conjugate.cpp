// Tests for ex8.1: f and g on exact data. Each rank's upstream gradient (and,
// for g, its input) differs, so a sum over ranks, or its absence, shows.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "tensor_parallel.hpp"
#include "tp_oracles.hpp"

namespace {
int64_t all_reduces(const workbook::Communicator& comm) { return comm.stats().count(workbook::CommOp::AllReduce); }
}  // namespace

TEST_CASE("ex8.1 f: forward returns its input unchanged; backward sums every rank's gradient", "[ex8.1][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size(), rank = comm->rank();
  const torch::Tensor input = tp_oracle::exact({3, 5}, 0).requires_grad_(true);  // the same on every rank
  const int64_t before = all_reduces(*comm);
  const torch::Tensor output = ch08::copy_to_tensor_parallel(input, *comm);
  INFO("forward: the input itself, with no communication (every rank holds it already)");
  REQUIRE(mpi_test::all_ranks(torch::equal(output.detach(), input.detach())));
  REQUIRE(mpi_test::all_ranks(all_reduces(*comm) == before));
  REQUIRE(mpi_test::all_ranks(output.requires_grad()));
  auto upstream_of = [](int r) { return tp_oracle::exact({3, 5}, 10 + r) * (r + 1); };
  const torch::Tensor grad = torch::autograd::grad({output}, {input}, {upstream_of(rank)})[0];
  torch::Tensor expected = torch::zeros({3, 5});
  for (int r = 0; r < n; ++r) expected += upstream_of(r);
  INFO("backward: the sum over ranks of their gradients (each rank's part of the next layer says something "
       "about the input; identity here is the all-reduce put in the wrong operator)");
  REQUIRE(mpi_test::all_ranks(torch::equal(grad, expected)));
  INFO("backward: one all-reduce");
  REQUIRE(mpi_test::all_ranks(all_reduces(*comm) == before + 1));
}

TEST_CASE("ex8.1 g: forward sums every rank's input; backward passes the gradient through unchanged", "[ex8.1][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size(), rank = comm->rank();
  auto part_of = [](int r) { return tp_oracle::exact({4, 3}, r) * (r + 2); };
  const torch::Tensor input = part_of(rank).requires_grad_(true);
  const int64_t before = all_reduces(*comm);
  const torch::Tensor output = ch08::reduce_from_tensor_parallel(input, *comm);
  torch::Tensor expected = torch::zeros({4, 3});
  for (int r = 0; r < n; ++r) expected += part_of(r);
  INFO("forward: the sum over ranks of their inputs, in a new tensor (the input keeps its values)");
  REQUIRE(mpi_test::all_ranks(torch::equal(output.detach(), expected)));
  REQUIRE(mpi_test::all_ranks(torch::equal(input.detach(), part_of(rank))));
  REQUIRE(mpi_test::all_ranks(all_reduces(*comm) == before + 1));
  REQUIRE(mpi_test::all_ranks(output.requires_grad()));
  const torch::Tensor upstream = tp_oracle::exact({4, 3}, 7);  // y's gradient: the same on every rank
  const torch::Tensor grad = torch::autograd::grad({output}, {input}, {upstream})[0];
  INFO("backward: y = Σ_r x_r, so each x_r's gradient is y's, unchanged and with no communication "
       "(an all-reduce here would multiply it by the number of ranks)");
  REQUIRE(mpi_test::all_ranks(torch::equal(grad, upstream)));
  REQUIRE(mpi_test::all_ranks(all_reduces(*comm) == before + 1));
}
