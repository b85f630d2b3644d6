// router.hpp — Chapter 13: which experts each token goes to, which of those
// assignments an expert has room for, and a loss that keeps the experts
// evenly used.
//
//   start:  logits [tokens, experts], one row per token of this rank
//   end:    each token's k experts and their weights; each assignment kept
//           or dropped; and the group's balancing loss
//
// An expert that everyone picks is a rank that everyone waits for; the
// capacity bounds its work, and the loss teaches the router to spread it.
#pragma once
#include <cstdint>

#include <torch/torch.h>

#include "workbook/communicator.hpp"

namespace ch13 {

struct Routing {
  torch::Tensor probabilities;  // [tokens, experts]: softmax of the logits over the experts
  torch::Tensor experts;        // [tokens, k] int64: the k most probable experts, most probable first
  torch::Tensor weights;        // [tokens, k]: their probabilities, scaled to add up to 1 per token
  torch::Tensor kept;           // [tokens, k] bool: whether the expert has room for this assignment
};

// How many of one rank's assignments an expert takes in one call:
// ⌈capacity_factor · tokens · top_k / experts⌉ (the even share, with room to spare).
int64_t expert_capacity(int64_t tokens, int64_t experts, int64_t top_k, double capacity_factor);

// ex13.2. Routes this rank's tokens.
//   logits    [tokens, experts], any floating dtype (float32 or float64 out)
//   top_k     1 ≤ top_k ≤ experts
//   capacity  how many assignments each expert keeps, ≥ 0
// An expert keeps this rank's assignments in token order: the first
// `capacity` tokens that chose it (as any of their k choices) are kept, the
// rest dropped. probabilities and weights are differentiable in the logits.
// Two experts of equal probability may come in either order.
Routing route(const torch::Tensor& logits, int64_t top_k, int64_t capacity);

// ex13.2. The balancing loss over the group's tokens (Switch Transformer's):
//   N · Σᵢ fᵢ · Pᵢ     N the number of experts, and over every token of every rank of `comm`:
//   fᵢ  the share of all assignments (every token's k choices, kept or not) that chose expert i
//   Pᵢ  the mean probability of expert i
// 1 when the routing is even; N when every token puts all its probability
// on the one expert it chooses (top_k = 1). A scalar, the same on every rank,
// differentiable in this rank's probabilities (through Pᵢ; fᵢ is a count).
// Collective over `comm`: every rank calls it, with the same number of experts
// and k (a rank may have no tokens).
torch::Tensor load_balancing_loss(const Routing& routing, workbook::Communicator& comm);

}  // namespace ch13
