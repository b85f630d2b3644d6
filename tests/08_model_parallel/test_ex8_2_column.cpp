// Tests for ex8.2: the column-parallel Linear against the whole layer, on
// exact data (bit for bit), at widths that do not divide between the ranks.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "tensor_parallel.hpp"
#include "tp_oracles.hpp"

TEST_CASE("ex8.2 shard_of gives the first total % n ranks one more feature (given)", "[ex8.2]") {
  // Given code; tied to ex8.2 through its layer, which must use it.
  CHECK(ch08::shard_of(7, 0, 3).begin == 0);
  CHECK(ch08::shard_of(7, 0, 3).size == 3);
  CHECK(ch08::shard_of(7, 1, 3).begin == 3);
  CHECK(ch08::shard_of(7, 2, 3).begin == 5);
  CHECK(ch08::shard_of(7, 2, 3).size == 2);
  auto comm = mpi_test::communicator();
  const ch08::ColumnParallelLinear layer(tp_oracle::exact_linear(4, 7), *comm);
  const ch08::Shard expected = ch08::shard_of(7, comm->rank(), comm->size());
  INFO("the layer's `outputs` is shard_of(out_features, rank, ranks)");
  REQUIRE(mpi_test::all_ranks(layer->outputs.begin == expected.begin && layer->outputs.size == expected.size));
}

TEST_CASE("ex8.2 ColumnParallelLinear: this rank's output features, bit for bit, forward and backward", "[ex8.2][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size(), rank = comm->rank();
  for (const auto& [in, out] : {std::pair<int64_t, int64_t>{6, 7}, {5, 4}, {3, 3}}) {
    CAPTURE(in, out, n);
    torch::nn::Linear whole = tp_oracle::exact_linear(in, out);
    ch08::ColumnParallelLinear layer(whole, *comm);
    INFO("weight: rows [begin, begin + size) of the whole [out, in]; bias: the same elements");
    REQUIRE(mpi_test::all_ranks(layer->weight.sizes() == tp_oracle::rows_of(whole->weight, rank, n).sizes()));
    REQUIRE(mpi_test::all_ranks(torch::equal(layer->weight, tp_oracle::rows_of(whole->weight, rank, n)) &&
                                torch::equal(layer->bias, tp_oracle::rows_of(whole->bias.view({-1, 1}), rank, n).view(-1))));
    INFO("the parameters are the layer's own copies, registered for the optimizer");
    REQUIRE(mpi_test::all_ranks(layer->parameters().size() == 2 && layer->weight.data_ptr() != whole->weight.data_ptr()));

    const torch::Tensor x_whole = tp_oracle::exact({5, in}, 3).requires_grad_(true);
    const torch::Tensor y_whole = whole(x_whole);
    const torch::Tensor upstream = tp_oracle::exact({5, out}, 4);  // the whole output's gradient
    y_whole.backward(upstream);

    const torch::Tensor x = x_whole.detach().clone().requires_grad_(true);
    const int64_t before = comm->stats().count(workbook::CommOp::AllReduce);
    const torch::Tensor y = layer(x);
    const int64_t forward_all_reduces = comm->stats().count(workbook::CommOp::AllReduce) - before;
    INFO("forward: this rank's output differs from its output features of the unsplit layer's output");
    REQUIRE(mpi_test::all_ranks(torch::equal(y.detach(), tp_oracle::columns_of(y_whole.detach(), rank, n))));
    INFO("forward made " << forward_all_reduces << " all-reduce(s); this rank's output features need only "
                            "the input, which every rank holds");
    REQUIRE(mpi_test::all_ranks(forward_all_reduces == 0));
    y.backward(tp_oracle::columns_of(upstream, rank, n));
    const int64_t backward_all_reduces = comm->stats().count(workbook::CommOp::AllReduce) - before;
    INFO("backward: the input's gradient on this rank differs from the unsplit layer's (each rank was given "
         "the gradient of its own output features only; the input's must still be the whole layer's)");
    REQUIRE(mpi_test::all_ranks(x.grad().defined() && torch::equal(x.grad(), x_whole.grad())));
    INFO("backward made " << backward_all_reduces << " all-reduce(s); a split pair makes one in "
                             "backward, whatever the number of ranks");
    REQUIRE(mpi_test::all_ranks(backward_all_reduces == 1));
    INFO("backward: the weight's or the bias's gradient differs from the unsplit layer's, this rank's rows");
    REQUIRE(mpi_test::all_ranks(torch::equal(layer->weight.grad(), tp_oracle::rows_of(whole->weight.grad(), rank, n))));
    REQUIRE(mpi_test::all_ranks(
        torch::equal(layer->bias.grad(), tp_oracle::rows_of(whole->bias.grad().view({-1, 1}), rank, n).view(-1))));
  }
}
