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
  WB_NOT_IMPLEMENTED("ex9.2");  // TODO(ex9.2): your code here
}

void DynamicLossScaler::update(bool found_inf) {
  WB_NOT_IMPLEMENTED("ex9.2");  // TODO(ex9.2): your code here
}

bool scaled_step(DynamicLossScaler& scaler, torch::optim::Optimizer& optimizer,
                 const std::vector<torch::Tensor>& parameters, const std::function<void()>& advance_schedule,
                 workbook::Communicator& comm) {
  WB_NOT_IMPLEMENTED("ex9.2");  // TODO(ex9.2): your code here
}

}  // namespace ch09
