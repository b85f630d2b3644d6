// Tests for ex6.4: K micro-batches on every rank make one step equal to a
// single process's step on the whole global batch, with one all-reduce.
#include "catch2_compat.hpp"

#include "accumulation.hpp"
#include "accumulation_data.hpp"
#include "host_reads.hpp"
#include "mpi_test.hpp"
#include "workbook/errors.hpp"

using accumulation_data::share;

TEST_CASE("ex6.4 K micro-steps of batch B equal one step of batch K·B, with one all-reduce", "[ex6.4][np3]") {
  auto comm = mpi_test::communicator();
  const int ranks = comm->size();
  const double lr = 0.5;
  for (const int64_t k : {1, 4}) {
    CAPTURE(k);
    const int64_t micro = 3, global = micro * k * ranks;
    const auto batches = accumulation_data::global_batches(3, global, 72);
    auto model = accumulation_data::toy_model();
    auto reference = oracle::copy_of(*model);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(lr));
    for (size_t step = 0; step < batches.size(); ++step) {
      CAPTURE(step);
      const std::vector<ch03::Batch> micro_batches = ch06::split_batch(share(batches[step], comm->rank(), ranks), micro);
      REQUIRE(static_cast<int64_t>(micro_batches.size()) == k);
      const int64_t calls_before = comm->stats().collectives();
      const torch::Tensor loss = ch06::accumulated_train_step(*model, optimizer, micro_batches, *comm);
      const int64_t calls = comm->stats().collectives() - calls_before;
      INFO("collectives in one accumulated step: " << calls << "; the contract allows exactly one, whatever K");
      REQUIRE(mpi_test::all_ranks(calls == 1));
      // This rank's mean loss over its micro-batches, before the step.
      torch::Tensor expected_loss;
      {
        auto before = oracle::copy_of(*reference);
        const ch03::Batch mine = share(batches[step], comm->rank(), ranks);
        torch::NoGradGuard no_grad;
        expected_loss = torch::nn::functional::cross_entropy(before->forward(mine.images), mine.labels);
      }
      oracle::sgd_step(*reference, batches[step].images, batches[step].labels, lr);
      const double difference = oracle::max_parameter_difference(*model, *reference);
      INFO("largest parameter difference from one SGD step on the mean loss over the whole global batch (every "
           "rank's micro-batches together): " << difference << "; the step must equal that one to within 1e-5");
      REQUIRE(mpi_test::all_ranks(difference <= 1e-5));
      INFO("the returned loss: this rank's mean over its micro-batches, " << loss << " vs " << expected_loss);
      REQUIRE(mpi_test::all_ranks(loss.numel() == 1 && std::abs(loss.item<double>() - expected_loss.item<double>()) <= 1e-5));
    }
  }
}

TEST_CASE("ex6.4 with a real optimizer: accumulated steps equal steps on the whole batch", "[ex6.4]") {
  // Adam's step hardly depends on the gradient's scale, so this one checks
  // the other half: one optimizer step per global batch (not one per
  // micro-batch), and the optimizer's state advanced once.
  auto comm = mpi_test::communicator();
  const int ranks = comm->size();
  const int64_t micro = 2, k = 3, global = micro * k * ranks;
  // In float64: Adam divides by √v + ε, so where a gradient element is near
  // zero float32's rounding of the micro-batch sums would show above 1e-5.
  auto batches = accumulation_data::global_batches(4, global, 73);
  for (ch03::Batch& batch : batches) batch.images = batch.images.to(torch::kFloat64);
  auto model = accumulation_data::toy_model();
  model->to(torch::kFloat64);
  auto reference = oracle::copy_of(*model);
  reference->to(torch::kFloat64);
  workbook::copy_state(*model, *reference);  // again, now without a trip through float32
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));
  torch::optim::Adam reference_optimizer(reference->parameters(), torch::optim::AdamOptions(1e-2));
  for (const ch03::Batch& batch : batches) {
    ch06::accumulated_train_step(*model, optimizer, ch06::split_batch(share(batch, comm->rank(), ranks), micro), *comm);
    reference_optimizer.zero_grad();
    torch::nn::functional::cross_entropy(reference->forward(batch.images), batch.labels).backward();
    reference_optimizer.step();
  }
  const double difference = oracle::max_parameter_difference(*model, *reference);
  INFO("largest parameter difference from 4 Adam steps on the whole global batch: " << difference);
  REQUIRE(mpi_test::all_ranks(difference <= 1e-5));
}

TEST_CASE("ex6.4 the micro-batches' losses stay on the device: no host read per micro-batch", "[ex6.4]") {
  auto comm = mpi_test::communicator();
  auto reads_with = [&](int64_t k) {
    const auto batches = accumulation_data::global_batches(1, 2 * k * comm->size(), 74);
    auto model = accumulation_data::toy_model();
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
    const auto micro_batches = ch06::split_batch(share(batches[0], comm->rank(), comm->size()), 2);
    host_reads::Counter counter;
    ch06::accumulated_train_step(*model, optimizer, micro_batches, *comm);
    return counter.reads();
  };
  const int64_t reads_2 = reads_with(2), reads_6 = reads_with(6);
  INFO("a step of 2 micro-batches read a value on the host " << reads_2 << " times, one of 6 " << reads_6
       << " times: the host reads of one step must not grow with the number of micro-batches");
  REQUIRE(mpi_test::all_ranks(reads_6 == reads_2));
}

TEST_CASE("ex6.4 micro-batches of different sizes are refused", "[ex6.4]") {
  auto comm = mpi_test::communicator();
  auto model = accumulation_data::toy_model();
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  const auto batches = accumulation_data::global_batches(1, 5, 74);
  const std::vector<ch03::Batch> uneven = ch06::split_batch(batches[0], 3);  // 3 and 2
  bool refused = false;
  std::string message;
  try {
    ch06::accumulated_train_step(*model, optimizer, uneven, *comm);
  } catch (const workbook::UserError& e) {
    refused = true;
    message = e.what();
  }
  INFO("micro-batches of 3 and 2 samples must be refused with a workbook::UserError; "
       << (refused ? "got: " + message : std::string("none was thrown")));
  REQUIRE(mpi_test::all_ranks(refused));
}
