// expert_mlp.hpp — Chapter 13: a transformer block's MLP as a mixture of
// experts, the experts spread over an expert group.
//
//   x = x + MLP(LN(x))                     Chapter 11's block, second half
//   x = x + Σ_kept weight · expert(LN(x))  this layer: each token's k experts,
//                                          wherever they are held
//
//   start:  rank r holds its own tokens h [tokens, width], the router and
//           LayerNorm (the same on every rank), and experts
//           r·E/ep .. (r+1)·E/ep − 1 (E experts over ep ranks)
//   end:    rank r holds the layer's output for its own tokens; a token
//           whose assignments were all dropped comes out as it went in
//
// Every token may need every rank, and every rank holds a few experts'
// weights instead of all of them: E times the MLP's parameters, at the
// cost of a dense MLP of k experts' width per token, plus two exchanges.
#pragma once
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "router.hpp"
#include "workbook/communicator.hpp"

namespace ch13 {

struct MoeOptions {
  int64_t width = 256;
  int64_t hidden = 512;           // each expert: width → hidden → GELU → width
  int64_t experts = 8;            // over the whole group
  int64_t top_k = 2;
  double capacity_factor = 1.25;  // expert_capacity's
  double contract_std = 0.02;     // the experts' last weights' initial spread (GPT-2's, scaled by depth)
  // A UserError naming the numbers unless the sizes are positive, top_k ≤
  // experts, and the experts split evenly over `ranks`.
  void check(int ranks) const;
};

class ExpertMlpImpl : public torch::nn::Module {
 public:
  // Draws every expert's weights (the same draws on every rank, so that the
  // generator stays in step) and keeps this rank's.
  ExpertMlpImpl(const MoeOptions& options, workbook::Communicator& comm);

  // ex13.3. h [tokens, width] → [tokens, width]: h + Σ over the token's kept
  // assignments of weight · expert(norm(h)), the routing from route() with
  // expert_capacity(tokens, ...) and the router's logits of norm(h). Sets
  // balancing_loss (load_balancing_loss of this call's routing) and
  // routing. Differentiable in h and in every weight, this rank's experts'
  // included (their gradients from every rank's tokens). Collective over the
  // group: every rank calls it; a rank may have no tokens.
  torch::Tensor forward(const torch::Tensor& h);

  MoeOptions options;
  workbook::Communicator* comm;
  int64_t local_experts;  // E / ep
  int64_t first_expert;   // this rank's first expert: rank · local_experts
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear router{nullptr};  // width → experts, no bias
  // This rank's experts, stacked: expert first_expert + j is row j.
  torch::Tensor expand_weight;    // [local, width, hidden]
  torch::Tensor expand_bias;      // [local, hidden]
  torch::Tensor contract_weight;  // [local, hidden, width]
  torch::Tensor contract_bias;    // [local, width]
  // Set by forward:
  torch::Tensor balancing_loss;
  Routing routing;
};
TORCH_MODULE(ExpertMlp);

}  // namespace ch13
