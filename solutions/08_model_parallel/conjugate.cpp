// conjugate.cpp — ex8.1: f and g, the two operators that make a pair of split
// layers compute what the whole pair computes, forward and backward.
#include "autograd_comm.hpp"  // Chapter 5's: the Communicator kept in an autograd context
#include "tensor_parallel.hpp"
#include "workbook/errors.hpp"

namespace ch08 {

torch::Tensor CopyToTensorParallel::forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                                            workbook::Communicator* comm) {
  ch05::save_communicator(ctx, comm);
  // BEGIN SOLUTION ex8.1
  // Every rank already holds the same x: nothing to send. A view, not the
  // tensor itself, so that autograd records this function as x's user.
  return input.view_as(input);
  // END SOLUTION
}

torch::autograd::variable_list CopyToTensorParallel::backward(torch::autograd::AutogradContext* ctx,
                                                              torch::autograd::variable_list grad_outputs) {
  [[maybe_unused]] workbook::Communicator& comm = ch05::saved_communicator(ctx);
  // BEGIN SOLUTION ex8.1
  // Each rank's gradient holds what its part of the layer says about x; x fed
  // every part, so its gradient is their sum.
  torch::Tensor grad = grad_outputs[0].contiguous().clone();
  comm.all_reduce(grad, workbook::ReduceOp::Sum);
  return {grad, torch::Tensor()};
  // END SOLUTION
}

torch::Tensor ReduceFromTensorParallel::forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                                                workbook::Communicator* comm) {
  ch05::save_communicator(ctx, comm);
  // BEGIN SOLUTION ex8.1
  // The output is the sum of the ranks' partial products.
  torch::Tensor sum = input.contiguous().clone();
  comm->all_reduce(sum, workbook::ReduceOp::Sum);
  return sum;
  // END SOLUTION
}

torch::autograd::variable_list ReduceFromTensorParallel::backward(torch::autograd::AutogradContext* ctx,
                                                                  torch::autograd::variable_list grad_outputs) {
  [[maybe_unused]] workbook::Communicator& comm = ch05::saved_communicator(ctx);
  // BEGIN SOLUTION ex8.1
  // d(Σ_r p_r)/d p_r = 1: each part's gradient is the sum's, already the same
  // on every rank. No communication.
  return {grad_outputs[0], torch::Tensor()};
  // END SOLUTION
}

}  // namespace ch08
