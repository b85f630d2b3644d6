// norms.cpp — ex7.4: norms of parameters that are split between ranks.
#include "sharding.hpp"

#include <cmath>

#include "workbook/errors.hpp"

namespace ch07 {

// Note: [a norm is not a sum of shard norms] With the parameters flattened
// and cut into shards, a rank's shard holds pieces of tensors, and a tensor
// may be split between two ranks, and its norm is the whole tensor's. A LAMB
// (or LARS) that computes its trust ratio from each rank's piece gives a
// split tensor two different ratios, one per half: the model is no longer
// the one DDP would train.
// BEGIN SOLUTION NOTE ex7.4
// The norm is sqrt of the sum of squares of ALL its pieces:
// ‖w‖² = Σ_ranks ‖piece‖², never Σ ‖piece‖ and never one rank's piece
// alone. So each rank sums squares per tensor, and one small all-reduce
// adds the partial sums.
// END SOLUTION NOTE
torch::Tensor squared_norms_per_parameter(const Partition& partition, const torch::Tensor& owned,
                                          workbook::Communicator& comm) {
  WB_ASSERT(owned.dim() == 1 && owned.numel() == partition.owned_numel(),
            "owned must be this rank's owned part: {} elements, got {}", partition.owned_numel(), owned.numel());
  // BEGIN SOLUTION ex7.4
  // float64 partial sums: the sum of many squares loses little, and the
  // ranks' partial sums are added exactly as often whatever the world size.
  torch::Tensor sums = torch::zeros({static_cast<int64_t>(partition.sizes.size())},
                                    owned.options().dtype(torch::kFloat64));
  for (const ShardPiece& piece : partition.pieces)
    sums[static_cast<int64_t>(piece.parameter)] += owned.narrow(0, piece.shard_offset, piece.count).to(torch::kFloat64).square().sum();
  comm.all_reduce(sums, workbook::ReduceOp::Sum);
  return sums;
  // END SOLUTION
}

double clip_gradients_by_global_norm(const std::vector<FlatGroup*>& groups, double max_norm,
                                     workbook::Communicator& comm) {
  WB_CHECK(max_norm > 0, "the largest gradient norm must be positive, got {}", max_norm);
  // BEGIN SOLUTION ex7.4
  // The global norm is one sum over every element of every tensor: each
  // rank adds the squares of its shards (padding is zeros), one all-reduce.
  torch::Tensor squares = torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat64));
  for (FlatGroup* group : groups)
    squares += group->shard_gradient().to(torch::kFloat64).square().sum().cpu();
  squares = squares.to(comm.device());
  comm.all_reduce(squares, workbook::ReduceOp::Sum);
  const double norm = std::sqrt(squares.item<double>());
  // As torch::nn::utils::clip_grad_norm_: scale only by a coefficient below 1.
  const double coefficient = max_norm / (norm + 1e-6);
  if (coefficient < 1)
    for (FlatGroup* group : groups) group->shard_gradient().mul_(coefficient);
  return norm;
  // END SOLUTION
}

}  // namespace ch07
