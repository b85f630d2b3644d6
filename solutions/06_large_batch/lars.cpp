// lars.cpp — ex6.2: LARS, a trust ratio per layer on top of momentum SGD.
#include "optimizers.hpp"

#include <torch/optim/serialize.h>

#include "workbook/errors.hpp"
#include "workbook/torch_compat.hpp"

namespace ch06 {

// Given: what a checkpoint holds of the options and the state.
void LarsOptions::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(lr);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(momentum);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(weight_decay);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(trust_coefficient);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(adapt);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(momentum_correction);
}
void LarsOptions::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, lr);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, momentum);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, weight_decay);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, trust_coefficient);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(bool, adapt);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(bool, momentum_correction);
}
void LarsParamState::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(momentum_buffer);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(last_lr);
}
void LarsParamState::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, momentum_buffer);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, last_lr);
}
void Lars::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::serialize<LarsParamState, LarsOptions>(archive, *this);
}
void Lars::load(torch::serialize::InputArchive& archive) {
  torch::optim::serialize<LarsParamState, LarsOptions>(archive, *this);
}

Lars::Lars(std::vector<torch::optim::OptimizerParamGroup> param_groups, LarsOptions defaults)
    : Optimizer(param_groups, std::make_unique<LarsOptions>(defaults)) {
  workbook::torch_compat::keep_group_options(param_groups_, param_groups);  // Note [a group's own options]
  WB_CHECK(defaults.lr() >= 0 && defaults.momentum() >= 0 && defaults.weight_decay() >= 0 &&
               defaults.trust_coefficient() > 0,
           "LARS: lr {}, momentum {} and weight_decay {} must be >= 0 and trust_coefficient {} > 0", defaults.lr(),
           defaults.momentum(), defaults.weight_decay(), defaults.trust_coefficient());
}

torch::Tensor Lars::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    torch::AutoGradMode enable_grad(true);
    loss = closure();
  }
  // BEGIN SOLUTION ex6.2
  for (torch::optim::OptimizerParamGroup& group : param_groups_) {
    const auto& options = static_cast<const LarsOptions&>(group.options());
    for (torch::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      const torch::Tensor& grad = p.grad();
      // The trust ratio: each layer moves by about lr · η of its own norm.
      // Note: it stays a tensor, on the parameter's device. Reading the norms
      // on the host (item()) would make a GPU wait twice per tensor per step
      // (Chapter 1's rule); torch::where replaces the `if`. Float64, as the
      // host's arithmetic was, so the ratio is the same to the last bit.
      torch::Tensor step_size = torch::full({}, options.lr(), p.options().dtype(torch::kFloat64));
      if (options.adapt()) {
        const torch::Tensor weight_norm = p.norm().to(torch::kFloat64);
        const torch::Tensor denominator = grad.norm().to(torch::kFloat64) + options.weight_decay() * weight_norm;
        const torch::Tensor defined = weight_norm.gt(0).logical_and(denominator.gt(0));
        const torch::Tensor local_lr = options.trust_coefficient() * weight_norm / denominator;
        step_size = options.lr() * torch::where(defined, local_lr, torch::ones_like(local_lr));
      }
      torch::Tensor update = grad;
      if (options.weight_decay() != 0) update = update.add(p, options.weight_decay());
      const auto key = workbook::torch_compat::optimizer_state_key(p);
      if (!state_.count(key)) {
        auto fresh = std::make_unique<LarsParamState>();
        fresh->momentum_buffer(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        state_[key] = std::move(fresh);
      }
      auto& state = static_cast<LarsParamState&>(*state_[key]);
      torch::Tensor& velocity = state.momentum_buffer();
      // Note: [momentum correction] v holds past steps already multiplied by
      // their rate. When the rate changes (warm-up, decay), Goyal et al. §2.2
      // rescale v by lr_new / lr_old, so the steps remembered move as far as
      // steps at the new rate would. (SGD that applies lr outside v, as
      // torch::optim::SGD does, gets this for free.)
      double momentum = options.momentum();
      if (options.momentum_correction() && state.last_lr() > 0) momentum *= options.lr() / state.last_lr();
      state.last_lr(options.lr());
      velocity.mul_(momentum).add_(update * step_size.to(p.scalar_type()));
      p.sub_(velocity);
    }
  }
  // END SOLUTION
  return loss;
}

}  // namespace ch06
