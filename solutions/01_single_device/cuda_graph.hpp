// cuda_graph.hpp — ch01_train --cuda-graph: the whole train step (forward,
// backward, Adam) captured once as a CUDA graph, then replayed at every step.
// Given code: the chapter's lesson reads it in "Why the host is the bound".
#pragma once
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "single_device.hpp"

namespace ch01 {

// Note: [why the host is the bound] A FashionCNN step at batch 100 is many
// small kernels (the forward's, the backward's, several per parameter tensor
// in torch::optim::Adam), each of which runs for microseconds on a GPU, and
// the host launches each through LibTorch's dispatcher and autograd. Measured
// on an H200: an eager step took 3.1 ms with the GPU busy about a third of it,
// in C++ as in Python; replayed as a graph, 0.67 ms (the chapter's lesson,
// "Expected results"). A CUDA graph records the step's kernels once; a replay
// launches them all with one call. What a replay cannot do is run host code:
// every value the step needs must already be on the device, at an address
// that stays the same from replay to replay.

// Adam as torch::optim::Adam computes it (the same update, within rounding),
// with its state on the device: both moments and the step count are tensors
// beside the parameters, created at the first step, and a step changes them
// only through kernels (LibTorch's fused Adam, one kernel for every
// parameter). torch::optim::Adam keeps the step count on the host and works
// out the bias corrections there: a graph would replay the corrections of the
// step it captured forever. Parameters without a gradient are left alone, as
// torch::optim::Adam leaves them.
class DeviceAdam : public torch::optim::Optimizer {
 public:
  DeviceAdam(std::vector<torch::Tensor> parameters, double lr);
  torch::Tensor step(LossClosure closure = nullptr) override;

 private:
  double lr_;
  std::vector<torch::Tensor> exp_avg_, exp_avg_sq_, step_count_;  // one each per parameter
};

// A step function that runs `eager_step` for its first `eager_steps` calls
// (on a side stream: cuDNN's and cuBLAS's choices, the optimizer's state and
// the allocator's blocks are all made there, before the capture, which must
// not make them), captures it once on the next call, and from then on copies
// each batch into the graph's own input tensors and replays the graph. The
// loss it returns is a copy: the graph's own is overwritten at the next
// replay. A batch of any other size than `batch_size` (an epoch's short last
// batch) runs eagerly: the graph's shapes are fixed, and since the optimizer
// keeps its state on the device, both paths update the same state.
// `eager_step` must run on the device's current stream and keep no host
// state between calls (ex1.2's train_step on a DeviceAdam does both). Needs
// a CUDA build of LibTorch and batches on a GPU; otherwise a UserError.
StepFn captured_step(StepFn eager_step, int64_t batch_size, int64_t eager_steps = 3);

}  // namespace ch01
