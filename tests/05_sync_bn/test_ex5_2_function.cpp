// Tests for ex5.2: normalizing with given global statistics, and the backward
// pass, against BatchNorm2d on the concatenated batch. The statistics come
// from the test, not from ex5.1, so ex5.2 can be done and tested on its own.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "sync_bn.hpp"
#include "sync_bn_data.hpp"

using sync_bn_data::relative_error;

TEST_CASE("ex5.2 forward and backward equal BatchNorm2d on the global batch", "[ex5.2][np3]") {
  auto comm = mpi_test::communicator();
  const int rank = comm->rank();
  const int64_t channels = 4;
  for (const auto& split : sync_bn_data::splits(comm->size())) {
    CAPTURE(split.name);
    const torch::Tensor global = sync_bn_data::global_batch(split.total(), channels, 61);
    const torch::Tensor weight = torch::rand({channels}) + 0.5, bias = torch::randn({channels});
    const torch::Tensor upstream = torch::randn(global.sizes());  // the gradient arriving at the output
    const sync_bn_data::Oracle oracle = sync_bn_data::batch_norm_oracle(global, weight, bias, upstream);

    const torch::Tensor x64 = global.to(torch::kFloat64);
    const torch::Tensor mean = x64.mean({0, 2, 3}), var = x64.var({0, 2, 3}, /*unbiased=*/false);
    const int64_t offset = split.offset(rank), count = split.counts[rank];
    torch::Tensor x = global.narrow(0, offset, count).clone().requires_grad_(true);
    torch::Tensor w = weight.clone().requires_grad_(true), b = bias.clone().requires_grad_(true);

    const int64_t calls_before = comm->stats().collectives();
    const torch::Tensor y = ch05::SyncBatchNormFunction::apply(x, w, b, mean, var, split.total() * 6, comm.get(), 1e-5);
    INFO("forward is given the statistics: it must not communicate");
    REQUIRE(mpi_test::all_ranks(comm->stats().collectives() == calls_before));
    INFO("this rank's output: BatchNorm2d's on the global batch, rows [" << offset << ", " << offset + count << ")");
    REQUIRE(mpi_test::all_ranks(y.sizes() == x.sizes() &&
                                relative_error(y.detach(), oracle.output.narrow(0, offset, count)) <= 1e-5));

    auto grads = torch::autograd::grad({(y * upstream.narrow(0, offset, count)).sum()}, {x, w, b});
    const int64_t backward_calls = comm->stats().collectives() - calls_before;
    INFO("backward made " << backward_calls << " collective call(s): it must make exactly one, on every rank");
    REQUIRE(mpi_test::all_ranks(backward_calls == 1));
    INFO("dx: the gradient of every rank's loss with respect to this rank's input (relative error <= 1e-5)");
    REQUIRE(mpi_test::all_ranks(relative_error(grads[0], oracle.grad_input.narrow(0, offset, count)) <= 1e-5));
    // dweight and dbias are each rank's share: their sum over ranks is BatchNorm2d's.
    torch::Tensor summed = torch::stack({grads[1], grads[2]});
    comm->all_reduce(summed, workbook::ReduceOp::Sum);
    INFO("dweight and dbias: this rank's share, which summed over ranks is the global batch's (not all-reduced)");
    REQUIRE(mpi_test::all_ranks(relative_error(summed[0], oracle.grad_weight) <= 1e-5 &&
                                relative_error(summed[1], oracle.grad_bias) <= 1e-5));
  }
}

TEST_CASE("ex5.2 a rank whose loss uses part of the output gets the global batch's gradient", "[ex5.2]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size(), rank = comm->rank();
  const torch::Tensor global = sync_bn_data::global_batch(2 * n, 3, 62);
  // Rank 0's loss uses only channel 0 of its output (the gradient arriving
  // at the others is zero there); every other rank uses all of its output.
  torch::Tensor upstream = torch::ones(global.sizes());
  upstream.narrow(0, 0, 2).narrow(1, 1, 2).zero_();
  const torch::Tensor weight = torch::rand({3}) + 0.5, bias = torch::randn({3});
  const sync_bn_data::Oracle oracle = sync_bn_data::batch_norm_oracle(global, weight, bias, upstream);
  const torch::Tensor x64 = global.to(torch::kFloat64);
  torch::Tensor x = global.narrow(0, 2 * rank, 2).clone().requires_grad_(true);
  const torch::Tensor y = ch05::SyncBatchNormFunction::apply(
      x, weight.clone().requires_grad_(true), bias.clone().requires_grad_(true), x64.mean({0, 2, 3}),
      x64.var({0, 2, 3}, false), 2 * n * 6, comm.get(), 1e-5);
  const torch::Tensor loss = rank == 0 ? y.select(1, 0).sum() : y.sum();
  const torch::Tensor dx = torch::autograd::grad({loss}, {x})[0];
  INFO("dx must still include what the other ranks' losses say about this rank's input");
  REQUIRE(mpi_test::all_ranks(sync_bn_data::relative_error(dx, oracle.grad_input.narrow(0, 2 * rank, 2)) <= 1e-5));
}
