// all_gather_grad.cpp — ex5.5: an all-gather with a backward.
#include "autograd_comm.hpp"
#include "gather.hpp"
#include "workbook/errors.hpp"

namespace ch05 {

torch::Tensor AllGatherFunction::forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                                         workbook::Communicator* comm) {
  WB_ASSERT(input.dim() >= 1, "all_gather_with_grad needs at least one dimension (the rows), got a scalar");
  WB_NOT_IMPLEMENTED("ex5.5");  // TODO(ex5.5): your code here
}

torch::autograd::variable_list AllGatherFunction::backward(torch::autograd::AutogradContext* ctx,
                                                           torch::autograd::variable_list grad_outputs) {
  WB_NOT_IMPLEMENTED("ex5.5");  // TODO(ex5.5): your code here
}

}  // namespace ch05
