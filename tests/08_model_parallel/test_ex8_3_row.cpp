// Tests for ex8.3: the row-parallel Linear against the whole layer, on exact
// data (bit for bit), at widths that do not divide between the ranks.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "tensor_parallel.hpp"
#include "tp_oracles.hpp"

TEST_CASE("ex8.3 RowParallelLinear: the whole output on every rank, bias once, bit for bit", "[ex8.3][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size(), rank = comm->rank();
  for (const auto& [in, out] : {std::pair<int64_t, int64_t>{7, 6}, {4, 5}, {3, 3}}) {
    CAPTURE(in, out, n);
    torch::nn::Linear whole = tp_oracle::exact_linear(in, out);
    ch08::RowParallelLinear layer(whole, *comm);
    INFO("weight: columns [begin, begin + size) of the whole [out, in]; bias: all of it");
    REQUIRE(mpi_test::all_ranks(layer->inputs.begin == ch08::shard_of(in, rank, n).begin &&
                                layer->inputs.size == ch08::shard_of(in, rank, n).size));
    REQUIRE(mpi_test::all_ranks(layer->weight.sizes() == tp_oracle::columns_of(whole->weight, rank, n).sizes()));
    REQUIRE(mpi_test::all_ranks(torch::equal(layer->weight, tp_oracle::columns_of(whole->weight, rank, n)) &&
                                torch::equal(layer->bias, whole->bias)));
    REQUIRE(mpi_test::all_ranks(layer->parameters().size() == 2 && layer->bias.data_ptr() != whole->bias.data_ptr() &&
                                layer->weight.data_ptr() != whole->weight.data_ptr()));

    const torch::Tensor x_whole = tp_oracle::exact({5, in}, 5).requires_grad_(true);
    const torch::Tensor y_whole = whole(x_whole);
    const torch::Tensor upstream = tp_oracle::exact({5, out}, 6);
    y_whole.backward(upstream);

    const torch::Tensor x = tp_oracle::columns_of(x_whole.detach(), rank, n).clone().requires_grad_(true);
    const int64_t before = comm->stats().count(workbook::CommOp::AllReduce);
    const torch::Tensor y = layer(x);
    const int64_t forward_all_reduces = comm->stats().count(workbook::CommOp::AllReduce) - before;
    INFO("forward: the output on this rank differs from the unsplit layer's output, bias included");
    REQUIRE(mpi_test::all_ranks(torch::equal(y.detach(), y_whole.detach())));
    INFO("forward made " << forward_all_reduces << " all-reduce(s); a split pair makes one in "
                            "forward, whatever the number of ranks");
    REQUIRE(mpi_test::all_ranks(forward_all_reduces == 1));
    y.backward(upstream);
    const int64_t backward_all_reduces = comm->stats().count(workbook::CommOp::AllReduce) - before - 1;
    INFO("backward made " << backward_all_reduces << " all-reduce(s); the gradients of this rank's input "
                             "features and weights need only y's gradient, which every rank holds");
    REQUIRE(mpi_test::all_ranks(backward_all_reduces == 0));
    INFO("backward: the input's gradient differs from the unsplit layer's, this rank's input features");
    REQUIRE(mpi_test::all_ranks(x.grad().defined() && torch::equal(x.grad(), tp_oracle::columns_of(x_whole.grad(), rank, n))));
    INFO("backward: the weight's gradient differs from the unsplit layer's, this rank's columns, or the "
         "bias's from the unsplit layer's bias gradient");
    REQUIRE(mpi_test::all_ranks(torch::equal(layer->weight.grad(), tp_oracle::columns_of(whole->weight.grad(), rank, n))));
    REQUIRE(mpi_test::all_ranks(torch::equal(layer->bias.grad(), whole->bias.grad())));
  }
}

TEST_CASE("ex8.3 RowParallelLinear refuses an input that is not this rank's width", "[ex8.3]") {
  auto comm = mpi_test::communicator();
  ch08::RowParallelLinear layer(tp_oracle::exact_linear(8, 2), *comm);
  const int64_t width = ch08::shard_of(8, comm->rank(), comm->size()).size;
  INFO("given code checks the width; the layer must be built (ex8.3) for it to run");
  REQUIRE(mpi_test::all_ranks(layer->weight.size(1) == width));
  REQUIRE_THROWS_WITH(layer(torch::zeros({2, 8 + 1})), Catch::Matchers::ContainsSubstring("input features"));
}
