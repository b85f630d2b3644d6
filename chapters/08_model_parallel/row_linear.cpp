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
  WB_NOT_IMPLEMENTED("ex8.3");  // TODO(ex8.3): your code here
  register_parameter("weight", weight);
  register_parameter("bias", bias);
}

torch::Tensor RowParallelLinearImpl::forward(const torch::Tensor& input) {
  WB_CHECK(input.dim() == 2 && input.size(1) == inputs.size,
           "rank {}'s row-parallel Linear holds {} input features (from {}), got an input of shape {}",
           comm->rank(), inputs.size, inputs.begin, c10::str(input.sizes()));
  WB_NOT_IMPLEMENTED("ex8.3");  // TODO(ex8.3): your code here
}

}  // namespace ch08
