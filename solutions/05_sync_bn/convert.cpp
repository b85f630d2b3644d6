// convert.cpp — ex5.4: every BatchNorm2d of a model becomes a SyncBatchNorm2d.
#include <functional>
#include <string>
#include <vector>

#include "sync_bn.hpp"
#include "workbook/errors.hpp"

namespace ch05 {

SyncBatchNorm2dImpl::SyncBatchNorm2dImpl(torch::nn::BatchNorm2dImpl& source, workbook::Communicator& comm)
    : options(source.options), comm_(&comm) {
  WB_ASSERT(options.affine() && options.track_running_stats(),
            "SyncBatchNorm2d supports affine BatchNorm with running statistics only");
  // BEGIN SOLUTION ex5.4
  // The source's tensors themselves: an optimizer built before the conversion
  // holds these, and keeps updating the layer that now uses them.
  weight = register_parameter("weight", source.weight, source.weight.requires_grad());
  bias = register_parameter("bias", source.bias, source.bias.requires_grad());
  running_mean = register_buffer("running_mean", source.running_mean);
  running_var = register_buffer("running_var", source.running_var);
  num_batches_tracked = register_buffer("num_batches_tracked", source.num_batches_tracked);
  train(source.is_training());
  // END SOLUTION
}

int convert_sync_batchnorm(torch::nn::Module& model, workbook::Communicator& comm) {
  // BEGIN SOLUTION ex5.4
  // Find and check every BatchNorm2d first, replace afterwards: a model that
  // cannot be converted is left as it was, not half converted.
  struct Found {  // a BatchNorm2d to replace: its parent, its name there, the layer
    torch::nn::Module* parent;
    std::string name;
    torch::nn::BatchNorm2dImpl* batch_norm;
  };
  std::vector<Found> found;
  std::function<void(torch::nn::Module&, const std::string&)> visit = [&](torch::nn::Module& parent,
                                                                         const std::string& path) {
    for (const auto& child : parent.named_children()) {
      const std::string child_path = path.empty() ? child.key() : path + "." + child.key();
      if (auto* batch_norm = child.value()->as<torch::nn::BatchNorm2d>()) {
        WB_CHECK(!parent.as<torch::nn::Sequential>() && !parent.as<torch::nn::ModuleList>(),
                 "convert_sync_batchnorm: {} is a BatchNorm2d inside a Sequential or ModuleList, which calls its "
                 "own list of layers, not its registry: the replacement would never run",
                 child_path);
        WB_CHECK(batch_norm->options.affine() && batch_norm->options.track_running_stats(),
                 "convert_sync_batchnorm: {} has no weight or no running statistics; SyncBatchNorm2d needs both",
                 child_path);
        found.push_back({&parent, child.key(), batch_norm});
      } else {
        visit(*child.value(), child_path);  // a block within the model
      }
    }
  };
  visit(model, "");
  for (const Found& f : found)
    f.parent->replace_module(f.name, std::make_shared<SyncBatchNorm2dImpl>(*f.batch_norm, comm));
  return static_cast<int>(found.size());
  // END SOLUTION
}

}  // namespace ch05
