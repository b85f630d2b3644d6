// single_device.hpp — Chapter 1's API: mini-batches (ex1.1), the train step
// (ex1.2), exact evaluation (ex1.3) and one honestly timed epoch (ex1.4).
#pragma once
#include <cstdint>
#include <functional>

#include <torch/torch.h>

#include "workbook/models.hpp"

namespace ch01 {

// ---- ex1.1: mini-batches ------------------------------------------------------

// The order in which an epoch visits the samples: a permutation of
// 0..num_samples-1, int64 tensor [num_samples] on the CPU, or 0, 1, 2, ... when
// `shuffle` is false. It is a function of (seed, epoch) alone: the same on every
// call with the same arguments (in Chapter 3, on every rank), another for
// another epoch at the same seed and for another seed at the same epoch,
// whatever else has drawn random numbers before, and drawing it leaves
// LibTorch's global generator as it was. (Any such order passes the tests.)
// LibTorch's random functions take an optional generator, and a generator of
// your own is an at::Generator made by at::make_generator<at::CPUGeneratorImpl>,
// which takes a seed: what to seed it with is yours to decide.
// BEGIN SOLUTION NOTE ex1.1
// The reference seeds its generator with seed + epoch, so (seed 7, epoch 2)
// and (seed 8, epoch 1) share an order; the Python baselines do the same, so
// that every implementation visits the samples alike.
// END SOLUTION NOTE
torch::Tensor epoch_order(int64_t num_samples, uint64_t seed, int64_t epoch, bool shuffle);

struct Batch {
  torch::Tensor images;  // [B, 1, 28, 28] on the training device
  torch::Tensor labels;  // [B] int64 on the training device
};

// Batch number `index` of an epoch: the samples order[index*batch_size ...],
// the last batch holding what is left (23 samples in batches of 5: 5 5 5 5 3),
// each label with its image. `images`/`labels` may live on the CPU or already
// on `device`; the batch ends up on `device`, and making it never makes the
// host wait for the device (no blocking copy to a GPU). An index before the
// first batch or past the last is a UserError.
Batch make_batch(const torch::Tensor& images, const torch::Tensor& labels, const torch::Tensor& order,
                 int64_t index, int64_t batch_size, const torch::Device& device);

// How many batches an epoch of `num_samples` has (the last may be partial).
int64_t batches_per_epoch(int64_t num_samples, int64_t batch_size);

// ---- ex1.2: the train step ----------------------------------------------------

// One optimization step on `batch`, and on nothing else: afterwards the
// parameters are what `optimizer` makes of the gradient of this batch's mean
// cross-entropy alone (however many steps came before). Returns that loss, as
// the model computed it before the update, as a 0-dim tensor on the training
// device with no autograd graph behind it: reading its value (item()) would
// make the host wait for the device every step, so the caller decides when.
// BEGIN SOLUTION NOTE ex1.2
// The order: zero_grad, forward, loss, backward, step. backward() adds into
// .grad, so what the previous step left there must go before this backward.
// END SOLUTION NOTE
torch::Tensor train_step(workbook::Classifier& model, torch::optim::Optimizer& optimizer, const Batch& batch);

// ---- ex1.3: evaluation --------------------------------------------------------

struct EvalResult {
  int64_t correct = 0;     // samples whose arg-max logit is the label
  int64_t total = 0;       // samples evaluated: all of them, each once
  double mean_loss = 0.0;  // cross-entropy summed over samples, divided by total
  double accuracy() const { return total == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(total); }
};

// Evaluates `model` on the whole of images/labels in batches of `batch_size`:
// every sample counted once, the short last batch included; the result must
// not depend on `batch_size` (nor on which samples share a batch) and must
// equal a single full-batch pass in eval mode. Builds no autograd graph,
// writes no gradient, changes no BatchNorm statistic, and gives the model back
// in the mode (train or eval) it came in. One host read for the whole call.
EvalResult evaluate(workbook::Classifier& model, const torch::Tensor& images, const torch::Tensor& labels,
                    int64_t batch_size, const torch::Device& device);

// ---- ex1.4: one timed epoch ---------------------------------------------------

struct EpochStats {
  double mean_loss = 0.0;     // training loss averaged over samples (not over batches)
  int64_t samples = 0;        // samples trained on this epoch
  int64_t timed_samples = 0;  // samples trained after the warm-up steps
  double timed_seconds = 0.0; // wall time of the steps after warm-up, their device work included
  double samples_per_s() const { return timed_seconds > 0 ? static_cast<double>(timed_samples) / timed_seconds : 0.0; }
};

// What train_epoch does with each batch: train on it and return its loss as
// train_step does (ex1.2). ch01_train passes train_step itself, or with
// --cuda-graph the same step captured once and replayed (cuda_graph.hpp).
using StepFn = std::function<torch::Tensor(const Batch&)>;

// Trains one epoch in train mode (whatever mode the model came in), one
// call of `step_fn` per batch of `order`, in order. The first `warmup_steps` steps
// are run but not timed (first-call allocations and kernel selection are not
// the steady state): timed_seconds covers the device's work for steps
// warmup_steps..last and nothing before them, also on a GPU, whose kernel
// calls return before the kernels have run; timed_samples counts their
// samples. With no step after the warm-up, both stay 0. mean_loss is the mean
// over the epoch's samples, each sample's loss as the step that trained it
// computed it, and the host reads no value inside the loop: the number of
// host reads must not grow with the number of steps.
// `on_step(done, total)` is called after every step (for a progress bar).
// BEGIN SOLUTION NOTE ex1.4
// The clock: a Stopwatch (timing.hpp waits for the device in start() and
// stop()) started just before step warmup_steps and stopped after the last
// step. The mean: each step's batch mean times its batch size, summed on the
// device, divided by the samples once after the loop.
// END SOLUTION NOTE
EpochStats train_epoch(workbook::Classifier& model, const StepFn& step_fn, const torch::Tensor& images,
                       const torch::Tensor& labels, const torch::Tensor& order, int64_t batch_size,
                       const torch::Device& device, int64_t warmup_steps,
                       const std::function<void(int64_t, int64_t)>& on_step = {});

// The same with ex1.2's train_step(model, optimizer, batch) as the step.
EpochStats train_epoch(workbook::Classifier& model, torch::optim::Optimizer& optimizer, const torch::Tensor& images,
                       const torch::Tensor& labels, const torch::Tensor& order, int64_t batch_size,
                       const torch::Device& device, int64_t warmup_steps,
                       const std::function<void(int64_t, int64_t)>& on_step = {});

}  // namespace ch01
