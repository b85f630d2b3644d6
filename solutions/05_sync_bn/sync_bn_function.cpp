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
  // batch_norm in inference form: (x − mean) · invstd · w + b in one pass, with our statistics.
  torch::Tensor output = torch::batch_norm(input, weight, bias, mean.to(input.scalar_type()),
                                           var.to(input.scalar_type()), /*training=*/false, /*momentum=*/0.0, eps,
                                           /*cudnn_enabled=*/false);
  ctx->save_for_backward({input, weight, mean, var});
  ctx->saved_data["count"] = count;
  ctx->saved_data["eps"] = eps;
  save_communicator(ctx, comm);
  return output;
  // END SOLUTION
}

torch::autograd::variable_list SyncBatchNormFunction::backward(torch::autograd::AutogradContext* ctx,
                                                               torch::autograd::variable_list grad_outputs) {
  // BEGIN SOLUTION ex5.2
  const auto saved = ctx->get_saved_variables();
  const torch::Tensor& input = saved[0];
  const torch::Tensor& weight = saved[1];
  const torch::Tensor mean = saved[2].to(input.scalar_type()), var = saved[3].to(input.scalar_type());
  const double count = static_cast<double>(ctx->saved_data["count"].toInt());
  const double eps = ctx->saved_data["eps"].toDouble();
  workbook::Communicator& comm = saved_communicator(ctx);
  // Note: [every rank runs backward] LibTorch calls this only when the loss
  // depends on the output, and then passes zeros for parts the loss ignores.
  // A rank whose loss did not use the output would skip the all-reduce below
  // and leave the other ranks waiting in it: every rank's loss must use it.
  const torch::Tensor dy = grad_outputs[0].contiguous();

  // Note: [one fused pass for the local part] LibTorch's BatchNorm backward in
  // inference form (train = false, our mean and variance in place of the
  // running ones) returns dy · w · invstd, Σdy·x̂ and Σdy in one pass over the
  // activations: everything that is local. What is left: all-reduce the two
  // sums, and subtract the two terms that come through the global mean and
  // variance.
  // (With no samples it has nothing to compute, and divides by zero: skip it.)
  torch::Tensor grad_input = torch::empty_like(input), grad_weight = torch::zeros_like(weight);
  torch::Tensor grad_bias = torch::zeros_like(weight);
  if (input.numel() > 0)
    std::tie(grad_input, grad_weight, grad_bias) = torch::native_batch_norm_backward(
        dy, input, weight, mean, var, {}, {}, /*train=*/false, eps, {true, true, true});
  torch::Tensor sums = torch::stack({grad_bias, grad_weight});  // [Σdy | Σdy·x̂] per channel: this rank's
  comm.all_reduce(sums, workbook::ReduceOp::Sum);
  //   dx = w·invstd · (dy − Σdy/N − x̂ · Σdy·x̂/N)
  //      = grad_input − w·invstd·Σdy/N − (x − mean) · w·invstd²·Σdy·x̂/N
  const torch::Tensor invstd = (var + eps).rsqrt();
  const torch::Tensor shift = (weight * invstd * sums[0] / count).view({1, -1, 1, 1});
  const torch::Tensor slope = (weight * invstd.square() * sums[1] / count).view({1, -1, 1, 1});
  grad_input.addcmul_(input - mean.view({1, -1, 1, 1}), slope, /*value=*/-1.0).sub_(shift);
  return {grad_input, grad_weight, grad_bias, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(),
          torch::Tensor()};
  // END SOLUTION
}

}  // namespace ch05
