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
  WB_NOT_IMPLEMENTED("ex9.5");  // TODO(ex9.5): your code here
}

torch::autograd::variable_list CheckpointFunction::backward(torch::autograd::AutogradContext* ctx,
                                                            torch::autograd::variable_list grad_outputs) {
  WB_NOT_IMPLEMENTED("ex9.5");  // TODO(ex9.5): your code here
}

}  // namespace ch09
