// hybrid.cpp — ex8.8 and ex8.9: tensor groups and data groups, and a step
// that uses each for what it is for.
#include "ddp.hpp"  // Chapter 3's reference, linked in (chapter.json's "uses")
#include "hybrid.hpp"
#include "workbook/errors.hpp"

namespace ch08 {

HybridGroups make_hybrid_groups(workbook::Communicator& world, int tensor_ranks, TensorGroups placement) {
  const int n = world.size(), rank = world.rank();
  WB_CHECK(tensor_ranks >= 1 && n % tensor_ranks == 0,
           "{} ranks do not make groups of {} tensor-parallel ranks: the ranks must be a multiple of --tensor-ranks",
           n, tensor_ranks);
  [[maybe_unused]] const int data_ranks = n / tensor_ranks;
  HybridGroups groups;
  // BEGIN SOLUTION ex8.8
  // A rank's place in the T x D grid: which tensor group, and which part of
  // the model within it (= which data group).
  const bool consecutive = placement == TensorGroups::Consecutive;
  const int tensor_group = consecutive ? rank / tensor_ranks : rank % data_ranks;
  const int part = consecutive ? rank % tensor_ranks : rank / data_ranks;
  // Every rank calls both splits, in the same order; the key (the world
  // rank) keeps each group in the world's order.
  groups.tensor = world.split(tensor_group, rank, fmt::format("tensor group {}", tensor_group));
  groups.data = world.split(part, rank, fmt::format("data group {}", part));
  // END SOLUTION
  return groups;
}

torch::Tensor hybrid_train_step(torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                                const std::function<torch::Tensor()>& loss, HybridGroups& groups) {
  torch::Tensor value;
  // BEGIN SOLUTION ex8.9
  optimizer.zero_grad();
  value = loss();
  value.backward();
  // Each part's gradient is averaged with the same part on the other data
  // ranks; never across the tensor group, whose ranks hold different parts.
  ch03::all_reduce_gradients(model, *groups.data);
  optimizer.step();
  // END SOLUTION
  return value;
}

}  // namespace ch08
