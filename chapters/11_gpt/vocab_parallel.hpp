// vocab_parallel.hpp — Chapter 11: the loss over a vocabulary split between
// the tensor ranks (Megatron-LM's vocabulary-parallel cross-entropy).
//
//   logits of the whole vocabulary, [rows, V]     (no rank may ever hold them)
//   rank 0: columns [0, V/t)     rank 1: [V/t, 2V/t)   ...   rank t-1
//           └──────────────── ? ────────────────┘
//   every rank: the mean over rows of −log softmax(logits)[row, target[row]],
//   exactly what cross_entropy of the whole logits gives; and in backward,
//   each rank the gradient of its own columns only.
#pragma once
#include <torch/torch.h>

#include "workbook/communicator.hpp"

namespace ch11 {

// ex11.2. `shard`: this rank's columns of the logits, [rows, V/t], the
// columns [rank·V/t, (rank+1)·V/t) of the vocabulary (t = comm.size(), which
// divides V). `targets`: [rows] int64, the same on every rank, each in
// [0, V). Returns the mean cross-entropy over rows, a scalar, the same on
// every rank; its backward gives this rank's columns' gradient. Collective
// over the tensor group `comm`; no rank holds more than its own columns.
// Logits as large as 1e4 in magnitude (float32) must give a finite loss.
class VocabParallelCrossEntropy : public torch::autograd::Function<VocabParallelCrossEntropy> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& shard,
                               const torch::Tensor& targets, workbook::Communicator* comm);
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs);
};

inline torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& shard, const torch::Tensor& targets,
                                                  workbook::Communicator& comm) {
  return VocabParallelCrossEntropy::apply(shard, targets, &comm);
}

}  // namespace ch11
