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
  // BEGIN SOLUTION ex8.2
  // Output feature j is row j of the weight [out, in] and element j of the bias.
  outputs = shard_of(full->options.out_features(), comm.rank(), comm.size());
  weight = full->weight.narrow(0, outputs.begin, outputs.size).clone();
  bias = full->bias.narrow(0, outputs.begin, outputs.size).clone();
  // END SOLUTION
  register_parameter("weight", weight);
  register_parameter("bias", bias);
}

torch::Tensor ColumnParallelLinearImpl::forward(const torch::Tensor& input) {
  // BEGIN SOLUTION ex8.2
  // f first: forward it changes nothing, backward it sums the ranks' gradients
  // for the input, each of which covers only this rank's output features.
  return torch::nn::functional::linear(copy_to_tensor_parallel(input, *comm), weight, bias);
  // END SOLUTION
}

}  // namespace ch08
