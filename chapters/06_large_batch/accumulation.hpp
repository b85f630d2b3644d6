// accumulation.hpp — ex6.4 gradient accumulation and ex6.5 aggregation
// frequency: a global batch larger than what fits, and communication that
// does not happen every batch.
//
//   one optimizer step of global batch R · K · B   (R ranks, K micro-batches of B)
//
//   rank r:  micro 1: forward, backward(loss/K)  ─┐ gradients add up in .grad,
//            micro 2: forward, backward(loss/K)   │ no communication
//            ...                                  │
//            micro K: forward, backward(loss/K)  ─┘
//            all_reduce_gradients (ONE, the mean over ranks) → optimizer step
//
// Σ_k ∇(loss_k / K) is the gradient of the mean loss over the K·B samples, so
// the step equals one step on the whole batch — for a model whose samples do
// not interact: BatchNorm normalizes each micro-batch on its own ("ghost batch
// norm", Hoffer et al. 2017), a different model in training.
//
// Note: [no_sync] PyTorch's DDP all-reduces from backward hooks, so skipping
// the non-final micro-steps needs a `with model.no_sync():` block. Chapter 3's
// DDP all-reduces after backward, when it is called; not calling it is all
// the skipping there is.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include <torch/torch.h>

#include "ddp.hpp"  // Chapter 3's reference: Batch, all_reduce_gradients
#include "workbook/communicator.hpp"
#include "workbook/models.hpp"

namespace ch06 {

// Given: `batch` cut into consecutive micro-batches of `micro_batch` samples
// (the last may be smaller; callers of accumulated_train_step avoid that).
std::vector<ch03::Batch> split_batch(const ch03::Batch& batch, int64_t micro_batch);

// ---- ex6.4 ----------------------------------------------------------------------

// One optimizer step over K = micro_batches.size() micro-batches of this
// rank's part of the global batch, all of the same size: zero the gradients;
// for each, forward, mean cross-entropy / K, backward (gradients add up);
// after the last only, average the gradients over ranks (ONE all-reduce,
// ch03::all_reduce_gradients); step. Returns the mean loss over the
// micro-batches, detached.
torch::Tensor accumulated_train_step(workbook::Classifier& model, torch::optim::Optimizer& optimizer,
                                     const std::vector<ch03::Batch>& micro_batches, workbook::Communicator& comm);

// ---- ex6.5 ----------------------------------------------------------------------

// The same idea, one batch per call, as training loops take them: what
// Determined calls the aggregation frequency. Every call adds one batch's
// gradient (of its mean loss / frequency); every `frequency`-th call averages
// over ranks, steps the optimizer and zeroes the gradients for the next round.
// Frequency 1 is plain DDP.
//
// Why it measures communication: with frequency k a batch costs
// compute + communication / k, so timing k = 1 against a large k, with the
// same batches, isolates what the all-reduce (and the optimizer step) costs
// per step — no profiler, and on whatever network the job runs over.
//
// A round's end is also a measurement point: just before the all-reduce,
// .grad holds this rank's own mean gradient over the round's batches, and
// just after, the mean over every rank's. add() calls the observer given to
// observe_local_gradients() there (ch06_train --noise-scale compares the two:
// workbook/noise_scale.hpp).
class GradientAggregator {
 public:
  GradientAggregator(workbook::Classifier& model, torch::optim::Optimizer& optimizer, workbook::Communicator& comm,
                     int64_t frequency);
  // One batch. Returns true when this call communicated and stepped.
  bool add(const ch03::Batch& batch);
  // Batches added since the last step (0 right after one).
  int64_t pending() const { return pending_; }
  int64_t frequency() const { return frequency_; }
  // `observer(model)` is called at the end of every round, just before the
  // all-reduce, while .grad holds this rank's own gradient.
  void observe_local_gradients(std::function<void(workbook::Classifier&)> observer) {
    local_gradient_observer_ = std::move(observer);
  }
  // This rank's mean loss over the batches of the last completed step: a
  // 0-dim tensor on the model's device (read it when you need the number).
  torch::Tensor last_loss() const { return last_loss_; }

 private:
  workbook::Classifier& model_;
  torch::optim::Optimizer& optimizer_;
  workbook::Communicator& comm_;
  int64_t frequency_;
  int64_t pending_ = 0;
  torch::Tensor loss_sum_;   // undefined at the start of a round
  torch::Tensor last_loss_;
  std::function<void(workbook::Classifier&)> local_gradient_observer_;  // may be empty
};

}  // namespace ch06
