// sync_bn_function.cpp — ex5.2: normalizing with the global statistics, and
// the backward pass that needs one more all-reduce.
#include "autograd_comm.hpp"
#include "sync_bn.hpp"
#include "workbook/errors.hpp"

namespace ch05 {

torch::Tensor SyncBatchNormFunction::forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                                             const torch::Tensor& weight, const torch::Tensor& bias,
                                             const torch::Tensor& mean, const torch::Tensor& var, int64_t count,
                                             workbook::Communicator* comm, double eps) {
  // BEGIN SOLUTION ex5.2
  const torch::Tensor invstd = (var + eps).rsqrt();
  // batch_norm in inference form: (x − mean) · invstd · w + b in one pass, with our statistics.
  torch::Tensor output = torch::batch_norm(input, weight, bias, mean.to(input.scalar_type()),
                                           var.to(input.scalar_type()), /*training=*/false, /*momentum=*/0.0, eps,
                                           /*cudnn_enabled=*/false);
  ctx->save_for_backward({input, weight, mean, invstd});
  ctx->saved_data["count"] = count;
  save_communicator(ctx, comm);
  return output;
  // END SOLUTION
}

torch::autograd::variable_list SyncBatchNormFunction::backward(torch::autograd::AutogradContext* ctx,
                                                               torch::autograd::variable_list grad_outputs) {
  // BEGIN SOLUTION ex5.2
  const auto saved = ctx->get_saved_variables();
  const torch::Tensor &input = saved[0], &weight = saved[1];
  // [C] → [1, C, 1, 1] in the input's dtype: broadcasts over batch, height and width.
  const torch::Tensor mean = saved[2].to(input.scalar_type()).view({1, -1, 1, 1});
  const torch::Tensor invstd = saved[3].to(input.scalar_type()).view({1, -1, 1, 1});
  const double count = static_cast<double>(ctx->saved_data["count"].toInt());
  workbook::Communicator& comm = saved_communicator(ctx);
  // An output nobody used has no gradient: it counts as zeros, and this rank
  // still joins the all-reduce below (the other ranks are waiting in it).
  const torch::Tensor dy = grad_outputs[0].defined() ? grad_outputs[0] : torch::zeros_like(input);

  const torch::Tensor centered = input - mean;
  torch::Tensor sums = torch::stack({dy.sum({0, 2, 3}), (dy * centered).sum({0, 2, 3})});  // [2, C]
  const torch::Tensor grad_bias = sums[0].clone();                                     // this rank's share
  const torch::Tensor grad_weight = sums[1] * invstd.view(-1);                          // this rank's share
  comm.all_reduce(sums, workbook::ReduceOp::Sum);
  const torch::Tensor mean_dy = sums[0].view({1, -1, 1, 1}) / count;
  const torch::Tensor mean_dy_centered = sums[1].view({1, -1, 1, 1}) / count;
  const torch::Tensor grad_input =
      (dy - mean_dy - centered * invstd.square() * mean_dy_centered) * (invstd * weight.view({1, -1, 1, 1}));
  return {grad_input, grad_weight, grad_bias, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(),
          torch::Tensor()};
  // END SOLUTION
}

}  // namespace ch05
