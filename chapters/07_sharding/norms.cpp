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
torch::Tensor squared_norms_per_parameter(const Partition& partition, const torch::Tensor& owned,
                                          workbook::Communicator& comm) {
  WB_ASSERT(owned.dim() == 1 && owned.numel() == partition.owned_numel(),
            "owned must be this rank's owned part: {} elements, got {}", partition.owned_numel(), owned.numel());
  WB_NOT_IMPLEMENTED("ex7.4");  // TODO(ex7.4): your code here
}

double clip_gradients_by_global_norm(const std::vector<FlatGroup*>& groups, double max_norm,
                                     workbook::Communicator& comm) {
  WB_CHECK(max_norm > 0, "the largest gradient norm must be positive, got {}", max_norm);
  WB_NOT_IMPLEMENTED("ex7.4");  // TODO(ex7.4): your code here
}

}  // namespace ch07
