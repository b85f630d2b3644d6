// column_linear.cpp — ex8.2: a Linear whose output features are split
// between the ranks.
#include "tensor_parallel.hpp"
#include "workbook/errors.hpp"

namespace ch08 {

Shard shard_of(int64_t total, int rank, int ranks) {
  WB_ASSERT(ranks > 0 && rank >= 0 && rank < ranks && total >= 0, "shard_of({}, {}, {})", total, rank, ranks);
  const int64_t base = total / ranks, extra = total % ranks;
  return {rank * base + std::min<int64_t>(rank, extra), base + (rank < extra ? 1 : 0)};
}

ColumnParallelLinearImpl::ColumnParallelLinearImpl(const torch::nn::Linear& full, workbook::Communicator& comm)
    : comm(&comm) {
  WB_CHECK(full->options.out_features() >= comm.size(),
           "a column-parallel Linear of {} output features cannot be split over {} ranks: each needs one",
           full->options.out_features(), comm.size());
  WB_ASSERT(full->options.bias(), "ColumnParallelLinear expects a Linear with a bias");
  torch::NoGradGuard no_grad;
  WB_NOT_IMPLEMENTED("ex8.2");  // TODO(ex8.2): your code here
  register_parameter("weight", weight);
  register_parameter("bias", bias);
}

torch::Tensor ColumnParallelLinearImpl::forward(const torch::Tensor& input) {
  WB_NOT_IMPLEMENTED("ex8.2");  // TODO(ex8.2): your code here
}

}  // namespace ch08
