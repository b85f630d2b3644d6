// stage3.cpp — ex7.5: ZeRO stage 3 (FSDP): each layer's parameters gathered
// around its use in forward and in backward, only the shard kept between.
#include "sharding.hpp"

#include <set>

#include "workbook/errors.hpp"

namespace ch07 {

ParameterSharding::ParameterSharding(torch::nn::Module& model, std::vector<Layer> layers,
                                     workbook::Communicator& comm, const MakeOptimizer& make_optimizer,
                                     const ShardingOptions& options)
    : layers_(std::move(layers)), comm_(comm) {
  frozen_parameter_bytes_ = frozen_parameter_bytes(model);
  max_grad_norm_ = options.max_grad_norm;
  std::set<const void*> in_a_layer;
  std::vector<FlatGroup*> groups;
  for (size_t l = 0; l < layers_.size(); ++l) {
    std::vector<torch::Tensor> trainable;
    for (const torch::Tensor& p : layers_[l].parameters)
      if (p.requires_grad()) {
        WB_ASSERT(in_a_layer.insert(p.unsafeGetTensorImpl()).second, "stage 3: a parameter of layer {} is in two layers",
                  layers_[l].name);
        trainable.push_back(p);
      }
    if (trainable.empty()) {
      groups_.push_back(nullptr);
      continue;
    }
    groups_.push_back(std::make_unique<FlatGroup>(trainable, comm.size(), comm.rank(), options.partition));
    FlatGroup& group = *groups_.back();
    group.keep_shard_only();  // from here on this rank holds 1/N of the layer
    groups.push_back(&group);
    kept_views_.push_back(group.kept().narrow(0, 0, group.partition().owned_numel()).detach());
    kept_views_.back().mutable_grad() = group.shard_gradient().narrow(0, 0, kept_views_.back().numel());
    for (size_t i = 0; i < trainable.size(); ++i) {
      const unsigned handle =
          trainable[i].register_hook([this, l, i](const torch::Tensor& gradient) { gradient_ready(l, i, gradient); });
      hooks_.emplace_back(trainable[i], handle);
    }
  }
  for (const torch::Tensor& p : trainable_parameters(model))
    WB_CHECK(in_a_layer.count(p.unsafeGetTensorImpl()), "stage 3: a trainable parameter of shape {} is in no layer",
             c10::str(p.sizes()));
  buffers_.resize(layers_.size());
  optimizer_ = make_optimizer(groups, kept_views_);
  start_next_step();
  peak_parameter_bytes_ = gathered_parameter_bytes();
}

ParameterSharding::~ParameterSharding() {
  for (auto& [parameter, handle] : hooks_) parameter.remove_hook(handle);
}

std::vector<FlatGroup*> ParameterSharding::groups() {
  std::vector<FlatGroup*> groups;
  for (auto& group : groups_)
    if (group) groups.push_back(group.get());
  return groups;
}

int64_t ParameterSharding::gathered_parameter_bytes() const {
  int64_t bytes = frozen_parameter_bytes_;
  for (const auto& group : groups_)
    if (group) {
      bytes += group->kept().numel() * group->kept().element_size();
      if (group->gathered()) bytes += group->partition().padded_numel * group->kept().element_size();
    }
  return bytes;
}

void ParameterSharding::gather(size_t l) {
  if (!groups_[l] || groups_[l]->gathered()) return;
  groups_[l]->gather(comm_);
  peak_parameter_bytes_ = std::max(peak_parameter_bytes_, gathered_parameter_bytes());
}

void ParameterSharding::release(size_t l) {
  if (groups_[l]) groups_[l]->release();
}

void ParameterSharding::gather_full() {
  // Not counted in peak_parameter_bytes: that is training's.
  for (auto& group : groups_)
    if (group) group->gather(comm_);
}

void ParameterSharding::release_full() {
  for (size_t l = 0; l < layers_.size(); ++l) release(l);
}

void ParameterSharding::start_next_step() {
  unfinished_ = static_cast<int64_t>(layers_.size()) - 1;
  last_reduced_in_backward_ = reduced_in_backward_;
  reduced_in_backward_ = 0;
}

void ParameterSharding::zero_grad() {
  for (auto& group : groups_)
    if (group)
      for (const torch::Tensor& p : group->parameters())
        if (p.grad().defined()) const_cast<torch::Tensor&>(p).mutable_grad().reset();
}

void ParameterSharding::finish_layers_after(int64_t l) {
  for (; unfinished_ > l; --unfinished_) {
    const auto layer = static_cast<size_t>(unfinished_);
    if (!groups_[layer]) continue;
    FlatGroup& group = *groups_[layer];
    if (!buffers_[layer].defined())
      buffers_[layer] = torch::zeros({group.partition().padded_numel}, group.kept().options());
    comm_.reduce_scatter(buffers_[layer], group.shard_gradient(), workbook::ReduceOp::Average);
    buffers_[layer] = torch::Tensor();
    release(layer);
    for (const torch::Tensor& p : group.parameters())
      if (p.grad().defined()) const_cast<torch::Tensor&>(p).mutable_grad().reset();
    if (!in_step_) ++reduced_in_backward_;
  }
}

torch::Tensor ParameterSharding::forward(workbook::Classifier& model, const torch::Tensor& images) {
  WB_NOT_IMPLEMENTED("ex7.5");  // TODO(ex7.5): your code here
}

void ParameterSharding::gradient_ready(size_t layer, size_t index, const torch::Tensor& gradient) {
  WB_ASSERT(layer < groups_.size() && groups_[layer] && index < groups_[layer]->parameters().size(),
            "no parameter ({}, {})", layer, index);
  WB_ASSERT(static_cast<int64_t>(layer) <= unfinished_, "a gradient for layer {}, already reduced", layer);
  WB_NOT_IMPLEMENTED("ex7.5");  // TODO(ex7.5): your code here
}

void ParameterSharding::step() {
  in_step_ = true;
  WB_NOT_IMPLEMENTED("ex7.5");  // TODO(ex7.5): your code here
  in_step_ = false;
  zero_grad();
  start_next_step();
}

HeldBytes ParameterSharding::held() const {
  HeldBytes held;
  held.parameters = gathered_parameter_bytes();
  for (const auto& group : groups_)
    if (group) held.gradients += group->shard_gradient().numel() * group->shard_gradient().element_size();
  held.optimizer_state = optimizer_state_bytes(*optimizer_);
  return held;
}

}  // namespace ch07
