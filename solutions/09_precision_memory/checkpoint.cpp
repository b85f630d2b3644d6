// checkpoint.cpp — ex9.5: recompute instead of store.
#include "checkpoint.hpp"

#include <ATen/Context.h>

#include <optional>

#include "workbook/autocast.hpp"
#include "workbook/errors.hpp"

namespace ch09 {
namespace {

// The segment kept in the context for backward (a context holds IValues;
// a capsule holds an object of our own, as Chapter 5 keeps its Communicator).
struct SegmentCapsule : torch::CustomClassHolder {
  explicit SegmentCapsule(Segment kept) : segment(std::move(kept)) {}
  Segment segment;
};

}  // namespace

torch::Tensor checkpoint(const Segment& segment, const torch::Tensor& input) {
  // Note [a checkpoint and DDP's hooks]: what makes the output require a gradient.
  const torch::Tensor needs_grad = torch::empty({1}, torch::TensorOptions().device(input.device()).requires_grad(true));
  return CheckpointFunction::apply(input, needs_grad, segment);
}

torch::Tensor CheckpointFunction::forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                                          const torch::Tensor& needs_grad, const Segment& segment) {
  WB_ASSERT(needs_grad.requires_grad(), "checkpoint: needs_grad must require a gradient");
  // BEGIN SOLUTION ex9.5
  ctx->saved_data["segment"] = c10::IValue::make_capsule(c10::make_intrusive<SegmentCapsule>(segment));
  ctx->saved_data["input_requires_grad"] = input.requires_grad();
  {
    at::Generator cpu = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(cpu.mutex());
    ctx->saved_data["cpu_rng"] = cpu.get_state();
  }
  if (input.is_cuda()) {
    at::Generator gpu = at::globalContext().defaultGenerator(input.device());
    std::lock_guard<std::mutex> lock(gpu.mutex());
    ctx->saved_data["gpu_rng"] = gpu.get_state();
  }
  // Under autocast, the recomputation must compute in the same dtypes.
  const c10::DeviceType device_type = input.device().type();
  ctx->saved_data["autocast"] = at::autocast::is_autocast_enabled(device_type);
  ctx->saved_data["autocast_dtype"] = at::autocast::get_autocast_dtype(device_type);
  ctx->save_for_backward({input});
  // Note [no cached casts without autograd] (checkpoint.hpp): cast here, with
  // autograd off, a cached weight would have no gradient history, and a
  // recomputation in the same autocast scope would reuse it. So no cache.
  const bool cache_was_enabled = at::autocast::is_autocast_cache_enabled();
  at::autocast::set_autocast_cache_enabled(false);
  torch::Tensor output;
  try {
    output = segment(input);  // autograd is off here: nothing inside is kept for backward
  } catch (...) {
    at::autocast::set_autocast_cache_enabled(cache_was_enabled);
    throw;
  }
  at::autocast::set_autocast_cache_enabled(cache_was_enabled);
  return output;
  // END SOLUTION
}

torch::autograd::variable_list CheckpointFunction::backward(torch::autograd::AutogradContext* ctx,
                                                            torch::autograd::variable_list grad_outputs) {
  // BEGIN SOLUTION ex9.5
  const torch::Tensor saved_input = ctx->get_saved_variables()[0];
  const Segment& segment =
      static_cast<SegmentCapsule*>(ctx->saved_data.at("segment").toCapsule().get())->segment;
  const bool input_requires_grad = ctx->saved_data.at("input_requires_grad").toBool();
  const torch::Tensor input = saved_input.detach().requires_grad_(input_requires_grad);

  // Note: [the random state of a recomputation] Dropout draws from the
  // generator: the recomputation must draw what forward drew, and leave the
  // generator where it was, so that what runs after backward draws what it
  // would have drawn without a checkpoint.
  at::Generator cpu = at::detail::getDefaultCPUGenerator();
  at::Generator gpu = input.is_cuda() ? at::globalContext().defaultGenerator(input.device()) : at::Generator();
  torch::Tensor cpu_now, gpu_now;
  {
    std::lock_guard<std::mutex> lock(cpu.mutex());
    cpu_now = cpu.get_state();
    cpu.set_state(ctx->saved_data.at("cpu_rng").toTensor());
  }
  if (gpu.defined()) {
    std::lock_guard<std::mutex> lock(gpu.mutex());
    gpu_now = gpu.get_state();
    gpu.set_state(ctx->saved_data.at("gpu_rng").toTensor());
  }
  torch::Tensor output;
  {
    torch::AutoGradMode with_autograd(true);
    std::optional<workbook::AutocastGuard> autocast;  // as forward ran
    if (ctx->saved_data.at("autocast").toBool())
      autocast.emplace(input.device().type(), ctx->saved_data.at("autocast_dtype").toScalarType());
    output = segment(input);
  }
  {
    std::lock_guard<std::mutex> lock(cpu.mutex());
    cpu.set_state(cpu_now);
  }
  if (gpu.defined()) {
    std::lock_guard<std::mutex> lock(gpu.mutex());
    gpu.set_state(gpu_now);
  }
  // The parameters' gradients accumulate into their .grad here, their hooks
  // firing once (Note [a checkpoint and DDP's hooks]).
  if (output.requires_grad()) torch::autograd::backward({output}, {grad_outputs[0]});
  return {input_requires_grad ? input.grad() : torch::Tensor(), torch::Tensor(), torch::Tensor()};
  // END SOLUTION
}

}  // namespace ch09
