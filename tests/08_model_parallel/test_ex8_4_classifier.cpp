// Tests for ex8.4: FashionCNN with fc1 and fc2 split, against the whole
// FashionCNN in one process, in float64 (the split sums round differently:
// within 1e-9 here, where float32 would give about 1e-6), over steps.
#include "catch2_compat.hpp"

#include <ATen/CPUGeneratorImpl.h>

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

TEST_CASE("ex8.4 outputs, gradients and weights after steps equal the whole FashionCNN's", "[ex8.4][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size(), rank = comm->rank();
  const double p = GENERATE(0.0, 0.5);  // dropout: none, and the single process's
  CAPTURE(p, n);
  auto whole = whole_model(2);
  ch08::TensorParallelFashionCNN model(*whole, *comm, p, /*dropout_seed=*/77);
  torch::Generator oracle_generator = at::make_generator<at::CPUGeneratorImpl>(77);
  torch::optim::SGD whole_sgd(whole->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::SGD sgd(model.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int64_t step = 0; step < 3; ++step) {
    CAPTURE(step);
    const torch::Tensor images = images_for(step, 6), labels = labels_for(step, 6);
    const torch::Tensor mask = p > 0 ? ch08::full_dropout_mask(6, 600, p, oracle_generator) : torch::Tensor();
    whole_sgd.zero_grad();
    const torch::Tensor whole_logits = tp_oracle::fashion_cnn_forward(*whole, images, mask);
    torch::nn::functional::cross_entropy(whole_logits, labels).backward();
    whole_sgd.step();

    sgd.zero_grad();
    const int64_t before = comm->stats().count(workbook::CommOp::AllReduce);
    const torch::Tensor logits = model.forward(images);
    const int64_t in_forward = comm->stats().count(workbook::CommOp::AllReduce) - before;
    torch::nn::functional::cross_entropy(logits, labels).backward();
    const int64_t in_backward = comm->stats().count(workbook::CommOp::AllReduce) - before - in_forward;
    INFO("logits differ from the whole model's (largest difference " << tp_oracle::max_difference(logits, whole_logits)
         << (p > 0 ? ", with dropout at p = 0.5: the single process's mask is full_dropout_mask(6, 600, p, a generator "
                     "seeded with 77)"
                   : ", without dropout")
         << ")");
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
