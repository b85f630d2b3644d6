// checkpoint.hpp — Chapter 9's second half: activation checkpointing, which
// keeps fewer activations and computes some twice.
//
//   without:  x ─[block 1]─ a1 ─[block 2]─ a2 ─[block 3]─ a3 ─[block 4]─ y
//             backward needs every block's saved tensors: all kept until then
//
//   with:     x ══[blocks 1-4, no autograd]══> y        keeps x only
//             backward of y: blocks 1-4 run again from x, recorded this time,
//             for x's gradient and the blocks' weights' gradients
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

// ex9.5. The contract, against the same segment run plainly (no checkpoint)
// from the same weights and generator state:
//  - forward returns what segment(input) returns, and leaves for backward
//    the input only, none of the segment's activations;
//  - after backward, the input's gradient (when it requires one) and every
//    parameter's .grad are bit for bit the plain run's, the dropout masks
//    included, each parameter's hooks having fired exactly once;
//  - the random generators (the CPU's, and the input's GPU's) end where the
//    plain run leaves them: what runs after backward draws the same numbers;
//  - under autocast, the same dtypes as the plain run, whether backward runs
//    inside the autocast scope or after it (Note [no cached casts without
//    autograd]);
//  - an input that needs no gradient (the images) still gets its segment's
//    parameters their gradients.
// `needs_grad` is the one-element tensor of Note [a checkpoint and DDP's
// hooks], given no gradient back. What to save, and what backward must redo
// in which order, is the exercise.
//
// Note: [no cached casts without autograd] Inside autocast, a float32 weight
// cast to 16 bits is cached for the rest of the scope (Note [the cast cache]
// in workbook/autocast.hpp). A copy cast while autograd is off (as in a
// Function's forward) has no gradient history; reused by a recomputation in
// the same scope, it would give the weights no gradient.
class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                               const torch::Tensor& needs_grad, const Segment& segment);
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs);
};

// segment(input), checkpointed (given).
torch::Tensor checkpoint(const Segment& segment, const torch::Tensor& input);

}  // namespace ch09
