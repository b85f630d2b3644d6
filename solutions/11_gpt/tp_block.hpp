// tp_block.hpp — Chapter 11: one transformer block split over the tensor
// ranks, by attention heads and by the MLP's hidden features.
//
//   whole block (workbook::GptBlock)          rank r of t
//   x ─ LN1 ─ qkv [w → 3w] ─ attention ─      x ─ LN1 ─ ? ─ attention of heads
//       projection [w → w] ─ + ─ LN2 ─            [r·h/t, (r+1)·h/t) ─ ? ─ + ─ LN2 ─
//       expand [w → 4w] ─ GELU ─                  ? ─ GELU ─ ? ─ +
//       contract [4w → w] ─ +                 the output, and x's gradient, the
//                                             whole block's on every rank
#pragma once
#include <torch/torch.h>

#include "tensor_parallel.hpp"  // Chapter 8: f, g, ColumnParallelLinear, RowParallelLinear
#include "workbook/communicator.hpp"
#include "workbook/gpt.hpp"

namespace ch11 {

// ex11.1. This rank's part of `whole` (its weights copied): the heads
// [r·h/t, (r+1)·h/t) of the attention and the hidden features
// [r·4w/t, (r+1)·4w/t) of the MLP; the LayerNorms whole, on every rank.
// t = comm.size() must divide the heads (a UserError otherwise).
// forward(x [N, T, w], the same on every rank): the whole block's output on
// every rank; after backward, x's gradient is the whole block's, and each
// rank's parameters' gradients are its parts of the whole block's. Two
// all-reduces in forward and two in backward, whatever t.
// The parts' layout: projection's input columns, and expand's rows and
// contract's columns, are this rank's run of the whole's; qkv holds 3w/t of
// the whole qkv's rows, in an order of your choosing (the tests read it from
// the weights): which rows is the lesson's question.
class TensorParallelBlockImpl : public torch::nn::Module {
 public:
  TensorParallelBlockImpl(const workbook::GptBlockImpl& whole, workbook::Communicator& comm);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  ch08::ColumnParallelLinear qkv{nullptr}, expand{nullptr};
  ch08::RowParallelLinear projection{nullptr}, contract{nullptr};
  int64_t heads = 0;  // this rank's
};
TORCH_MODULE(TensorParallelBlock);

}  // namespace ch11
