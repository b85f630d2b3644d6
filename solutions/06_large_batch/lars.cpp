// lars.cpp — ex6.2: LARS, a trust ratio per layer on top of momentum SGD.
#include "optimizers.hpp"

#include <torch/optim/serialize.h>

#include "workbook/errors.hpp"

namespace ch06 {

// Given: what a checkpoint holds of the options and the state.
void LarsOptions::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(lr);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(momentum);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(weight_decay);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(trust_coefficient);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(adapt);
}
void LarsOptions::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, lr);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, momentum);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, weight_decay);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, trust_coefficient);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(bool, adapt);
}
void LarsParamState::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(momentum_buffer);
}
void LarsParamState::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, momentum_buffer);
}
void Lars::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::serialize<LarsParamState, LarsOptions>(archive, *this);
}
void Lars::load(torch::serialize::InputArchive& archive) {
  torch::optim::serialize<LarsParamState, LarsOptions>(archive, *this);
}

Lars::Lars(std::vector<torch::optim::OptimizerParamGroup> param_groups, LarsOptions defaults)
    : Optimizer(std::move(param_groups), std::make_unique<LarsOptions>(defaults)) {
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
      double local_lr = 1.0;
      if (options.adapt()) {
        const double weight_norm = p.norm().item<double>();
        const double grad_norm = grad.norm().item<double>();
        const double denominator = grad_norm + options.weight_decay() * weight_norm;
        if (weight_norm > 0 && denominator > 0) local_lr = options.trust_coefficient() * weight_norm / denominator;
      }
      torch::Tensor update = grad;
      if (options.weight_decay() != 0) update = update.add(p, options.weight_decay());
      const std::string key = c10::guts::to_string(p.unsafeGetTensorImpl());
      if (!state_.count(key)) {
        auto fresh = std::make_unique<LarsParamState>();
        fresh->momentum_buffer(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        state_[key] = std::move(fresh);
      }
      torch::Tensor& velocity = static_cast<LarsParamState&>(*state_[key]).momentum_buffer();
      velocity.mul_(options.momentum()).add_(update, options.lr() * local_lr);
      p.sub_(velocity);
    }
  }
  // END SOLUTION
  return loss;
}

}  // namespace ch06
