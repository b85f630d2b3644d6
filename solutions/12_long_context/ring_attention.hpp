// ring_attention.hpp — Chapter 12: causal attention over a sequence that no
// rank holds whole (Liu et al. 2023, "Ring Attention with Blockwise
// Transformers").
//
//   start:  rank r holds q, k, v of its own positions only, [N, heads, T/cp, d]
//   end:    rank r holds the attention output of its own positions, exactly
//           what causal attention over the whole sequence gives there; and in
//           backward, the gradients of its own q, k and v
//
//   the context group is a ring: rank r sends to r+1 and receives from r−1
//   (mod cp); every block of keys and values visits every rank once.
//
// No rank ever holds more than three blocks of keys and values (its own, the
// one it computes with, and the next on its way), nor a [T, T] score
// matrix: memory per rank falls as 1/cp.
#pragma once
#include <torch/torch.h>

#include "online_softmax.hpp"
#include "workbook/communicator.hpp"

namespace ch12 {

struct RingOptions {
  // true: the next block's exchange is started before this block's
  // attention is computed, and waited for after it. false: each exchange is
  // waited for before computing (the bench's comparison).
  bool overlap = true;
};

// ex12.3. Causal ring attention over the context group `comm`, forward and backward.
//   q, k, v     [N, heads, T/cp, head_size], this rank's positions
//   positions   [cp, T/cp] int64, the same on every rank: row r holds the
//               global positions rank r holds (held_positions), in the order
//               of that rank's q, k and v
// Position i sees the keys of positions j ≤ i, wherever they are held.
// Returns [N, heads, T/cp, head_size] in q's dtype; differentiable in q, k
// and v. Collective over `comm`: every rank calls it with the same shapes.
class RingAttention : public torch::autograd::Function<RingAttention> {
 public:
  // The output; saves what backward needs (no [T, T] tensor, no
  // other rank's blocks).
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& positions, workbook::Communicator* comm,
                               RingOptions options);
  // The gradients of this rank's q, k and v: the keys and values of
  // each block travel round the ring again, and each rank's contribution to a
  // block's gradient reaches the block's owner.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs);
};

inline torch::Tensor ring_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const torch::Tensor& positions, workbook::Communicator& comm,
                                    RingOptions options = {}) {
  return RingAttention::apply(q, k, v, positions, &comm, options);
}

}  // namespace ch12
