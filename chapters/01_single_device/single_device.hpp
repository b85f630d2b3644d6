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
// 0..num_samples-1 drawn from a generator seeded with `seed + epoch` (the same
// on every call with the same arguments; another epoch, another order), or
// 0, 1, 2, ... when `shuffle` is false. int64 tensor [num_samples] on the CPU.
torch::Tensor epoch_order(int64_t num_samples, uint64_t seed, int64_t epoch, bool shuffle);

struct Batch {
  torch::Tensor images;  // [B, 1, 28, 28] on the training device
  torch::Tensor labels;  // [B] int64 on the training device
};

// Batch number `index` of an epoch: the samples order[index*batch_size ...],
// the last batch holding what is left. `images`/`labels` may live on the CPU
// (pinned when training on CUDA) or already on `device`; the batch ends up on
// `device`, copied without blocking the host. Asking for a batch past the end
// is an error.
Batch make_batch(const torch::Tensor& images, const torch::Tensor& labels, const torch::Tensor& order,
                 int64_t index, int64_t batch_size, const torch::Device& device);

// How many batches an epoch of `num_samples` has (the last may be partial).
int64_t batches_per_epoch(int64_t num_samples, int64_t batch_size);

// ---- ex1.2: the train step ----------------------------------------------------

// One optimization step on `batch`: forward, mean cross-entropy, backward, step.
// Returns the loss as a detached 0-dim tensor on the training device: reading
// its value (item()) would make the host wait for the device every step.
torch::Tensor train_step(workbook::Classifier& model, torch::optim::Optimizer& optimizer, const Batch& batch);

// ---- ex1.3: evaluation --------------------------------------------------------

struct EvalResult {
  int64_t correct = 0;     // samples whose arg-max logit is the label
  int64_t total = 0;       // samples evaluated: all of them, each once
  double mean_loss = 0.0;  // cross-entropy summed over samples, divided by total
  double accuracy() const { return total == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(total); }
};

// Evaluates `model` on the whole of images/labels in batches of `batch_size`,
// in eval mode (BatchNorm uses its running statistics, dropout is off) and
// without building an autograd graph; the model's mode is restored afterwards.
EvalResult evaluate(workbook::Classifier& model, const torch::Tensor& images, const torch::Tensor& labels,
                    int64_t batch_size, const torch::Device& device);

// ---- ex1.4: one timed epoch ---------------------------------------------------

struct EpochStats {
  double mean_loss = 0.0;     // training loss averaged over samples (not over batches)
  int64_t samples = 0;        // samples trained on this epoch
  int64_t timed_samples = 0;  // samples trained after the warm-up steps
  double timed_seconds = 0.0; // wall time of the steps after warm-up, device synchronized
  double samples_per_s() const { return timed_seconds > 0 ? static_cast<double>(timed_samples) / timed_seconds : 0.0; }
};

// Trains one epoch in train mode, visiting the samples in `order`. The first
// `warmup_steps` steps are run but not timed (first-call allocations and
// kernel selection are not the steady state); the clock starts after them and
// stops after the last step, with the device synchronized before each read.
// `on_step(done, total)` is called after every step (for a progress bar).
EpochStats train_epoch(workbook::Classifier& model, torch::optim::Optimizer& optimizer, const torch::Tensor& images,
                       const torch::Tensor& labels, const torch::Tensor& order, int64_t batch_size,
                       const torch::Device& device, int64_t warmup_steps,
                       const std::function<void(int64_t, int64_t)>& on_step = {});

}  // namespace ch01
