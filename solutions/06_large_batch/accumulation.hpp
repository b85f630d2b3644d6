// accumulation.hpp — ex6.4 gradient accumulation and ex6.5 aggregation
// frequency: a global batch larger than what fits, and communication that
// does not happen every batch.
//
//   one optimizer step of global batch R · K · B   (R ranks, K micro-batches of B)
//
//   rank r:  micro 1: forward, backward  ─┐ gradients add up in .grad,
//            micro 2: forward, backward   │ no communication
//            ...                          │
//            micro K: forward, backward  ─┘
//            then the ranks' gradients are averaged (ONE all-reduce) → optimizer step
//
//   The end state: the weights one step on the whole global batch (the mean
//   loss over its R · K · B samples) would give, for a model whose samples do
//   not interact. BatchNorm normalizes each micro-batch on its own ("ghost
//   batch norm", Hoffer et al. 2017): a different model in training.
// BEGIN SOLUTION NOTE ex6.4
//   Σ_k ∇(loss_k / K) is the gradient of the mean loss over the K·B samples:
//   each micro-batch's mean loss is divided by K before its backward.
// END SOLUTION NOTE
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
// rank's part of the global batch, all of the same size (different sizes are
// a UserError, raised before any communication). The step must equal one
// step of `optimizer` on every rank's micro-batches together (mean
// cross-entropy over all of them), with ONE collective,
// ch03::all_reduce_gradients, and one optimizer step; gradients left in .grad
// by earlier work must not count. Returns this rank's mean loss over its
// micro-batches, detached, as a tensor (no host read per micro-batch: a test
// counts them).
torch::Tensor accumulated_train_step(workbook::Classifier& model, torch::optim::Optimizer& optimizer,
                                     const std::vector<ch03::Batch>& micro_batches, workbook::Communicator& comm);

// ---- ex6.5 ----------------------------------------------------------------------

// The same idea, one batch per call, as training loops take them: what
// Determined calls the aggregation frequency. Every `frequency` calls to add()
// make a round: the round's last call averages the gradients over ranks (ONE
// all-reduce, ch03::all_reduce_gradients) and steps the optimizer, and that
// step must equal one step on every rank's batches of the round together
// (their mean loss); the other calls communicate nothing and leave the
// weights as they are. Frequency 1 is plain DDP.
//
// The end state of a round, which callers read: when the round's last add()
// returns, .grad holds the gradient the optimizer stepped with, the mean
// over every rank of the round's gradient (ch06_train --noise-scale reads it
// there, beside the observer's local one: noise_scale.hpp). The
// next round's gradients must start from nothing all the same.
//
// Why it measures communication: with frequency k a batch costs
// compute + communication / k, so timing k = 1 against a large k, with the
// same batches, isolates what the all-reduce (and the optimizer step) costs
// per step — no profiler, and on whatever network the job runs over.
//
// A round's end is also a measurement point: just before the all-reduce,
// .grad holds this rank's own mean gradient over the round's batches, and
// just after, the mean over every rank's. add() calls the observer given to
// observe_local_gradients() there, once per round, if one is set.
class GradientAggregator {
 public:
  GradientAggregator(workbook::Classifier& model, torch::optim::Optimizer& optimizer, workbook::Communicator& comm,
                     int64_t frequency);
  // One batch. Returns true when this call communicated and stepped.
  bool add(const ch03::Batch& batch);
  // Batches added since the last step (0 right after one, and at the start).
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
