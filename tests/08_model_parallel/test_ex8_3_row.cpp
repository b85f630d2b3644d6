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
    INFO("forward: the whole output on every rank (the ranks' products summed by g: one all-reduce), "
         "the bias added once, after the sum");
    REQUIRE(mpi_test::all_ranks(torch::equal(y.detach(), y_whole.detach())));
    REQUIRE(mpi_test::all_ranks(comm->stats().count(workbook::CommOp::AllReduce) == before + 1));
    y.backward(upstream);
    INFO("backward: no communication; the input's gradient is the whole layer's columns for this rank");
    REQUIRE(mpi_test::all_ranks(comm->stats().count(workbook::CommOp::AllReduce) == before + 1));
    REQUIRE(mpi_test::all_ranks(x.grad().defined() && torch::equal(x.grad(), tp_oracle::columns_of(x_whole.grad(), rank, n))));
    INFO("backward: the weight's gradient is the whole layer's columns for this rank, the bias's the whole "
         "bias's (a bias split into n parts, each added before the sum, gets 1/n of it)");
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
