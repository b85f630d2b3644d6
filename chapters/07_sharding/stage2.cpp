// stage2.cpp — ex7.3: ZeRO stage 2, each bucket's gradient reduce-scattered
// from the hooks during backward; a rank keeps only its shard of each.
#include "sharding.hpp"

#include "reducer.hpp"  // Chapter 4's reference: assign_buckets
#include "workbook/errors.hpp"

namespace ch07 {

GradientSharding::GradientSharding(torch::nn::Module& model, workbook::Communicator& comm,
                                   const MakeOptimizer& make_optimizer, const ShardingOptions& options)
    : comm_(comm) {
  frozen_parameter_bytes_ = frozen_parameter_bytes(model);
  max_grad_norm_ = options.max_grad_norm;
  const std::vector<torch::Tensor> parameters = trainable_parameters(model);
  WB_ASSERT(!parameters.empty(), "stage 2: the model has no trainable parameters");
  std::vector<FlatGroup*> groups;
  for (const ch04::Bucket& bucket :
       ch04::assign_buckets(parameters, options.first_bucket_bytes, options.bucket_cap_bytes)) {
    std::vector<torch::Tensor> members;
    for (size_t i : bucket.parameters) members.push_back(parameters[i]);
    buckets_.push_back(std::make_unique<FlatGroup>(members, comm.size(), comm.rank(), options.partition));
    FlatGroup& group = *buckets_.back();
    groups.push_back(&group);
    owned_.push_back(group.owned().detach());  // as in stage 1: a leaf sharing the buffer
    owned_.back().mutable_grad() = group.shard_gradient().narrow(0, 0, owned_.back().numel());
    const size_t b = buckets_.size() - 1;
    for (size_t i = 0; i < members.size(); ++i) {
      const unsigned handle =
          members[i].register_hook([this, b, i](const torch::Tensor& gradient) { gradient_ready(b, i, gradient); });
      hooks_.emplace_back(members[i], handle);
    }
  }
  buffers_.resize(buckets_.size());
  optimizer_ = make_optimizer(groups, owned_);
  start_next_step();
}

GradientSharding::~GradientSharding() {
  for (auto& [parameter, handle] : hooks_) parameter.remove_hook(handle);
}

std::vector<FlatGroup*> GradientSharding::groups() {
  std::vector<FlatGroup*> groups;
  for (auto& bucket : buckets_) groups.push_back(bucket.get());
  return groups;
}

void GradientSharding::start_next_step() {
  missing_.clear();
  for (auto& bucket : buckets_) missing_.push_back(bucket->parameters().size());
  next_to_reduce_ = 0;
  last_reduced_from_hooks_ = reduced_from_hooks_;
  reduced_from_hooks_ = 0;
}

void GradientSharding::zero_grad() {
  for (auto& bucket : buckets_)
    for (const torch::Tensor& p : bucket->parameters())
      if (p.grad().defined()) const_cast<torch::Tensor&>(p).mutable_grad().reset();
}

void GradientSharding::note_gradient_bytes() {
  int64_t bytes = 0;
  for (const torch::Tensor& buffer : buffers_)
    if (buffer.defined()) bytes += buffer.numel() * buffer.element_size();
  for (auto& bucket : buckets_)
    for (const torch::Tensor& p : bucket->parameters())
      if (p.grad().defined()) bytes += p.grad().numel() * p.grad().element_size();
  peak_gradient_bytes_ = std::max(peak_gradient_bytes_, bytes);
}

void GradientSharding::reduce_bucket(size_t b) {
  FlatGroup& group = *buckets_[b];
  if (!buffers_[b].defined()) buffers_[b] = torch::zeros_like(group.flat());  // no gradient arrived at all
  note_gradient_bytes();
  comm_.reduce_scatter(buffers_[b], group.shard_gradient(), workbook::ReduceOp::Average);
  buffers_[b] = torch::Tensor();  // freed: only this rank's shard of the bucket is kept
  // The .grad LibTorch fills beside the buffers: this bucket's, and the last
  // one of the bucket before (accumulated after its hook had reduced it).
  for (size_t bucket = b > 0 ? b - 1 : 0; bucket <= b; ++bucket)
    for (const torch::Tensor& p : buckets_[bucket]->parameters())
      if (p.grad().defined()) const_cast<torch::Tensor&>(p).mutable_grad().reset();
}

void GradientSharding::gradient_ready(size_t bucket, size_t index, const torch::Tensor& gradient) {
  WB_ASSERT(bucket < buckets_.size() && index < buckets_[bucket]->parameters().size(), "no parameter ({}, {})",
            bucket, index);
  WB_ASSERT(missing_[bucket] > 0, "bucket {} got more gradients than it has parameters", bucket);
  WB_NOT_IMPLEMENTED("ex7.3");  // TODO(ex7.3): your code here
}

void GradientSharding::step() {
  WB_NOT_IMPLEMENTED("ex7.3");  // TODO(ex7.3): your code here
  zero_grad();  // the .grad of the last bucket's last parameter
  start_next_step();
}

HeldBytes GradientSharding::held() const {
  HeldBytes held;
  held.parameters = frozen_parameter_bytes_;
  for (const auto& bucket : buckets_) {
    held.parameters += bucket->flat().numel() * bucket->flat().element_size();
    held.gradients += bucket->shard_gradient().numel() * bucket->shard_gradient().element_size();
  }
  held.optimizer_state = optimizer_state_bytes(*optimizer_);
  return held;
}

}  // namespace ch07
