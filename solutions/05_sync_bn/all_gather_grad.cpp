// all_gather_grad.cpp — ex5.5: an all-gather with a backward.
#include "autograd_comm.hpp"
#include "gather.hpp"
#include "workbook/errors.hpp"

namespace ch05 {

torch::Tensor AllGatherFunction::forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                                         workbook::Communicator* comm) {
  WB_ASSERT(input.dim() >= 1, "all_gather_with_grad needs at least one dimension (the rows), got a scalar");
  // BEGIN SOLUTION ex5.5
  save_communicator(ctx, comm);
  std::vector<int64_t> shape = input.sizes().vec();
  shape[0] *= comm->size();
  // [n, B, ...] from the communicator, viewed as [n·B, ...]: rank r's rows at [r·B, (r+1)·B).
  return comm->all_gather(input.contiguous()).view(shape);
  // END SOLUTION
}

torch::autograd::variable_list AllGatherFunction::backward(torch::autograd::AutogradContext* ctx,
                                                           torch::autograd::variable_list grad_outputs) {
  // BEGIN SOLUTION ex5.5
  workbook::Communicator& comm = saved_communicator(ctx);
  const torch::Tensor grad = grad_outputs[0].contiguous();
  std::vector<int64_t> shape = grad.sizes().vec();
  shape[0] /= comm.size();
  // Chunk r of the flat gradient is rows [r·B, (r+1)·B): the reduce-scatter
  // sums every rank's chunk r into rank r's output.
  torch::Tensor mine = torch::empty(shape, grad.options());
  comm.reduce_scatter(grad.view(-1), mine, workbook::ReduceOp::Sum);
  return {mine, torch::Tensor()};
  // END SOLUTION
}

}  // namespace ch05
