// Tests for ex7.4: norms of tensors split between ranks: per tensor, global
// clipping, and LAMB's trust ratios under sharding.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "sharding.hpp"
#include "sharding_oracles.hpp"

namespace {

// ToyNet with fc1.weight's rows 6 to 11 five times larger: at 2 ranks
// fc1.weight is split at its element 4766 (flat element 4772, in row 6), so the two pieces have
// very different norms, and a trust ratio computed from one piece is far
// from the whole tensor's.
std::shared_ptr<sharding_oracle::ToyNet> lopsided_model() {
  auto model = sharding_oracle::toy_model();
  torch::NoGradGuard no_grad;
  model->fc1->weight.narrow(0, 6, 6).mul_(5.0);
  return model;
}

}  // namespace

TEST_CASE("ex7.4 squared_norms_per_parameter: the whole tensor's norm, from every rank's pieces", "[ex7.4][np3]") {
  auto comm = mpi_test::communicator();
  auto model = lopsided_model();
  std::vector<double> expected;
  for (const torch::Tensor& p : ch07::trainable_parameters(*model))
    expected.push_back(p.detach().to(torch::kFloat64).square().sum().item<double>());
  ch07::FlatGroup group(ch07::trainable_parameters(*model), comm->size(), comm->rank(), sharding_oracle::partition);
  const torch::Tensor got = ch07::squared_norms_per_parameter(group.partition(), group.owned(), *comm);
  INFO("one float64 value per parameter of the group, the same on every rank");
  REQUIRE(got.scalar_type() == torch::kFloat64);
  REQUIRE(got.numel() == 4);
  for (int64_t i = 0; i < 4; ++i) {
    CAPTURE(i, got[i].item<double>(), expected[static_cast<size_t>(i)]);
    INFO("parameter " << i << "'s squared norm is not the whole tensor's (fc1.weight lies in more than one "
                         "rank's shard)");
    REQUIRE(mpi_test::all_ranks(got[i].item<double>() == Approx(expected[static_cast<size_t>(i)]).epsilon(1e-12)));
  }
}

TEST_CASE("ex7.4 clipping by the global norm, from shards, equals clip_grad_norm_ on the whole gradient",
          "[ex7.4][np3]") {
  auto comm = mpi_test::communicator();
  auto model = sharding_oracle::toy_model();
  const std::vector<torch::Tensor> parameters = ch07::trainable_parameters(*model);
  ch07::FlatGroup group(parameters, comm->size(), comm->rank(), sharding_oracle::partition);
  torch::manual_seed(5);  // one full gradient, the same on every rank
  const torch::Tensor full = torch::randn({group.partition().padded_numel}) *
                             (torch::arange(group.partition().padded_numel) < group.partition().numel);
  const double norm = full.to(torch::kFloat64).norm().item<double>();
  for (const double max_norm : {norm / 4, norm * 2}) {
    group.shard_gradient().copy_(full.narrow(0, group.partition().shard_begin(), group.partition().shard_numel));
    const double returned = ch07::clip_gradients_by_global_norm({&group}, max_norm, *comm);
    CAPTURE(max_norm, norm, returned);
    INFO("returns ‖g‖ over every rank's shard before clipping");
    REQUIRE(mpi_test::all_ranks(returned == Approx(norm).epsilon(1e-9)));
    const double scale = std::min(1.0, max_norm / (norm + 1e-6));
    const torch::Tensor expected =
        full.narrow(0, group.partition().shard_begin(), group.partition().shard_numel) * scale;
    INFO("the shard gradient scaled by max_norm / (‖g‖ + 1e-6) when ‖g‖ exceeds max_norm, else untouched");
    REQUIRE(mpi_test::all_ranks(torch::allclose(group.shard_gradient(), expected, 1e-6, 1e-7)));
  }
}

// Note: [LAMB under sharding is not bit-identical] Chapter 6's LAMB takes
// each tensor's norm in float32, in one pass; the sharded one adds float64
// partial sums from the ranks. The trust ratios agree to about 1e-7
// relative, not to the bit: after 4 steps at lr 1e-2 the weights agree to
// far better than 1e-6. A trust ratio from one rank's piece of the split
// fc1.weight (its rows differ five-fold in scale) moves the weights by more
// than 1e-4: the tolerance refuses it.
TEST_CASE("ex7.4 LAMB on shards trains the model Chapter 6's LAMB trains under DDP, split layer included",
          "[ex7.4][np3]") {
  auto comm = mpi_test::communicator();
  const auto batches = sharding_oracle::global_batches(4, 4 * comm->size());
  auto ddp_model = lopsided_model();
  ch07::ReplicatedOptimizer ddp(*ddp_model, *comm, ch07::lamb(*comm, 1e-2));
  sharding_oracle::train(*ddp_model, ddp, batches, *comm);
  // Stage 1, written out here (not ex7.2's): the test is about ex7.4.
  auto model = lopsided_model();
  ch07::FlatGroup group(ch07::trainable_parameters(*model), comm->size(), comm->rank(), sharding_oracle::partition);
  torch::Tensor owned = group.owned().detach();
  owned.mutable_grad() = group.shard_gradient().narrow(0, 0, owned.numel());
  auto optimizer = ch07::make_sharded_lamb({&group}, {owned}, *comm, ch06::LambOptions(1e-2));
  for (size_t s = 0; s < batches.images.size(); ++s) {
    const int64_t local = batches.images[s].size(0) / comm->size();
    for (const torch::Tensor& p : group.parameters()) const_cast<torch::Tensor&>(p).mutable_grad().reset();
    torch::nn::functional::cross_entropy(model->forward(batches.images[s].narrow(0, comm->rank() * local, local)),
                                         batches.labels[s].narrow(0, comm->rank() * local, local))
        .backward();
    comm->reduce_scatter(group.gather_gradients(), group.shard_gradient(), workbook::ReduceOp::Average);
    optimizer->step();
    const torch::Tensor mine = group.shard().clone();
    comm->all_gather(mine, group.flat());
  }
  {
    const double difference = sharding_oracle::difference_on_all_ranks(*model, *ddp_model, *comm);
    INFO(comm->size() << " ranks: largest difference from DDP with Chapter 6's LAMB "
                  << difference << " (required: below 1e-6). Each tensor's trust ratio needs ‖w‖ "
                  << "and ‖u‖ of the WHOLE tensor: squared_norms_per_parameter adds every rank's pieces.");
    REQUIRE(mpi_test::all_ranks(difference < 1e-6));
  }
}
