// data_parallel.hpp — Chapter 2's API: naive DataParallel in one process.
// scatter (ex2.1), replicate (ex2.2), parallel_apply (ex2.3), gather (ex2.4),
// and the forward pass and training step built from them (ex2.5).
//
//            images [B]                          labels [B] (primary)
//                |                                   |
//   ex2.1   scatter ──► chunk 0   chunk 1 ... chunk N-1   (one per device)
//   ex2.2   replicate   model 0   model 1 ... model N-1   (copies, rebuilt every step)
//   ex2.3   parallel_apply: one thread per replica runs forward on its chunk
//   ex2.4   gather  ──► logits [B] on the primary device ─┤
//   ex2.5   loss on the primary, backward through gather, the replicas and
//           their gradient edges into the original model, optimizer step.
#pragma once
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "workbook/models.hpp"

namespace ch02 {

// ---- ex2.1: scatter -----------------------------------------------------------

// How many samples each device gets, for devices that run speeds[i] samples a
// second: equal speeds for identical devices; a lower one for a device that
// also does other work (the primary gathers, computes the loss and steps the
// optimizer). The step ends when the last device has finished its chunk, so
// the longest sizes[i] / speeds[i] must be as short as whole samples allow;
// every device gets at least one sample, and the sizes sum to `samples`.
// A UserError, saying which, for fewer samples than devices, no devices, or
// a speed that is not a positive, finite number.
std::vector<int64_t> chunk_sizes(int64_t samples, const std::vector<double>& speeds);

// Given: the sizes for `parts` identical devices (the one above, every speed 1).
std::vector<int64_t> chunk_sizes(int64_t samples, int64_t parts);

// Splits `batch` along dim 0 into one chunk per device, chunk i on devices[i],
// with chunk_sizes(batch.size(0), devices.size()) samples: chunk 0 the first
// rows, chunk 1 the next, and so on, every row in exactly one chunk. A chunk on
// the batch's own device takes no memory of its own. An empty batch, an empty
// device list, or more devices than samples is a UserError that says so.
std::vector<torch::Tensor> scatter(const torch::Tensor& batch, const std::vector<torch::Device>& devices);

// ---- ex2.2: replicate ---------------------------------------------------------

// One copy of `model` per device, replica i on devices[i], in the model's mode
// (train or eval). `model` must live on devices[0], the primary device.
//  * Parameters: each replica holds its own copy of the values, connected to
//    the original by a gradient edge, so that backward through any replica sums
//    the gradients into the original parameters' .grad.
//  * Buffers (BatchNorm's running statistics): replica 0 shares the original's
//    buffers, so its updates land in the model; the others get copies.
// Mismatched devices (CPU mixed with CUDA, a model not on devices[0]) are a
// UserError.
std::vector<workbook::ClassifierPtr> replicate(workbook::Classifier& model, const std::vector<torch::Device>& devices);

// ---- ex2.3: parallel_apply ----------------------------------------------------

// Runs replicas[i]->forward(inputs[i]) on its own thread, one thread per
// replica, each with `threads_per_replica` intra-op threads, on devices[i], and
// under the caller's autograd mode (NoGradGuard included). Returns the outputs
// in replica order. If any replica throws, every thread is still joined, and
// the error is rethrown as a std::runtime_error naming the (first) failing
// replica and its device: "replica 1 on cpu failed: ...". Lists of different
// lengths (replicas, inputs, devices) are a UserError, raised before any
// thread starts.
std::vector<torch::Tensor> parallel_apply(const std::vector<workbook::ClassifierPtr>& replicas,
                                          const std::vector<torch::Tensor>& inputs,
                                          const std::vector<torch::Device>& devices, int threads_per_replica);

// ---- ex2.4: gather ------------------------------------------------------------

// Concatenates `outputs` along dim 0 on `destination`, in order. Backward
// through the result must reach every output: each gets its own slice of the
// gradient, on its own device.
torch::Tensor gather(const std::vector<torch::Tensor>& outputs, const torch::Device& destination);

// ---- ex2.5: the forward pass and the training step ----------------------------

// Where a step's time goes (seconds, devices synchronized at each boundary).
struct StepTimes {
  double scatter_s = 0.0, replicate_s = 0.0, forward_s = 0.0, gather_s = 0.0;  // data_parallel_forward
  double backward_s = 0.0, optimizer_s = 0.0;                                   // data_parallel_step
  double total() const { return scatter_s + replicate_s + forward_s + gather_s + backward_s + optimizer_s; }
};

// Adds the time since the previous lap to one field of a StepTimes, waiting for
// every device first. With a null StepTimes it does nothing (and waits for
// nothing): timing is free when nobody asks for it.
class PhaseTimer {
 public:
  PhaseTimer(StepTimes* times, const std::vector<torch::Device>& devices);
  void lap(double StepTimes::*phase);

 private:
  StepTimes* times_;
  std::vector<torch::Device> devices_;
  double last_ = 0.0;
};

// The logits of `images` computed by DataParallel: scatter, replicate,
// parallel_apply, gather onto devices[0]. Records its four phases in `times`.
torch::Tensor data_parallel_forward(workbook::Classifier& model, const torch::Tensor& images,
                                    const std::vector<torch::Device>& devices, int threads_per_replica,
                                    StepTimes* times = nullptr);

// One training step: DataParallel forward, mean cross-entropy against `labels`
// on the primary device, backward, optimizer step on the original model.
// Returns the loss, detached, on the primary device. Records all six phases.
torch::Tensor data_parallel_step(workbook::Classifier& model, torch::optim::Optimizer& optimizer,
                                 const torch::Tensor& images, const torch::Tensor& labels,
                                 const std::vector<torch::Device>& devices, int threads_per_replica,
                                 StepTimes* times = nullptr);

}  // namespace ch02
