// checkpoint.hpp — Chapter 9's second half: activation checkpointing, which
// keeps fewer activations and computes some twice.
//
//   without:  x ─[block 1]─ a1 ─[block 2]─ a2 ─[block 3]─ a3 ─[block 4]─ y
//             backward needs every block's saved tensors: all kept until then
//
//   with:     x ══[blocks 1-4, no autograd]══> y        keeps x only
//             backward of y: restore the random state, run blocks 1-4 again
//             WITH autograd from x, backward through them, hand x's gradient on
//
// ex9.5 is the autograd Function that does it (LibTorch's C++ API has none).
//
// Note: [a checkpoint and DDP's hooks] The parameters inside a segment get
// their gradients from the backward that runs inside CheckpointFunction's
// backward: autograd accumulates them into .grad there, and each parameter's
// hook (Chapter 4's reducer is told of a ready gradient by one) fires there,
// once. The parameters are therefore NOT inputs of the function: for an input,
// autograd would call its hooks a second time when the function returns, with
// the returned gradient or with none. What makes the function's output require
// a gradient when the segment's input does not (the images, into the first
// segment) is a one-element tensor that requires one, passed as an input and
// given no gradient back.
#pragma once
#include <functional>

#include <torch/torch.h>

namespace ch09 {

// A part of a model: the computation from one activation to the next.
using Segment = std::function<torch::Tensor(const torch::Tensor&)>;

// ex9.5.
class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  // `needs_grad`: the one-element tensor of the Note above. Runs `segment`
  // on `input` without recording anything for backward (autograd is off in
  // a Function's forward), after saving the input, the segment, the random
  // generators' states (the CPU's, and the input's GPU's) and whether
  // autocast is on (and in which dtype) for the input's device; under
  // autocast, without its cache of cast weights (Note [no cached casts
  // without autograd] in checkpoint.cpp).
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                               const torch::Tensor& needs_grad, const Segment& segment);
  // Puts the saved random states back, runs the segment again with autograd
  // on (and autocast as it was in forward), from a detached copy of the input (requiring a gradient if the input
  // did), backpropagates grad_outputs through it (the parameters' gradients
  // accumulate into their .grad there), puts the random states back to what
  // they were before, and returns the input's gradient.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs);
};

// segment(input), checkpointed (given).
torch::Tensor checkpoint(const Segment& segment, const torch::Tensor& input);

}  // namespace ch09
