// Tests for ex6.5: with aggregation frequency k the ranks communicate once
// every k batches, and each round is one step on all of its batches.
#include "catch2_compat.hpp"

#include <algorithm>

#include "accumulation.hpp"
#include "accumulation_data.hpp"
#include "host_reads.hpp"
#include "mpi_test.hpp"
#include "oracles.hpp"
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
      INFO("largest parameter difference from one SGD step on the mean loss over the round's " << k
           << " global batches together: " << difference << "; the round's step must equal that one to within 1e-5");
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
  {
    INFO("after 3 of 4 batches fc1's weight changed on some rank; until the round's 4th batch the weights must stay "
         "as they are");
    REQUIRE(mpi_test::all_ranks(torch::equal(model->fc1->weight, before)));
  }
  aggregator.add(share(batches[3], comm->rank(), comm->size()));
  {
    INFO("after the round's 4th batch fc1's weight is unchanged on some rank; the round's last add() must step");
    REQUIRE(mpi_test::all_ranks(!torch::equal(model->fc1->weight, before)));
  }
  const double last_loss = aggregator.last_loss().item<double>();
  INFO("last_loss: this rank's mean loss over the round's 4 batches, " << last_loss << " vs " << expected_loss);
  REQUIRE(mpi_test::all_ranks(std::abs(last_loss - expected_loss) <= 1e-5));
}

TEST_CASE("ex6.5 the batches' losses stay on the device: no host read per batch", "[ex6.5]") {
  auto comm = mpi_test::communicator();
  auto reads_in_round_of = [&](int64_t k) {
    const auto batches = accumulation_data::global_batches(static_cast<int>(k), 2 * comm->size(), 77);
    auto model = accumulation_data::toy_model();
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
    ch06::GradientAggregator aggregator(*model, optimizer, *comm, k);
    host_reads::Counter counter;
    for (const ch03::Batch& global : batches) aggregator.add(share(global, comm->rank(), comm->size()));
    return counter.reads();
  };
  const int64_t reads_2 = reads_in_round_of(2), reads_6 = reads_in_round_of(6);
  INFO("a round of 2 batches read a value on the host " << reads_2 << " times, one of 6 " << reads_6
       << " times: the host reads of a round must not grow with the number of batches in it");
  REQUIRE(mpi_test::all_ranks(reads_6 == reads_2));
}

TEST_CASE("ex6.5 the observer sees this rank's own gradient, once per round, before the all-reduce", "[ex6.5][np3]") {
  auto comm = mpi_test::communicator();
  const int64_t k = 3;
  const auto batches = accumulation_data::global_batches(static_cast<int>(2 * k), 2 * comm->size(), 78);
  auto model = accumulation_data::toy_model();
  auto reference = oracle::copy_of(*model);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  ch06::GradientAggregator aggregator(*model, optimizer, *comm, k);
  std::vector<torch::Tensor> seen;  // fc1's gradient at each call of the observer
  aggregator.observe_local_gradients([&](workbook::Classifier& m) { seen.push_back(m.parameters()[0].grad().clone()); });
  for (int64_t i = 0; i < k; ++i) {
    aggregator.add(share(batches[static_cast<size_t>(i)], comm->rank(), comm->size()));
    INFO("after " << i + 1 << " of " << k << " batches the observer has been called " << seen.size() << " times");
    REQUIRE(mpi_test::all_ranks(seen.size() == (i + 1 == k ? 1u : 0u)));
  }
  // This rank's own mean gradient over its k batches, from the same weights.
  std::vector<torch::Tensor> mine_images, mine_labels;
  for (int64_t i = 0; i < k; ++i) {
    const ch03::Batch mine = share(batches[static_cast<size_t>(i)], comm->rank(), comm->size());
    mine_images.push_back(mine.images);
    mine_labels.push_back(mine.labels);
  }
  torch::nn::functional::cross_entropy(reference->forward(torch::cat(mine_images)), torch::cat(mine_labels)).backward();
  const torch::Tensor expected = reference->parameters()[0].grad();
  INFO("the gradient the observer saw differs from this rank's own mean gradient over its " << k << " batches by up "
       "to " << (seen.front() - expected).abs().max().item<double>() << "; the contract: the observer sees this "
       "rank's gradient of the round, before the ranks' gradients are averaged");
  REQUIRE(mpi_test::all_ranks(torch::allclose(seen.front(), expected, 1e-5, 1e-6)));
}

TEST_CASE("ex6.5 when a round's last add() returns, .grad holds the gradient averaged over ranks", "[ex6.5][np3]") {
  // ch06_train --noise-scale reads .grad right after add() returns, as the
  // gradient the optimizer stepped with: the mean over every rank of the
  // round's gradient.
  auto comm = mpi_test::communicator();
  const int64_t k = 2;
  const auto batches = accumulation_data::global_batches(static_cast<int>(2 * k), 2 * comm->size(), 79);
  auto model = accumulation_data::toy_model();
  auto reference = oracle::copy_of(*model);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  ch06::GradientAggregator aggregator(*model, optimizer, *comm, k);
  torch::optim::SGD reference_optimizer(reference->parameters(), torch::optim::SGDOptions(0.1));
  for (int64_t round = 0; round < 2; ++round) {
    CAPTURE(round);
    std::vector<torch::Tensor> images, labels;
    for (int64_t i = 0; i < k; ++i) {
      const ch03::Batch& global = batches[static_cast<size_t>(round * k + i)];
      images.push_back(global.images);
      labels.push_back(global.labels);
      aggregator.add(share(global, comm->rank(), comm->size()));
    }
    // The oracle: the gradient of the mean loss over the round's global batches, before the step.
    reference_optimizer.zero_grad();
    torch::nn::functional::cross_entropy(reference->forward(torch::cat(images)), torch::cat(labels)).backward();
    const std::vector<torch::Tensor> got = model->parameters(), expected = reference->parameters();
    bool all_defined = true;
    double difference = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (!got[i].grad().defined()) {
        all_defined = false;
        continue;
      }
      difference = std::max(difference, (got[i].grad() - expected[i].grad()).abs().max().item<double>());
    }
    INFO("after the round's last add() returned, " << (all_defined ? "" : "some parameter's .grad is undefined and ")
         << "the largest difference of .grad from the gradient averaged over every rank's batches of the round is "
         << difference << ": when the round's last add() returns, .grad must hold the gradient the step used, to "
         "within 1e-5");
    REQUIRE(mpi_test::all_ranks(all_defined && difference <= 1e-5));
    reference_optimizer.step();
  }
}
