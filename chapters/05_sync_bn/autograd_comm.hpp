// autograd_comm.hpp — keeping a Communicator in an autograd context, so that
// a custom function's backward can communicate too.
//
// Note: [the communicator in backward] backward() is static and receives only
// its context, whose saved_data holds IValues. A capsule is the IValue for an
// object of our own type: it holds a pointer to the Communicator, which
// outlives every backward pass of the training step that created it.
#pragma once
#include <torch/torch.h>

#include "workbook/communicator.hpp"

namespace ch05 {

struct CommunicatorCapsule : torch::CustomClassHolder {
  explicit CommunicatorCapsule(workbook::Communicator* held) : comm(held) {}
  workbook::Communicator* comm;
};

inline void save_communicator(torch::autograd::AutogradContext* ctx, workbook::Communicator* comm) {
  ctx->saved_data["comm"] = c10::IValue::make_capsule(c10::make_intrusive<CommunicatorCapsule>(comm));
}

inline workbook::Communicator& saved_communicator(torch::autograd::AutogradContext* ctx) {
  const c10::intrusive_ptr<torch::CustomClassHolder> capsule = ctx->saved_data.at("comm").toCapsule();
  return *static_cast<CommunicatorCapsule*>(capsule.get())->comm;
}

}  // namespace ch05
