// moe_gpt.hpp — Chapter 11's GPT with a mixture of experts in every block
// (given): attention and everything else replicated on every rank, each
// block's MLP an ExpertMlp over the group (ex13.3). Every rank trains on
// its own windows, as in data parallelism.
//
//   bytes [N, T] ─► embeddings ─► blocks × layers:
//       x = x + attention(LN1(x))
//       x = ExpertMlp(x)              x + Σ_kept weight · expert(LN2(x))
//   ─► final LayerNorm ─► logits (tied to the token embedding)
//
// With `dense`, each block's MLP is one MLP of top_k · hidden units, so that
// a token meets as many MLP weights as in the expert model: the same active
// parameters, 1/E of the expert model's MLP parameters in all.
#pragma once
#include <vector>

#include <torch/torch.h>

#include "expert_mlp.hpp"
#include "workbook/communicator.hpp"
#include "workbook/gpt.hpp"

namespace ch13 {

struct MoeGptOptions {
  workbook::GptOptions gpt;
  MoeOptions moe;      // moe.width is gpt.width
  bool dense = false;
};

class MoeBlockImpl : public torch::nn::Module {
 public:
  MoeBlockImpl(const MoeGptOptions& options, workbook::Communicator& comm);
  torch::Tensor forward(const torch::Tensor& x);  // [N, T, width] → [N, T, width]
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  workbook::CausalSelfAttention attention{nullptr};
  ExpertMlp experts{nullptr};                              // or, dense:
  torch::nn::Linear expand{nullptr}, contract{nullptr};   // width → top_k·hidden → width
};
TORCH_MODULE(MoeBlock);

class MoeGptImpl : public torch::nn::Module {
 public:
  MoeGptImpl(const MoeGptOptions& options, workbook::Communicator& comm);
  torch::Tensor forward(const torch::Tensor& bytes);  // [N, T] → [N, T, vocabulary]
  // The last forward's balancing losses, their mean over blocks (0 if dense).
  torch::Tensor balancing_loss() const;
  // The last forward's assignments dropped for want of room, over all
  // blocks, and the assignments made (this rank's tokens).
  std::pair<int64_t, int64_t> dropped_of_assigned() const;
  // The experts' weights (each rank its own) and the rest (the same on every rank).
  std::vector<torch::Tensor> expert_parameters() const;
  std::vector<torch::Tensor> replicated_parameters() const;

  MoeGptOptions options;
  torch::nn::Embedding tokens{nullptr}, positions{nullptr};
  std::vector<MoeBlock> blocks;
  torch::nn::LayerNorm final_norm{nullptr};
};
TORCH_MODULE(MoeGpt);

// Note: [two kinds of gradient] Each rank's loss is the mean over its own
// tokens, and the group's loss is the ranks' mean. A replicated weight's
// gradient is averaged over the group (one all-reduce). An expert's weights
// live on one rank, and the exchange's backward has already brought it every
// rank's contribution: their sum, which the group's mean divides by ep.
void average_gradients(MoeGptImpl& model, workbook::Communicator& comm);

}  // namespace ch13
