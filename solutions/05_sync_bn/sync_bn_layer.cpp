// sync_bn_layer.cpp — ex5.3: SyncBatchNorm2d, the layer: statistics in
// training, running statistics in eval.
#include "sync_bn.hpp"
#include "workbook/errors.hpp"

namespace ch05 {

// Given: the same parameters and buffers as BatchNorm2d, under the same names,
// so that state copies between the two (workbook::copy_state, checkpoints).
SyncBatchNorm2dImpl::SyncBatchNorm2dImpl(const torch::nn::BatchNormOptions& options_, workbook::Communicator& comm)
    : options(options_), comm_(&comm) {
  WB_ASSERT(options.affine() && options.track_running_stats(),
            "SyncBatchNorm2d supports affine BatchNorm with running statistics only");
  const int64_t channels = options.num_features();
  weight = register_parameter("weight", torch::ones({channels}));
  bias = register_parameter("bias", torch::zeros({channels}));
  running_mean = register_buffer("running_mean", torch::zeros({channels}));
  running_var = register_buffer("running_var", torch::ones({channels}));
  num_batches_tracked = register_buffer("num_batches_tracked", torch::zeros({}, torch::kLong));
}

torch::Tensor SyncBatchNorm2dImpl::forward(torch::Tensor input) {
  WB_ASSERT(input.dim() == 4 && input.size(1) == options.num_features(),
            "SyncBatchNorm2d({}) expects [B, {}, H, W] input, got {}", options.num_features(),
            options.num_features(), c10::str(input.sizes()));
  // BEGIN SOLUTION ex5.3
  if (!is_training())  // the running statistics: no communication at all
    return torch::batch_norm(input, weight, bias, running_mean, running_var, /*training=*/false, 0.0,
                             options.eps(), /*cudnn_enabled=*/false);

  const BatchStats stats = global_batch_stats(input, *comm_);
  {
    torch::NoGradGuard no_grad;
    num_batches_tracked += 1;
    const double factor = options.momentum() ? *options.momentum() : 1.0 / num_batches_tracked.item<double>();
    const double unbiased = static_cast<double>(stats.count) / static_cast<double>(stats.count - 1);
    running_mean.mul_(1.0 - factor).add_(stats.mean.to(running_mean.scalar_type()), factor);
    running_var.mul_(1.0 - factor).add_((stats.var * unbiased).to(running_var.scalar_type()), factor);
  }
  return SyncBatchNormFunction::apply(input, weight, bias, stats.mean, stats.var, stats.count, comm_,
                                      options.eps());
  // END SOLUTION
}

}  // namespace ch05
