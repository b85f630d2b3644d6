// stage1.cpp — ex7.2: ZeRO stage 1, each rank keeps and steps the optimizer
// state of its shard only.
#include "sharding.hpp"

#include "workbook/errors.hpp"

namespace ch07 {

OptimizerStateSharding::OptimizerStateSharding(torch::nn::Module& model, workbook::Communicator& comm,
                                               const MakeOptimizer& make_optimizer, const ShardingOptions& options)
    : group_(std::make_unique<FlatGroup>(trainable_parameters(model), comm.size(), comm.rank(), options.partition)),
      comm_(comm) {
  frozen_parameter_bytes_ = frozen_parameter_bytes(model);
  max_grad_norm_ = options.max_grad_norm;
  // The optimizer sees one tensor: this rank's part of the flat buffer
  // (detach: a leaf of its own that shares the buffer's memory), whose
  // gradient is shard_gradient(), where step() must put this rank's shard of
  // the averaged gradient.
  owned_ = group_->owned().detach();
  owned_.mutable_grad() = group_->shard_gradient().narrow(0, 0, owned_.numel());
  optimizer_ = make_optimizer({group_.get()}, {owned_});
}

// Note: [gradients dropped, not zeroed] As torch::optim::Optimizer::zero_grad
// does by default (set_to_none): the next backward then writes each gradient
// fresh instead of zeroing it here and adding into it there, two kernels a
// parameter fewer. On a GPU each is a launch: Chapter 11's step on an H200
// launched 52 zero_ and 52 add_ a step into its 52 gradients, where
// PyTorch's, its gradients set to none, launched neither (`tables.py ops` on
// chapters/11_gpt/measured/profile_h200_2026-11-29_*).
void OptimizerStateSharding::zero_grad() {
  for (const torch::Tensor& p : group_->parameters())
    if (p.grad().defined()) p.mutable_grad().reset();
}

void OptimizerStateSharding::step() {
  // BEGIN SOLUTION ex7.2
  // Every rank has the full gradient of its own batch. After the
  // reduce-scatter, rank r holds the average over ranks of shard r only:
  // half of an all-reduce, (N-1)/N of the buffer sent.
  torch::Tensor gradients = group_->gather_gradients();
  comm_.reduce_scatter(gradients, group_->shard_gradient(), workbook::ReduceOp::Average);
  // The optimizer steps 1/N of the parameters, with 1/N of the state.
  step_optimizer(comm_);
  // The other half of the all-reduce: every rank gets every updated shard.
  // The shard already lies at its place in the flat buffer: a gather in
  // place (Note [all-gather in place] in the communicator), no copy.
  comm_.all_gather(group_->shard(), group_->flat());
  // END SOLUTION
}

HeldBytes OptimizerStateSharding::held() const {
  HeldBytes held;
  held.parameters = frozen_parameter_bytes_ + group_->flat().numel() * group_->flat().element_size();
  for (const torch::Tensor& p : group_->parameters())
    if (p.grad().defined()) held.gradients += p.grad().numel() * p.grad().element_size();
  held.gradients += group_->shard_gradient().numel() * group_->shard_gradient().element_size();
  held.optimizer_state = optimizer_state_bytes(*optimizer_);
  return held;
}

}  // namespace ch07
