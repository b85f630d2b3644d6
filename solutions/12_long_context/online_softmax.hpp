// online_softmax.hpp — Chapter 12: attention over keys that arrive in pieces.
//
//   keys 0 ........................................ T-1   (no rank holds them all)
//        └── piece a ──┘└──── piece b ────┘└─ piece c ─┘
//   attend(q, piece a), attend(q, piece b), ...            each a Partial
//   merge(merge(a, b), c)  ==  attend(q, all the keys)     the same numbers
//
// A Partial is what a query row knows after seeing some of the keys, kept
// small enough to carry from piece to piece: never the scores themselves.
#pragma once
#include <torch/torch.h>

namespace ch12 {

// The attention of each query row over some set of keys, S (per row, the
// keys of the piece it may see):
//   max[i] = max over j in S of s_ij              (−inf when S is empty)
//   sum[i] = Σ over j in S of exp(s_ij − max[i])  (0 when S is empty)
//   out[i] = Σ over j in S of exp(s_ij − max[i]) · v_j / sum[i]
//                                                 (0 when S is empty)
// where s_ij = q_i · k_j / √head_size. `out` is normalised: a Partial over
// all the keys is the attention's output itself.
struct Partial {
  torch::Tensor out;  // [..., rows, head_size], q's dtype
  torch::Tensor max;  // [..., rows], float32 or float64 (q's if float64)
  torch::Tensor sum;  // [..., rows], the same dtype as max
};

// ex12.1. q [..., rows, d], k and v [..., keys, d] (the same leading
// dimensions), `visible` [rows, keys] bool (true: row i may see key j),
// broadcast over the leading dimensions. Returns the Partial of each row over
// its visible keys. A row that sees none is empty: max −inf, sum 0, out 0,
// and no NaN anywhere.
Partial attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& visible);

// ex12.1. The Partial over the union of two disjoint sets of keys, from the
// Partials over each: for every row, what attend() over both pieces at once
// gives (up to rounding), whichever of the two is empty, and in either order.
Partial merge(const Partial& a, const Partial& b);

// log Σ exp over the keys seen: max + log(sum), −inf for an empty row. What
// a backward pass needs to recompute a row's softmax, one number per row.
torch::Tensor log_sum_exp(const Partial& partial);

}  // namespace ch12
