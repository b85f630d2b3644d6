// context_gpt.hpp — Chapter 11's GPT (workbook/gpt.hpp) over a context group:
// every rank holds the whole model and T/cp positions of every sequence.
//
//   bytes [N, T] ──► rank r keeps the columns layout.positions[r]   [N, T/cp]
//   embeddings, LayerNorms, MLPs, the logits: position by position, local
//   attention: ring_attention over the group (ex12.3, ex12.4)
//   loss: the mean over this rank's positions; the group's mean is the mean
//         of the ranks' (they hold as many positions each)
#pragma once
#include <torch/torch.h>

#include "causal_split.hpp"
#include "ring_attention.hpp"
#include "workbook/communicator.hpp"
#include "workbook/gpt.hpp"

namespace ch12 {

struct ContextLayout {
  Split split = Split::Balanced;
  int64_t context = 0;    // T
  torch::Tensor positions;  // [cp, T/cp] int64: row r, the positions rank r holds
};
ContextLayout make_layout(int64_t context, int ranks, Split split);

// This rank's logits [N, T/cp, vocabulary] for its columns of `bytes`
// ([N, T/cp], the positions layout.positions[comm.rank()]): what
// workbook::Gpt's forward gives at those positions of the whole sequence.
torch::Tensor context_parallel_logits(workbook::GptImpl& gpt, const torch::Tensor& bytes, const ContextLayout& layout,
                                      workbook::Communicator& comm, RingOptions options = {});

// Every rank's gradients averaged, in one buffer: the ranks' losses are means
// over as many positions each, so the group's mean loss is their mean, and
// so is its gradient.
void average_gradients(workbook::GptImpl& gpt, workbook::Communicator& comm);

// The columns of [N, T] `whole` that this rank holds: [N, T/cp].
torch::Tensor my_columns(const torch::Tensor& whole, const ContextLayout& layout, int rank);

}  // namespace ch12
