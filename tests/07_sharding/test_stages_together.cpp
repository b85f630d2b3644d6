// The stages with Chapter 6's LAMB: ex7.2, ex7.3 and ex7.5's steps with
// ex7.4's norms (no exercise tag: it needs all four).
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "sharding.hpp"
#include "sharding_oracles.hpp"

// Within 1e-6 of DDP with Chapter 6's LAMB: Note [LAMB under sharding is not
// bit-identical] in test_ex7_4_norms.cpp.
TEST_CASE("stages 1, 2 and 3 with LAMB train the model Chapter 6's LAMB trains under DDP (needs ex7.2 to ex7.5)",
          "[np3]") {
  auto comm = mpi_test::communicator();
  const auto batches = sharding_oracle::global_batches(4, 4 * comm->size());
  auto ddp_model = sharding_oracle::toy_model();
  ch07::ReplicatedOptimizer ddp(*ddp_model, *comm, ch07::lamb(*comm, 1e-2));
  sharding_oracle::train(*ddp_model, ddp, batches, *comm);
  ch07::ShardingOptions small_buckets;
  small_buckets.first_bucket_bytes = 100;
  small_buckets.bucket_cap_bytes = 1000;
  for (int stage : {1, 2, 3}) {
    auto model = sharding_oracle::toy_model();
    small_buckets.layers = model->layers();
    auto sharding = ch07::make_sharding(stage, *model, *comm, ch07::lamb(*comm, 1e-2), small_buckets);
    sharding_oracle::train(*model, *sharding, batches, *comm);
    sharding->gather_full();
    const double difference = sharding_oracle::difference_on_all_ranks(*model, *ddp_model, *comm);
    INFO("stage " << stage << ", " << comm->size() << " ranks: largest difference from DDP with LAMB "
                  << difference << " (required: below 1e-6)");
    REQUIRE(mpi_test::all_ranks(difference < 1e-6));
  }
}

// Clipping inside the stages' step (ShardingOptions::max_grad_norm): the
// global norm from the shards, as torch::nn::utils::clip_grad_norm_ takes it
// from whole tensors at stage 0. SGD, so that the scale of the gradient
// shows in the weights (Adam would hide most of it).
TEST_CASE("stages 1, 2 and 3 clip by the global norm as DDP does (needs ex7.2 to ex7.5)", "[np3]") {
  auto comm = mpi_test::communicator();
  const auto batches = sharding_oracle::global_batches(4, 4 * comm->size());
  ch07::ShardingOptions options;
  options.first_bucket_bytes = 100;
  options.bucket_cap_bytes = 1000;
  options.max_grad_norm = 0.05;  // below the toy model's gradient norm: every step clips
  auto ddp_model = sharding_oracle::toy_model();
  ch07::ReplicatedOptimizer ddp(*ddp_model, *comm, sharding_oracle::sgd(0.5), options);
  sharding_oracle::train(*ddp_model, ddp, batches, *comm);
  auto unclipped_model = sharding_oracle::toy_model();
  ch07::ReplicatedOptimizer unclipped(*unclipped_model, *comm, sharding_oracle::sgd(0.5));
  sharding_oracle::train(*unclipped_model, unclipped, batches, *comm);
  const double clipping_moves = sharding_oracle::max_difference(sharding_oracle::weights(*ddp_model),
                                                                sharding_oracle::weights(*unclipped_model));
  REQUIRE(clipping_moves > 1e-3);  // the limit does clip
  for (int stage : {1, 2, 3}) {
    auto model = sharding_oracle::toy_model();
    options.layers = model->layers();
    auto sharding = ch07::make_sharding(stage, *model, *comm, sharding_oracle::sgd(0.5), options);
    sharding_oracle::train(*model, *sharding, batches, *comm);
    sharding->gather_full();
    const double difference = sharding_oracle::difference_on_all_ranks(*model, *ddp_model, *comm);
    INFO("stage " << stage << ", " << comm->size() << " ranks: largest difference from DDP with clip_grad_norm_ "
                  << difference << " (required: below 1e-6; clipping itself moves the weights by "
                  << clipping_moves << ")");
    REQUIRE(mpi_test::all_ranks(difference < 1e-6));
  }
}
