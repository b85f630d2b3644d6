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
  WB_NOT_IMPLEMENTED("ex5.3");  // TODO(ex5.3): your code here
}

}  // namespace ch05
