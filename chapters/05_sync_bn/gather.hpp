// gather.hpp — Chapter 5's second half: an all-gather that autograd can see
// through, and a contrastive loss whose negatives come from every rank
// ("gather distributed", as SimCLR-style training does it).
//
//   forward                                   backward
//   rank 0: z₀ [B,D] ┐                        rank 0: g₀ [nB,D]: its loss's gradient
//   rank 1: z₁ [B,D] ┼─ all-gather ─> every   rank 1: g₁ [nB,D]   for all nB rows      ─> ?
//   rank 2: z₂ [B,D] ┘   rank: [z₀;z₁;z₂]     rank 2: g₂ [nB,D]
//
// What training follows is the sum of every rank's loss (DDP averages the
// gradients), and every rank's loss uses every rank's rows.
#pragma once
#include <cstdint>
#include <utility>

#include <torch/torch.h>

#include "workbook/communicator.hpp"

namespace ch05 {

// ---- ex5.5: a differentiable all-gather ------------------------------------------

// forward(input [B, ...], comm): [n·B, ...], rank r's input at rows [r·B, (r+1)·B).
// Every rank's B and trailing shape must be the same. One all-gather.
// backward(grad [n·B, ...]): this rank's grad is its own loss's gradient for
// the whole gathered tensor; return [B, ...], this rank's input's gradient
// of the sum of every rank's loss. One collective, from which each rank
// receives only the B rows it needs.
class AllGatherFunction : public torch::autograd::Function<AllGatherFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                               workbook::Communicator* comm);
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs);
};

inline torch::Tensor all_gather_with_grad(const torch::Tensor& input, workbook::Communicator& comm) {
  return AllGatherFunction::apply(input, &comm);
}

// ---- ex5.6: NT-Xent with negatives from every rank -------------------------------

// The contrastive loss of SimCLR (NT-Xent). z1, z2: [B, D], two views' embeddings
// of this rank's B images (row i of z1 and row i of z2 are the same image).
// Over the global batch of N = n·B images there are 2N embeddings, each
// L2-normalized. For each of this rank's 2B embeddings (the anchors):
//   logits = anchor · every global embedding / temperature   (2N values)
//   loss   = cross-entropy with the anchor's other view as the class,
//            the anchor itself excluded (its logit set to −∞)
// Returns the mean over this rank's 2B anchors. With DDP averaging the
// gradients, training follows the mean over all 2N anchors: exactly the
// single-process loss on the global batch.
// Global order: [view 1 of rank 0's B images, of rank 1's, ..., view 2 of rank 0's, ...].
torch::Tensor nt_xent_loss(const torch::Tensor& z1, const torch::Tensor& z2, double temperature,
                           workbook::Communicator& comm);

// Given: two random views of each image (a shift of up to 2 pixels each way,
// a horizontal flip half the time, a little noise), drawn from `seed`.
std::pair<torch::Tensor, torch::Tensor> two_views(const torch::Tensor& images, uint64_t seed);

// Given: the encoder the contrastive tests and demo train: flatten → fc(784→64) →
// ReLU → fc(64→16). Its output is the embedding nt_xent_loss normalizes.
struct EncoderImpl : torch::nn::Module {
  EncoderImpl();
  torch::Tensor forward(const torch::Tensor& images);
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Encoder);

}  // namespace ch05
