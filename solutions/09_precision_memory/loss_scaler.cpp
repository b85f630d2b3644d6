// loss_scaler.cpp — ex9.2: the dynamic loss scaler, and a step under it.
#include "precision.hpp"
#include "workbook/errors.hpp"

namespace ch09 {

DynamicLossScaler::DynamicLossScaler(ScalerOptions options) : options_(options), scale_(options.init_scale) {
  WB_CHECK(options.init_scale > 0 && options.growth_factor > 1 && options.backoff_factor > 0 &&
               options.backoff_factor < 1 && options.growth_interval > 0,
           "loss scaler: a positive scale, growth > 1, 0 < backoff < 1 and a positive interval (got {}, {}, {}, {})",
           options.init_scale, options.growth_factor, options.backoff_factor, options.growth_interval);
}

bool DynamicLossScaler::unscale(const std::vector<torch::Tensor>& parameters, workbook::Communicator& comm) {
  // BEGIN SOLUTION ex9.2
  // Note: [one flag, summed] Each rank counts its own non-finite gradients on
  // the device, with no host read per tensor; one all-reduce of the count
  // tells every rank whether any rank found one.
  torch::NoGradGuard no_grad;
  torch::Tensor non_finite = torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat32).device(comm.device()));
  for (const torch::Tensor& p : parameters) {
    if (!p.grad().defined()) continue;
    torch::Tensor grad = p.mutable_grad();
    grad.div_(scale_);
    non_finite += torch::logical_not(torch::isfinite(grad)).sum().to(torch::kFloat32);
  }
  comm.all_reduce(non_finite, workbook::ReduceOp::Sum);
  return non_finite.item<float>() > 0.0f;
  // END SOLUTION
}

void DynamicLossScaler::update(bool found_inf) {
  // BEGIN SOLUTION ex9.2
  if (found_inf) {
    scale_ *= options_.backoff_factor;
    clean_steps_ = 0;
    ++skipped_steps_;
    return;
  }
  if (++clean_steps_ == options_.growth_interval) {
    scale_ *= options_.growth_factor;
    clean_steps_ = 0;
  }
  // END SOLUTION
}

bool scaled_step(DynamicLossScaler& scaler, torch::optim::Optimizer& optimizer,
                 const std::vector<torch::Tensor>& parameters, const std::function<void()>& advance_schedule,
                 workbook::Communicator& comm) {
  // BEGIN SOLUTION ex9.2
  const bool found_inf = scaler.unscale(parameters, comm);
  if (!found_inf) {
    optimizer.step();
    if (advance_schedule) advance_schedule();
  }
  scaler.update(found_inf);
  return !found_inf;
  // END SOLUTION
}

}  // namespace ch09
