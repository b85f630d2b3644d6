// replicate.cpp — ex2.2: a copy of the model per device, wired back to the original.
//
//   original parameter W (a leaf: its gradient accumulates in W.grad)
//        ▲            ▲              ▲
//        │ ToCopy     │ ToCopy       │ ToCopy        gradient edges
//   replica 0's W  replica 1's W  replica 2's W     (not leaves: no .grad)
//        │            │              │
//     forward on    forward on     forward on
//     chunk 0       chunk 1        chunk 2
//
// Backward reaches each replica's W, follows its edge to the original W, and
// autograd sums what arrives there: W.grad = Σ over replicas.
#include "data_parallel.hpp"

#include "workbook/device.hpp"
#include "workbook/errors.hpp"

namespace ch02 {

std::vector<workbook::ClassifierPtr> replicate(workbook::Classifier& model, const std::vector<torch::Device>& devices) {
  // BEGIN SOLUTION ex2.2
  workbook::check_devices(devices, "replicate");
  for (const torch::Tensor& parameter : model.parameters())
    WB_CHECK(parameter.device() == devices[0],
             "replicate: the model is on {} but the primary device is {}; call model.to(devices[0]) first",
             parameter.device().str(), devices[0].str());

  std::vector<workbook::ClassifierPtr> replicas;
  replicas.reserve(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    // Same architecture, its own tensors (initialized on the host; they are
    // all replaced below, so the replica is not moved to its device first).
    workbook::ClassifierPtr replica = model.fresh();
    replica->train(model.is_training());

    // Note: a module's member (conv1->weight) and its entry in
    // named_parameters() are two handles to one TensorImpl. Assigning a new
    // tensor to either handle would not reach the other, so the replica's
    // tensors are changed in place: set_data() makes them use the copy's
    // storage (on the replica's device; no second copy), set_gradient_edge()
    // gives them the copy's place in the autograd graph. LibTorch's own
    // replicate() also edits the replica tensors in place, with
    // autograd::set_history and one ReduceAdd node per parameter (see Note
    // [Replicating Modules] in torch/nn/parallel/data_parallel.h).
    auto replica_parameters = replica->named_parameters();
    for (const auto& original : model.named_parameters()) {
      torch::Tensor copy = original.value().to(devices[i], /*non_blocking=*/false, /*copy=*/true);  // differentiable
      torch::Tensor& target = replica_parameters[original.key()];
      target.set_data(copy);
      torch::autograd::impl::set_gradient_edge(target, torch::autograd::impl::gradient_edge(copy));
    }

    torch::NoGradGuard no_grad;  // buffers carry no gradient
    auto replica_buffers = replica->named_buffers();
    for (const auto& original : model.named_buffers()) {
      torch::Tensor& target = replica_buffers[original.key()];
      if (i == 0)
        target.set_(original.value());  // share: replica 0's BatchNorm updates the model's running statistics
      else
        target.set_data(original.value().to(devices[i], /*non_blocking=*/false, /*copy=*/true));
    }
    replicas.push_back(std::move(replica));
  }
  return replicas;
  // END SOLUTION
}

}  // namespace ch02
