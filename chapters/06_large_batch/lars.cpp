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
  WB_NOT_IMPLEMENTED("ex6.2");  // TODO(ex6.2): your code here
  return loss;
}

}  // namespace ch06
