// Tests for ex8.4: FashionCNN split over the ranks, against the whole
// FashionCNN in one process without dropout, and with dropout against the
// same split model on one rank, in float64 (the split sums round
// differently: within 1e-9 here, where float32 would give about 1e-6).
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "tensor_parallel.hpp"
#include "tp_oracles.hpp"

namespace {

constexpr double kTolerance = 1e-9;

std::shared_ptr<workbook::FashionCNN> whole_model(uint64_t seed) {
  torch::manual_seed(seed);  // the same on every rank
  auto model = std::make_shared<workbook::FashionCNN>();
  model->to(torch::kFloat64);
  return model;
}

torch::Tensor images_for(int64_t step, int64_t count) {
  torch::manual_seed(100 + static_cast<uint64_t>(step));
  return torch::rand({count, 1, 28, 28}, torch::kFloat64);
}
torch::Tensor labels_for(int64_t step, int64_t count) { return torch::arange(count, torch::kInt64).add(step) % 10; }

}  // namespace

TEST_CASE("ex8.4 TensorParallelFashionCNN holds its part of fc1 and fc2 and a copy of the rest", "[ex8.4][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size(), rank = comm->rank();
  auto whole = whole_model(1);
  ch08::TensorParallelFashionCNN model(*whole, *comm);
  INFO("fc1 column-parallel (its rows of 600 output features), fc2 row-parallel (the same 600 as inputs)");
  REQUIRE(mpi_test::all_ranks(model.fc1 && model.fc2 && model.fc3));
  REQUIRE(mpi_test::all_ranks(torch::equal(model.fc1->weight, tp_oracle::rows_of(whole->fc1->weight, rank, n))));
  REQUIRE(mpi_test::all_ranks(torch::equal(model.fc2->weight, tp_oracle::columns_of(whole->fc2->weight, rank, n))));
  REQUIRE(mpi_test::all_ranks(torch::equal(model.fc3->weight, whole->fc3->weight)));
  const int64_t pair = 2304 * 600 + 600 + 600 * 120;  // split: fc1's weight and bias, fc2's weight
  const int64_t held = workbook::count_parameters(model);
  const int64_t expected = workbook::count_parameters(*whole) - pair + ch08::shard_of(600, rank, n).size * (2304 + 1 + 120);
  INFO("parameters on this rank: " << held << ", expected " << expected << " (the whole model has "
                                   << workbook::count_parameters(*whole) << ")");
  REQUIRE(mpi_test::all_ranks(held == expected));
}

TEST_CASE("ex8.4 without dropout, outputs, gradients and weights after steps equal the whole FashionCNN's",
          "[ex8.4][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size(), rank = comm->rank();
  const double p = 0.0;
  CAPTURE(n);
  auto whole = whole_model(2);
  ch08::TensorParallelFashionCNN model(*whole, *comm, p, /*dropout_seed=*/77);
  torch::optim::SGD whole_sgd(whole->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::SGD sgd(model.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int64_t step = 0; step < 3; ++step) {
    CAPTURE(step);
    const torch::Tensor images = images_for(step, 6), labels = labels_for(step, 6);
    whole_sgd.zero_grad();
    const torch::Tensor whole_logits = tp_oracle::fashion_cnn_forward(*whole, images, torch::Tensor());
    torch::nn::functional::cross_entropy(whole_logits, labels).backward();
    whole_sgd.step();

    sgd.zero_grad();
    const int64_t before = comm->stats().count(workbook::CommOp::AllReduce);
    const torch::Tensor logits = model.forward(images);
    const int64_t in_forward = comm->stats().count(workbook::CommOp::AllReduce) - before;
    torch::nn::functional::cross_entropy(logits, labels).backward();
    const int64_t in_backward = comm->stats().count(workbook::CommOp::AllReduce) - before - in_forward;
    INFO("logits differ from the whole model's, without dropout (largest difference "
         << tp_oracle::max_difference(logits, whole_logits) << ")");
    REQUIRE(mpi_test::all_ranks(tp_oracle::max_difference(logits, whole_logits) < kTolerance));
    INFO("one all-reduce in forward (fc2's g) and one in backward (fc1's f): got " << in_forward << " and " << in_backward);
    REQUIRE(mpi_test::all_ranks(in_forward == 1 && in_backward == 1));
    INFO("gradients: fc1's rows and fc2's columns of the whole model's, the replicated layers' whole");
    REQUIRE(mpi_test::all_ranks(
        tp_oracle::max_difference(model.fc1->weight.grad(), tp_oracle::rows_of(whole->fc1->weight.grad(), rank, n)) < kTolerance &&
        tp_oracle::max_difference(model.fc2->weight.grad(), tp_oracle::columns_of(whole->fc2->weight.grad(), rank, n)) < kTolerance &&
        tp_oracle::max_difference(model.fc2->bias.grad(), whole->fc2->bias.grad()) < kTolerance &&
        tp_oracle::max_difference(model.conv1->weight.grad(), whole->conv1->weight.grad()) < kTolerance));
    sgd.step();
    INFO("weights after the step: the whole model's parts");
    REQUIRE(mpi_test::all_ranks(
        tp_oracle::max_difference(model.fc1->weight, tp_oracle::rows_of(whole->fc1->weight, rank, n)) < kTolerance &&
        tp_oracle::max_difference(model.fc1->bias, tp_oracle::rows_of(whole->fc1->bias.view({-1, 1}), rank, n).view(-1)) < kTolerance &&
        tp_oracle::max_difference(model.fc2->weight, tp_oracle::columns_of(whole->fc2->weight, rank, n)) < kTolerance &&
        tp_oracle::max_difference(model.fc3->weight, whole->fc3->weight) < kTolerance &&
        tp_oracle::max_difference(model.conv2->weight, whole->conv2->weight) < kTolerance &&
        tp_oracle::max_difference(model.bn2->running_mean, whole->named_buffers()["bn2.running_mean"]) < kTolerance));
  }
}

TEST_CASE("ex8.4 with dropout, the split model is one dropout network, whatever the number of ranks", "[ex8.4][np3]") {
  // The same model split over every rank and kept whole on each rank alone
  // (a group of one), from the same dropout seed: the split model's masks,
  // and so its training, must be the one-rank model's.
  auto comm = mpi_test::communicator();
  const int n = comm->size(), rank = comm->rank();
  auto alone = comm->split(rank, 0, "alone");
  const double p = 0.5;
  auto whole = whole_model(2);
  ch08::TensorParallelFashionCNN split(*whole, *comm, p, /*dropout_seed=*/77);
  ch08::TensorParallelFashionCNN single(*whole, *alone, p, /*dropout_seed=*/77);
  const ch08::Shard columns = split.fc1->outputs;
  {
    ch08::TensorParallelFashionCNN dropping(*whole, *comm, p, /*dropout_seed=*/79), without(*whole, *comm, 0.0);
    const torch::Tensor images = images_for(0, 6);
    const bool same = torch::allclose(dropping.forward(images), without.forward(images));
    INFO("in training mode at p = 0.5, forward gives the logits of the same model without dropout: fc1's features "
         "are not dropped");
    REQUIRE(mpi_test::all_ranks(!same));
  }
  torch::Tensor previous;
  for (int call = 0; call < 3; ++call) {
    CAPTURE(call);
    const torch::Tensor mask = single.dropout(torch::ones({8, 600}, torch::kFloat64));
    const torch::Tensor mine = split.dropout(torch::ones({8, columns.size}, torch::kFloat64));
    const int64_t kept = mask.ne(0).sum().item<int64_t>();
    INFO("dropout(ones) on one rank, p = 0.5: every entry must be 0 or 1 / (1 - p) = 2; " << kept << " of 4800 kept");
    REQUIRE(mpi_test::all_ranks(torch::logical_or(mask.eq(0), mask.eq(2)).all().item<bool>()));
    REQUIRE(mpi_test::all_ranks(kept > 2000 && kept < 2800));
    INFO("dropout's mask for this rank's columns [" << columns.begin << ", " << columns.begin + columns.size
         << ") differs from the one-rank model's mask for the same columns: the split model's dropout changes with "
            "the number of ranks");
    REQUIRE(mpi_test::all_ranks(torch::equal(mine, mask.narrow(1, columns.begin, columns.size))));
    INFO("the mask did not change from one forward to the next");
    REQUIRE(mpi_test::all_ranks(!previous.defined() || !torch::equal(mask, previous)));
    previous = mask;
  }

  // Training with dropout: the split model's parts of the one-rank model's weights after each step.
  ch08::TensorParallelFashionCNN split_trained(*whole, *comm, p, /*dropout_seed=*/78);
  ch08::TensorParallelFashionCNN single_trained(*whole, *alone, p, /*dropout_seed=*/78);
  torch::optim::SGD sgd(split_trained.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::SGD single_sgd(single_trained.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int64_t step = 0; step < 3; ++step) {
    CAPTURE(step);
    const torch::Tensor images = images_for(step, 6), labels = labels_for(step, 6);
    for (auto [model, optimizer] : {std::pair{&split_trained, &sgd}, std::pair{&single_trained, &single_sgd}}) {
      optimizer->zero_grad();
      torch::nn::functional::cross_entropy(model->forward(images), labels).backward();
      optimizer->step();
    }
    INFO("with dropout, the split model's weights after the step are not its parts of the one-rank model's");
    REQUIRE(mpi_test::all_ranks(
        tp_oracle::max_difference(split_trained.fc1->weight, tp_oracle::rows_of(single_trained.fc1->weight, rank, n)) <
            kTolerance &&
        tp_oracle::max_difference(split_trained.fc2->weight, tp_oracle::columns_of(single_trained.fc2->weight, rank, n)) <
            kTolerance &&
        tp_oracle::max_difference(split_trained.fc3->weight, single_trained.fc3->weight) < kTolerance));
  }
}
