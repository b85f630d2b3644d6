// convert.cpp — ex5.4: every BatchNorm2d of a model becomes a SyncBatchNorm2d.
#include "sync_bn.hpp"
#include "workbook/errors.hpp"

namespace ch05 {

SyncBatchNorm2dImpl::SyncBatchNorm2dImpl(torch::nn::BatchNorm2dImpl& source, workbook::Communicator& comm)
    : options(source.options), comm_(&comm) {
  // BEGIN SOLUTION ex5.4
  WB_ASSERT(options.affine() && options.track_running_stats(),
            "SyncBatchNorm2d supports affine BatchNorm with running statistics only");
  // The source's tensors themselves: an optimizer built before the conversion
  // holds these, and keeps updating the layer that now uses them.
  weight = register_parameter("weight", source.weight);
  bias = register_parameter("bias", source.bias);
  running_mean = register_buffer("running_mean", source.running_mean);
  running_var = register_buffer("running_var", source.running_var);
  num_batches_tracked = register_buffer("num_batches_tracked", source.num_batches_tracked);
  train(source.is_training());
  // END SOLUTION
}

int convert_sync_batchnorm(torch::nn::Module& model, workbook::Communicator& comm) {
  // BEGIN SOLUTION ex5.4
  int replaced = 0;
  for (const auto& child : model.named_children()) {
    if (auto* batch_norm = child.value()->as<torch::nn::BatchNorm2d>()) {
      model.replace_module(child.key(), std::make_shared<SyncBatchNorm2dImpl>(*batch_norm, comm));
      ++replaced;
    } else {
      replaced += convert_sync_batchnorm(*child.value(), comm);  // a block within the model
    }
  }
  return replaced;
  // END SOLUTION
}

}  // namespace ch05
