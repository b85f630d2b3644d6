// row_linear.cpp — ex8.3: a Linear whose input features are split between the
// ranks; its output is complete on every rank.
#include "tensor_parallel.hpp"
#include "workbook/errors.hpp"

namespace ch08 {

RowParallelLinearImpl::RowParallelLinearImpl(const torch::nn::Linear& full, workbook::Communicator& comm)
    : comm(&comm) {
  WB_CHECK(full->options.in_features() >= comm.size(),
           "a row-parallel Linear of {} input features cannot be split over {} ranks: each needs one",
           full->options.in_features(), comm.size());
  WB_ASSERT(full->options.bias(), "RowParallelLinear expects a Linear with a bias");
  torch::NoGradGuard no_grad;
  // BEGIN SOLUTION ex8.3
  // Input feature k is column k of the weight [out, in]; the bias belongs to
  // the output, which every rank completes: each keeps all of it.
  inputs = shard_of(full->options.in_features(), comm.rank(), comm.size());
  weight = full->weight.narrow(1, inputs.begin, inputs.size).clone();
  bias = full->bias.clone();
  // END SOLUTION
  register_parameter("weight", weight);
  register_parameter("bias", bias);
}

torch::Tensor RowParallelLinearImpl::forward(const torch::Tensor& input) {
  WB_CHECK(input.dim() == 2 && input.size(1) == inputs.size,
           "rank {}'s row-parallel Linear holds {} input features (from {}), got an input of shape {}",
           comm->rank(), inputs.size, inputs.begin, c10::str(input.sizes()));
  // BEGIN SOLUTION ex8.3
  // Each rank's product covers its input features only: the sum over ranks
  // is the whole product. The bias is added after the sum, once; added on
  // every rank before it, it would count n times.
  const torch::Tensor partial = torch::nn::functional::linear(input, weight);
  return reduce_from_tensor_parallel(partial, *comm) + bias;
  // END SOLUTION
}

}  // namespace ch08
