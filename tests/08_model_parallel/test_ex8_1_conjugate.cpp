// Tests for ex8.1: f and g judged by what they are for. A split pair built
// from plain tensors (f, this rank's rows of A, an elementwise ReLU, this
// rank's columns of B, g) against the unsplit pair, and each operator around
// one split layer, on exact data (bit for bit), at widths that do not divide
// between the ranks.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "tensor_parallel.hpp"
#include "tp_oracles.hpp"

namespace {

int64_t all_reduces(const workbook::Communicator& comm) { return comm.stats().count(workbook::CommOp::AllReduce); }

// Whether `tensor` is the same on every rank (rank 0's copy broadcast and compared).
bool same_on_every_rank(workbook::Communicator& comm, const torch::Tensor& tensor) {
  torch::Tensor first = tensor.detach().contiguous().clone();
  comm.broadcast(first, 0);
  return mpi_test::all_ranks(torch::equal(first, tensor.detach()));
}

torch::Tensor leaf(const torch::Tensor& values) { return values.detach().clone().requires_grad_(true); }

}  // namespace

TEST_CASE("ex8.1 f and g around a split pair give the unsplit pair's output and gradients", "[ex8.1][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size(), rank = comm->rank();
  CAPTURE(n);
  // y = B·relu(A·x): x [5, 6], A [7, 6], B [4, 7]; 7 hidden features over n ranks.
  const torch::Tensor x_whole = leaf(tp_oracle::exact({5, 6}, 3));
  const torch::Tensor a_whole = leaf(tp_oracle::exact({7, 6}, 1)), b_whole = leaf(tp_oracle::exact({4, 7}, 2));
  const torch::Tensor y_whole = torch::relu(x_whole.matmul(a_whole.t())).matmul(b_whole.t());
  const torch::Tensor upstream = tp_oracle::exact({5, 4}, 4);  // y's gradient, the same on every rank
  y_whole.backward(upstream);

  const torch::Tensor x = leaf(x_whole);
  const torch::Tensor a = leaf(tp_oracle::rows_of(a_whole, rank, n));     // this rank's hidden features' rows
  const torch::Tensor b = leaf(tp_oracle::columns_of(b_whole, rank, n));  // and the columns that read them
  const int64_t before = all_reduces(*comm);
  const torch::Tensor hidden = torch::relu(ch08::copy_to_tensor_parallel(x, *comm).matmul(a.t()));
  const torch::Tensor y = ch08::reduce_from_tensor_parallel(hidden.matmul(b.t()), *comm);
  const int64_t forward_all_reduces = all_reduces(*comm) - before;
  y.backward(upstream);
  const int64_t backward_all_reduces = all_reduces(*comm) - before - forward_all_reduces;

  INFO("the split pair's output on this rank differs from the unsplit pair's");
  REQUIRE(mpi_test::all_ranks(torch::equal(y.detach(), y_whole.detach())));
  INFO("the gradient of the replicated input x on this rank differs from the unsplit pair's");
  REQUIRE(mpi_test::all_ranks(x.grad().defined() && torch::equal(x.grad(), x_whole.grad())));
  INFO("the gradient of this rank's rows of A differs from the unsplit pair's gradient of those rows");
  REQUIRE(mpi_test::all_ranks(a.grad().defined() && torch::equal(a.grad(), tp_oracle::rows_of(a_whole.grad(), rank, n))));
  INFO("the gradient of this rank's columns of B differs from the unsplit pair's gradient of those columns");
  REQUIRE(mpi_test::all_ranks(b.grad().defined() &&
                              torch::equal(b.grad(), tp_oracle::columns_of(b_whole.grad(), rank, n))));
  INFO("the pair made " << forward_all_reduces << " all-reduce(s) in forward and " << backward_all_reduces
                        << " in backward; the contract is one in each, whatever the number of ranks");
  REQUIRE(mpi_test::all_ranks(forward_all_reduces == 1 && backward_all_reduces == 1));
}

TEST_CASE("ex8.1 f, forward and backward, before a column-split layer", "[ex8.1][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size(), rank = comm->rank();
  CAPTURE(n);
  // A Linear without bias, 7 output features over n ranks: y = x·Aᵀ.
  const torch::Tensor x_whole = leaf(tp_oracle::exact({3, 5}, 0)), a_whole = leaf(tp_oracle::exact({7, 5}, 5));
  const torch::Tensor y_whole = x_whole.matmul(a_whole.t());
  const torch::Tensor upstream = tp_oracle::exact({3, 7}, 6);
  y_whole.backward(upstream);

  const torch::Tensor x = leaf(x_whole), a = leaf(tp_oracle::rows_of(a_whole, rank, n));
  const torch::Tensor y = ch08::copy_to_tensor_parallel(x, *comm).matmul(a.t());
  INFO("this rank's output features, computed from f's output, differ from the unsplit layer's");
  REQUIRE(mpi_test::all_ranks(torch::equal(y.detach(), tp_oracle::columns_of(y_whole.detach(), rank, n))));
  REQUIRE(mpi_test::all_ranks(torch::equal(x.detach(), x_whole.detach())));
  y.backward(tp_oracle::columns_of(upstream, rank, n));  // each rank: the gradient of its own output features
  INFO("after backward, the replicated input x has no gradient on this rank");
  REQUIRE(mpi_test::all_ranks(x.grad().defined()));
  INFO("the gradient of the replicated input x differs between ranks");
  REQUIRE(same_on_every_rank(*comm, x.grad()));
  INFO("the gradient of the replicated input x differs from the unsplit layer's");
  REQUIRE(mpi_test::all_ranks(torch::equal(x.grad(), x_whole.grad())));
  INFO("the gradient of this rank's rows of A differs from the unsplit layer's gradient of those rows");
  REQUIRE(mpi_test::all_ranks(torch::equal(a.grad(), tp_oracle::rows_of(a_whole.grad(), rank, n))));
}

TEST_CASE("ex8.1 g, forward and backward, after a row-split layer", "[ex8.1][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size(), rank = comm->rank();
  CAPTURE(n);
  // A Linear without bias, 7 input features over n ranks: y = h·Bᵀ.
  const torch::Tensor h_whole = leaf(tp_oracle::exact({4, 7}, 7)), b_whole = leaf(tp_oracle::exact({3, 7}, 8));
  const torch::Tensor y_whole = h_whole.matmul(b_whole.t());
  const torch::Tensor upstream = tp_oracle::exact({4, 3}, 9);  // y's gradient, the same on every rank
  y_whole.backward(upstream);

  const torch::Tensor h = leaf(tp_oracle::columns_of(h_whole, rank, n));
  const torch::Tensor b = leaf(tp_oracle::columns_of(b_whole, rank, n));
  const torch::Tensor partial = h.matmul(b.t());
  const torch::Tensor partial_values = partial.detach().clone();
  const torch::Tensor y = ch08::reduce_from_tensor_parallel(partial, *comm);
  INFO("g's output on this rank differs from the unsplit layer's output");
  REQUIRE(mpi_test::all_ranks(torch::equal(y.detach(), y_whole.detach())));
  INFO("g changed the values of its input, which the caller may still use");
  REQUIRE(mpi_test::all_ranks(torch::equal(partial.detach(), partial_values)));
  y.backward(upstream);
  INFO("the gradient of this rank's input features differs from the unsplit layer's gradient of those features");
  REQUIRE(mpi_test::all_ranks(h.grad().defined() && torch::equal(h.grad(), tp_oracle::columns_of(h_whole.grad(), rank, n))));
  INFO("the gradient of this rank's columns of B differs from the unsplit layer's gradient of those columns");
  REQUIRE(mpi_test::all_ranks(b.grad().defined() &&
                              torch::equal(b.grad(), tp_oracle::columns_of(b_whole.grad(), rank, n))));
}
