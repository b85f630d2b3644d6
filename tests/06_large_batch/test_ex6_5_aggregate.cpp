// Tests for ex6.5: with aggregation frequency k the ranks communicate once
// every k batches, and each round is one step on all of its batches.
#include <catch2/catch.hpp>

#include "accumulation.hpp"
#include "accumulation_data.hpp"
#include "mpi_test.hpp"
#include "workbook/errors.hpp"

using accumulation_data::share;

TEST_CASE("ex6.5 frequency k: one all-reduce and one step every k batches", "[ex6.5][np3]") {
  auto comm = mpi_test::communicator();
  const int ranks = comm->size();
  const double lr = 0.5;
  for (const int64_t k : {1, 3}) {
    CAPTURE(k);
    const int64_t per_rank = 2;
    // 2 rounds of k batches; round r's global batch is the k batches together.
    const auto batches = accumulation_data::global_batches(static_cast<int>(2 * k), per_rank * ranks, 75);
    auto model = accumulation_data::toy_model();
    auto reference = oracle::copy_of(*model);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(lr));
    ch06::GradientAggregator aggregator(*model, optimizer, *comm, k);
    for (int64_t round = 0; round < 2; ++round) {
      CAPTURE(round);
      std::vector<torch::Tensor> round_images, round_labels;
      for (int64_t i = 0; i < k; ++i) {
        const ch03::Batch& global = batches[static_cast<size_t>(round * k + i)];
        round_images.push_back(global.images);
        round_labels.push_back(global.labels);
        const int64_t calls_before = comm->stats().collectives();
        const bool stepped = aggregator.add(share(global, comm->rank(), ranks));
        const int64_t calls = comm->stats().collectives() - calls_before;
        const bool last = i == k - 1;
        INFO("batch " << i + 1 << " of " << k << ": stepped " << stepped << ", collectives " << calls
                      << " (expected " << (last ? "a step and one all-reduce" : "neither") << ")");
        REQUIRE(mpi_test::all_ranks(stepped == last && calls == (last ? 1 : 0)));
        REQUIRE(mpi_test::all_ranks(aggregator.pending() == (last ? 0 : i + 1)));
      }
      oracle::sgd_step(*reference, torch::cat(round_images), torch::cat(round_labels), lr);
      const double difference = oracle::max_parameter_difference(*model, *reference);
      INFO("largest parameter difference from one SGD step on the round's " << k << " global batches together: "
           << difference << " (gradients left over from the last round, or a missing 1/k, show here)");
      REQUIRE(mpi_test::all_ranks(difference <= 1e-5));
    }
  }
}

TEST_CASE("ex6.5 between steps nothing moves: the weights change only on the k-th batch", "[ex6.5]") {
  auto comm = mpi_test::communicator();
  auto model = accumulation_data::toy_model();
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.5));
  ch06::GradientAggregator aggregator(*model, optimizer, *comm, 4);
  const auto batches = accumulation_data::global_batches(4, 2 * comm->size(), 76);
  const torch::Tensor before = model->fc1->weight.clone();
  // The weights stay put until the 4th batch, so the round's losses are the
  // initial model's on each of this rank's batches.
  double expected_loss = 0.0;
  {
    auto initial = oracle::copy_of(*model);
    torch::NoGradGuard no_grad;
    for (const ch03::Batch& global : batches) {
      const ch03::Batch mine = share(global, comm->rank(), comm->size());
      expected_loss += torch::nn::functional::cross_entropy(initial->forward(mine.images), mine.labels).item<double>() / 4;
    }
  }
  for (size_t i = 0; i < 3; ++i) aggregator.add(share(batches[i], comm->rank(), comm->size()));
  INFO("after 3 of 4 batches the optimizer has not stepped");
  REQUIRE(mpi_test::all_ranks(torch::equal(model->fc1->weight, before)));
  aggregator.add(share(batches[3], comm->rank(), comm->size()));
  REQUIRE(mpi_test::all_ranks(!torch::equal(model->fc1->weight, before)));
  INFO("last_loss: this rank's mean loss over the round's 4 batches, " << aggregator.last_loss() << " vs "
                                                                         << expected_loss);
  REQUIRE(mpi_test::all_ranks(std::abs(aggregator.last_loss() - expected_loss) <= 1e-5));
}
