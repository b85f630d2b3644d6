// fused_adam.hpp — Adam whose step is one pass over each parameter: the
// kernel behind PyTorch's Adam(fused=True) (at::_fused_adam_), under LibTorch's
// torch::optim::Adam, whose options, state (AdamParamState) and checkpoints it
// keeps.
//
// Note: [one pass, not eight] torch::optim::Adam steps a parameter in eight
// element-wise operations (two for each moment, sqrt, a division, eps, the
// update), each reading and writing whole tensors. Over ZeRO's flat buffer of
// a GPT's 3.3 M parameters that is eight passes over 13 MB, memory-bound; the
// fused kernel reads and writes each element once (Chapter 11's results.md
// has the optimizer's row of the step's profile). The same arithmetic in
// another order: the results agree to float rounding, not bit for bit.
#pragma once
#include <map>

#include <torch/torch.h>

namespace workbook {

class FusedAdam : public torch::optim::Adam {
 public:
  using torch::optim::Adam::Adam;
  torch::Tensor step(LossClosure closure = nullptr) override;

 private:
  // The kernel reads the step count from a tensor: one a parameter, set from AdamParamState::step().
  std::map<const void*, torch::Tensor> steps_;
};

}  // namespace workbook
