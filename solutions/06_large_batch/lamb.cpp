// lamb.cpp — ex6.3: LAMB, a trust ratio per layer on top of Adam.
#include "optimizers.hpp"

#include <cmath>

#include <torch/optim/serialize.h>

#include "workbook/errors.hpp"
#include "workbook/torch_compat.hpp"

namespace ch06 {

// Given: what a checkpoint holds of the options and the state.
void LambOptions::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(lr);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(beta1);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(beta2);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(eps);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(weight_decay);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(adapt);
}
void LambOptions::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, lr);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, beta1);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, beta2);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, eps);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, weight_decay);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(bool, adapt);
}
void LambParamState::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(step);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg_sq);
}
void LambParamState::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(int64_t, step);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, exp_avg);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, exp_avg_sq);
}
void Lamb::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::serialize<LambParamState, LambOptions>(archive, *this);
}
void Lamb::load(torch::serialize::InputArchive& archive) {
  torch::optim::serialize<LambParamState, LambOptions>(archive, *this);
}

Lamb::Lamb(std::vector<torch::optim::OptimizerParamGroup> param_groups, LambOptions defaults)
    : Optimizer(param_groups, std::make_unique<LambOptions>(defaults)) {
  workbook::torch_compat::keep_group_options(param_groups_, param_groups);  // Note [a group's own options]
  WB_CHECK(defaults.lr() >= 0 && defaults.weight_decay() >= 0 && defaults.eps() > 0 && defaults.beta1() >= 0 &&
               defaults.beta1() < 1 && defaults.beta2() >= 0 && defaults.beta2() < 1,
           "LAMB: lr {} and weight_decay {} must be >= 0, eps {} > 0, betas ({}, {}) in [0, 1)", defaults.lr(),
           defaults.weight_decay(), defaults.eps(), defaults.beta1(), defaults.beta2());
}

torch::Tensor Lamb::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    torch::AutoGradMode enable_grad(true);
    loss = closure();
  }
  // BEGIN SOLUTION ex6.3
  for (torch::optim::OptimizerParamGroup& group : param_groups_) {
    const auto& options = static_cast<const LambOptions&>(group.options());
    for (torch::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      const torch::Tensor& grad = p.grad();
      const auto key = workbook::torch_compat::optimizer_state_key(p);
      if (!state_.count(key)) {
        auto fresh = std::make_unique<LambParamState>();
        fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        state_[key] = std::move(fresh);
      }
      auto& state = static_cast<LambParamState&>(*state_[key]);
      state.step(state.step() + 1);
      const double t = static_cast<double>(state.step());
      // Adam's moments, with its bias corrections.
      state.exp_avg().mul_(options.beta1()).add_(grad, 1 - options.beta1());
      state.exp_avg_sq().mul_(options.beta2()).addcmul_(grad, grad, 1 - options.beta2());
      const double correction1 = 1 - std::pow(options.beta1(), t);
      const double correction2 = 1 - std::pow(options.beta2(), t);
      torch::Tensor update =
          (state.exp_avg() / correction1) / ((state.exp_avg_sq() / correction2).sqrt() + options.eps());
      if (options.weight_decay() != 0) update.add_(p, options.weight_decay());
      // The trust ratio: the step is lr times this layer's own norm. It stays
      // a tensor on the device, as in Lars::step (no item(): no wait per tensor).
      torch::Tensor step_size = torch::full({}, options.lr(), p.options().dtype(torch::kFloat64));
      if (options.adapt()) {
        const torch::Tensor weight_norm = p.norm().to(torch::kFloat64);
        const torch::Tensor update_norm = update.norm().to(torch::kFloat64);
        const torch::Tensor defined = weight_norm.gt(0).logical_and(update_norm.gt(0));
        const torch::Tensor trust = weight_norm / update_norm;
        step_size = options.lr() * torch::where(defined, trust, torch::ones_like(trust));
      }
      p.sub_(update * step_size.to(p.scalar_type()));
    }
  }
  // END SOLUTION
  return loss;
}

}  // namespace ch06
