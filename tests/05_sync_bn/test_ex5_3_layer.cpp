// Tests for ex5.3: the SyncBatchNorm2d layer against BatchNorm2d on the
// concatenated batch: outputs, gradients, running statistics, and an eval
// mode that communicates nothing.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "sync_bn.hpp"
#include "sync_bn_data.hpp"

using sync_bn_data::relative_error;

namespace {

// A BatchNorm2d and a SyncBatchNorm2d with the same random weight and bias.
struct Pair {
  torch::nn::BatchNorm2d reference;
  std::shared_ptr<ch05::SyncBatchNorm2dImpl> sync;
};
Pair make_layers(int64_t channels, c10::optional<double> momentum, workbook::Communicator& comm) {
  torch::nn::BatchNormOptions options(channels);
  options.momentum(momentum);
  Pair pair{torch::nn::BatchNorm2d(options), std::make_shared<ch05::SyncBatchNorm2dImpl>(options, comm)};
  torch::NoGradGuard no_grad;
  pair.reference->weight.copy_(torch::rand({channels}) + 0.5);
  pair.reference->bias.copy_(torch::randn({channels}));
  pair.sync->weight.copy_(pair.reference->weight);
  pair.sync->bias.copy_(pair.reference->bias);
  return pair;
}

}  // namespace

TEST_CASE("ex5.3 SyncBatchNorm2d trains like BatchNorm2d on the global batch", "[ex5.3][np3]") {
  auto comm = mpi_test::communicator();
  const int rank = comm->rank();
  for (c10::optional<double> momentum : {c10::optional<double>(0.1), c10::optional<double>()}) {
    for (const auto& split : sync_bn_data::splits(comm->size())) {
      CAPTURE(split.name, momentum.has_value());
      Pair pair = make_layers(4, momentum, *comm);
      const int64_t offset = split.offset(rank), count = split.counts[rank];
      for (int step = 0; step < 2; ++step) {  // two steps: the running statistics accumulate
        CAPTURE(step);
        const torch::Tensor global = sync_bn_data::global_batch(split.total(), 4, 71 + step);
        const torch::Tensor upstream = torch::randn(global.sizes());
        torch::Tensor whole = global.clone().requires_grad_(true);
        const torch::Tensor expected = pair.reference->forward(whole);
        const auto expected_grads = torch::autograd::grad({(expected * upstream).sum()},
                                                          {whole, pair.reference->weight, pair.reference->bias});

        torch::Tensor x = global.narrow(0, offset, count).clone().requires_grad_(true);
        const torch::Tensor y = pair.sync->forward(x);
        const auto grads = torch::autograd::grad({(y * upstream.narrow(0, offset, count)).sum()},
                                                 {x, pair.sync->weight, pair.sync->bias});
        INFO("output and input gradient: BatchNorm2d's on the global batch (relative error <= 1e-5)");
        REQUIRE(mpi_test::all_ranks(relative_error(y.detach(), expected.detach().narrow(0, offset, count)) <= 1e-5));
        REQUIRE(mpi_test::all_ranks(relative_error(grads[0], expected_grads[0].narrow(0, offset, count)) <= 1e-5));
        torch::Tensor summed = torch::stack({grads[1], grads[2]});
        comm->all_reduce(summed, workbook::ReduceOp::Sum);
        INFO("weight and bias get gradients (the layer's own parameters, trained), which summed over ranks are BatchNorm2d's");
        REQUIRE(mpi_test::all_ranks(relative_error(summed[0], expected_grads[1]) <= 1e-5 &&
                                    relative_error(summed[1], expected_grads[2]) <= 1e-5));
        INFO("running statistics: BatchNorm2d's (running_var uses the global UNBIASED variance)");
        REQUIRE(mpi_test::all_ranks(relative_error(pair.sync->running_mean, pair.reference->running_mean) <= 1e-5));
        REQUIRE(mpi_test::all_ranks(relative_error(pair.sync->running_var, pair.reference->running_var) <= 1e-5));
        REQUIRE(mpi_test::all_ranks(pair.sync->num_batches_tracked.item<int64_t>() == step + 1));
      }
    }
  }
}

TEST_CASE("ex5.3 in eval mode SyncBatchNorm2d uses the running statistics and communicates nothing", "[ex5.3]") {
  auto comm = mpi_test::communicator();
  Pair pair = make_layers(3, 0.1, *comm);
  {
    torch::NoGradGuard no_grad;
    pair.reference->running_mean.copy_(torch::randn({3}));
    pair.reference->running_var.copy_(torch::rand({3}) + 0.5);
    pair.sync->running_mean.copy_(pair.reference->running_mean);
    pair.sync->running_var.copy_(pair.reference->running_var);
  }
  pair.reference->eval();
  pair.sync->eval();
  // Different batch sizes on different ranks, and no rank waiting for another.
  torch::Tensor x = torch::randn({1 + comm->rank(), 3, 5, 5}, torch::requires_grad());
  const int64_t calls_before = comm->stats().collectives();
  const torch::Tensor y = pair.sync->forward(x);
  const torch::Tensor dx = torch::autograd::grad({y.sum()}, {x})[0];
  const int64_t calls = comm->stats().collectives() - calls_before;
  INFO("eval mode made " << calls << " collective call(s): it must make none");
  REQUIRE(mpi_test::all_ranks(calls == 0));
  REQUIRE(mpi_test::all_ranks(relative_error(y.detach(), pair.reference->forward(x).detach()) <= 1e-6));
  const torch::Tensor before = pair.sync->running_mean.clone();
  pair.sync->forward(x);
  INFO("eval mode must leave the running statistics alone");
  REQUIRE(mpi_test::all_ranks(torch::equal(before, pair.sync->running_mean) &&
                              pair.sync->num_batches_tracked.item<int64_t>() == 0));
}
