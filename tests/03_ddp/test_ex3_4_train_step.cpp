// Tests for ex3.4: N ranks of DDP equal one process training on the global batch.
#include "catch2_compat.hpp"

#include <cmath>
#include <string>

#include "ddp.hpp"
#include "mpi_test.hpp"
#include "oracles.hpp"

namespace {

// TinyNet without BatchNorm or dropout: a sample's output does not depend on
// the rest of its batch, so a split batch gives exactly the whole batch's
// gradients (up to float rounding). Its first layer's bias is frozen.
std::shared_ptr<workbook::TinyNet> toy_model() {
  torch::manual_seed(7);  // the same on every rank
  auto model = std::make_shared<workbook::TinyNet>(12, /*dropout=*/0.0, /*batch_norm=*/false);
  model->fc1->bias.set_requires_grad(false);
  return model;
}

// SGD steps of a single process on the global batch, with the frozen bias
// left out of the update (it gets no gradient).
void oracle_steps(workbook::Classifier& model, const std::vector<std::pair<torch::Tensor, torch::Tensor>>& batches,
                  double lr) {
  for (const auto& [images, labels] : batches) {
    std::vector<torch::Tensor> trainable;
    for (const auto& p : model.parameters())
      if (p.requires_grad()) trainable.push_back(p);
    torch::Tensor loss = torch::nn::functional::cross_entropy(model.forward(images), labels);
    std::vector<torch::Tensor> grads = torch::autograd::grad({loss}, trainable);
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < trainable.size(); ++i) trainable[i].sub_(grads[i] * lr);
  }
}

// Five global batches of `global` samples, the same on every rank (seeded alike).
std::vector<std::pair<torch::Tensor, torch::Tensor>> global_batches(uint64_t seed, int64_t global) {
  torch::manual_seed(seed);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> batches;
  for (int step = 0; step < 5; ++step)
    batches.emplace_back(torch::rand({global, 1, 28, 28}), torch::randint(0, 10, {global}, torch::kInt64));
  return batches;
}

// A copy of `model` for the single process, its first bias frozen as the model's is.
std::shared_ptr<workbook::Classifier> reference_of(workbook::Classifier& model) {
  auto reference = oracle::copy_of(model);
  std::dynamic_pointer_cast<workbook::TinyNet>(reference)->fc1->bias.set_requires_grad(false);
  return reference;
}

}  // namespace

TEST_CASE("ex3.4 five DDP steps equal five single-process steps on the global batch", "[ex3.4][np3]") {
  auto comm = mpi_test::communicator();
  const int ranks = comm->size();
  const int64_t local = 4, global = local * ranks;
  const double lr = 0.2;
  const auto batches = global_batches(99, global);  // rank r trains on its slice
  auto model = toy_model();
  auto reference = reference_of(*model);
  const torch::Tensor frozen_before = model->fc1->bias.clone();
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(lr));

  for (int step = 0; step < 5; ++step) {
    CAPTURE(step);
    const auto& [images, labels] = batches[static_cast<size_t>(step)];
    ch03::Batch mine{images.narrow(0, comm->rank() * local, local), labels.narrow(0, comm->rank() * local, local)};
    torch::Tensor loss = ch03::ddp_train_step(*model, optimizer, mine, *comm);
    INFO("ddp_train_step returns this rank's mean cross-entropy, detached, as a 0-dim tensor");
    REQUIRE(loss.dim() == 0);
    REQUIRE_FALSE(loss.requires_grad());
    if (step == 0) {
      auto fresh = toy_model();
      const double expected = torch::nn::functional::cross_entropy(fresh->forward(mine.images), mine.labels).item<double>();
      REQUIRE(loss.item<double>() == Approx(expected).epsilon(1e-5));
    }
  }
  oracle_steps(*reference, batches, lr);

  const double difference = oracle::max_parameter_difference(*model, *reference);
  INFO("after 5 steps every parameter must match single-process SGD on the global batch of " << global
       << " (largest difference " << difference << "): gradients averaged (not summed) over ranks, every step");
  REQUIRE(mpi_test::all_ranks(difference < 2e-5));
  INFO("the frozen bias must not move");
  REQUIRE(torch::equal(model->fc1->bias, frozen_before));
  INFO("one all-reduce per step, and no other collective");
  REQUIRE(comm->stats().count(workbook::CommOp::AllReduce) == 5);
  REQUIRE(comm->stats().collectives() == 5);
}

TEST_CASE("ex3.4 parts of different sizes, one of them empty, still train as one process on the global batch",
          "[ex3.4][np3]") {
  // Rank r's part: 3 and 5 samples at 2 ranks; none, 5 and 9 at 3.
  auto comm = mpi_test::communicator();
  const int ranks = comm->size(), rank = comm->rank();
  std::vector<int64_t> sizes, firsts;
  int64_t global = 0;
  for (int r = 0; r < ranks; ++r) {
    sizes.push_back(r == 0 ? (ranks >= 3 ? 0 : 3) : 1 + 4 * r);
    firsts.push_back(global);
    global += sizes.back();
  }
  const double lr = 0.2;
  const auto batches = global_batches(123, global);
  auto model = toy_model();
  auto reference = reference_of(*model);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(lr));
  const int64_t mine = sizes[static_cast<size_t>(rank)], first = firsts[static_cast<size_t>(rank)];
  for (int step = 0; step < 5; ++step) {
    CAPTURE(step);
    const auto& [images, labels] = batches[static_cast<size_t>(step)];
    ch03::Batch part{images.narrow(0, first, mine), labels.narrow(0, first, mine), global};
    const torch::Tensor loss = ch03::ddp_train_step(*model, optimizer, part, *comm);
    INFO("ddp_train_step returns this rank's mean cross-entropy on its " << mine << " samples (0 for none), detached");
    REQUIRE(mpi_test::all_ranks(loss.dim() == 0 && !loss.requires_grad() && std::isfinite(loss.item<double>())));
    REQUIRE(mpi_test::all_ranks(mine != 0 || loss.item<double>() == 0.0));
  }
  oracle_steps(*reference, batches, lr);
  const double difference = oracle::max_parameter_difference(*model, *reference);
  INFO("parts of " << sizes[0] << (ranks > 1 ? ", " + std::to_string(sizes[1]) : "")
                   << (ranks > 2 ? ", " + std::to_string(sizes[2]) : "") << " samples: after 5 steps every parameter "
                   << "must match single-process SGD on the global batch of " << global << " (largest difference "
                   << difference << ")");
  REQUIRE(mpi_test::all_ranks(difference < 2e-5));
  INFO("one collective call per step");
  REQUIRE(mpi_test::all_ranks(comm->stats().collectives() == 5));
}

TEST_CASE("ex3.4 DDP keeps the ranks' models identical under Adam", "[ex3.4]") {
  auto comm = mpi_test::communicator();
  auto model = toy_model();
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));
  torch::manual_seed(500 + static_cast<uint64_t>(comm->rank()));  // a different batch on every rank
  for (int step = 0; step < 5; ++step)
    ch03::ddp_train_step(*model, optimizer,
                         {torch::rand({6, 1, 28, 28}), torch::randint(0, 10, {6}, torch::kInt64)}, *comm);
  std::vector<torch::Tensor> flat;
  for (const auto& p : model->parameters()) flat.push_back(p.detach().reshape({-1}));
  const torch::Tensor mine = torch::cat(flat);
  const torch::Tensor all = comm->all_gather(mine);
  INFO("the same averaged gradients and the same optimizer state give bit-identical models on every rank");
  for (int r = 0; r < comm->size(); ++r) REQUIRE(torch::equal(all[r], mine));
}
