// conjugate.cpp — ex8.1: f and g, the two operators that make a pair of split
// layers compute what the whole pair computes, forward and backward.
#include "autograd_comm.hpp"  // Chapter 5's: the Communicator kept in an autograd context
#include "tensor_parallel.hpp"
#include "workbook/errors.hpp"

namespace ch08 {

torch::Tensor CopyToTensorParallel::forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                                            workbook::Communicator* comm) {
  ch05::save_communicator(ctx, comm);
  WB_NOT_IMPLEMENTED("ex8.1");  // TODO(ex8.1): your code here
}

torch::autograd::variable_list CopyToTensorParallel::backward(torch::autograd::AutogradContext* ctx,
                                                              torch::autograd::variable_list grad_outputs) {
  [[maybe_unused]] workbook::Communicator& comm = ch05::saved_communicator(ctx);
  WB_NOT_IMPLEMENTED("ex8.1");  // TODO(ex8.1): your code here
}

torch::Tensor ReduceFromTensorParallel::forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                                                workbook::Communicator* comm) {
  ch05::save_communicator(ctx, comm);
  WB_NOT_IMPLEMENTED("ex8.1");  // TODO(ex8.1): your code here
}

torch::autograd::variable_list ReduceFromTensorParallel::backward(torch::autograd::AutogradContext* ctx,
                                                                  torch::autograd::variable_list grad_outputs) {
  [[maybe_unused]] workbook::Communicator& comm = ch05::saved_communicator(ctx);
  WB_NOT_IMPLEMENTED("ex8.1");  // TODO(ex8.1): your code here
}

}  // namespace ch08
