// fused_adam.cpp — FusedAdam (fused_adam.hpp).
#include "workbook/fused_adam.hpp"

#include <ATen/ops/_fused_adam.h>

namespace workbook {

torch::Tensor FusedAdam::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    torch::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamOptions&>(group.options());
    std::vector<torch::Tensor> parameters, gradients, averages, squares, maxima, steps;
    for (torch::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& slot = state_[p.unsafeGetTensorImpl()];
      if (!slot) {  // as torch::optim::Adam makes it
        auto state = std::make_unique<torch::optim::AdamParamState>();
        state->step(0);
        state->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        state->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        if (options.amsgrad()) state->max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(state);
      }
      auto& state = static_cast<torch::optim::AdamParamState&>(*slot);
      // The kernel reads the count after this step, as PyTorch's Adam(fused=True)
      // hands it over; taken from the state, so that a loaded state counts on.
      state.step(state.step() + 1);
      torch::Tensor& step = steps_[p.unsafeGetTensorImpl()];
      // On p's device: the CUDA kernel reads the count there.
      if (!step.defined()) step = torch::zeros({}, p.options().dtype(torch::kFloat32));
      step.fill_(static_cast<double>(state.step()));
      parameters.push_back(p);
      gradients.push_back(p.grad());
      averages.push_back(state.exp_avg());
      squares.push_back(state.exp_avg_sq());
      if (options.amsgrad()) maxima.push_back(state.max_exp_avg_sq());
      steps.push_back(step);
    }
    if (parameters.empty()) continue;
    const auto [beta1, beta2] = options.betas();
    at::_fused_adam_(parameters, gradients, averages, squares, maxima, steps, options.lr(), beta1, beta2,
                     options.weight_decay(), options.eps(), options.amsgrad(), /*maximize=*/false);
  }
  return loss;
}

}  // namespace workbook
