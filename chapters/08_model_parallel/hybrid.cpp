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
  WB_NOT_IMPLEMENTED("ex8.8");  // TODO(ex8.8): your code here
  return groups;
}

torch::Tensor hybrid_train_step(torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                                const std::function<torch::Tensor()>& loss, HybridGroups& groups) {
  torch::Tensor value;
  WB_NOT_IMPLEMENTED("ex8.9");  // TODO(ex8.9): your code here
  return value;
}

}  // namespace ch08
