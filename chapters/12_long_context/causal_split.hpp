// causal_split.hpp — Chapter 12: which positions of a sequence each rank of a
// context group holds.
//
//   a sequence of T positions, cp ranks, each holding T/cp of them:
//   contiguous   rank 0: 0 ... T/cp−1   rank 1: T/cp ... 2T/cp−1   ...
//   balanced     rank r: some other T/cp positions, chosen so that under the
//                causal mask every rank has the same work (ex12.2)
//
// Causal attention makes position i attend to the i+1 positions 0..i: a rank
// holding late positions has far more work than one holding early ones, and
// every step waits for the slowest rank.
#pragma once
#include <cstdint>
#include <string>

#include <torch/torch.h>

namespace ch12 {

enum class Split { Contiguous, Balanced };
Split parse_split(const std::string& name);  // "contiguous" or "balanced"; a UserError otherwise
const char* split_name(Split split);

// The positions rank `rank` of `ranks` holds, int64 [T/ranks], ascending.
// Contiguous needs ranks to divide T; Balanced (ex12.2) needs 2·ranks to
// divide T, and gives every rank the same number of (query, key) pairs
// under the causal mask: Σ over its positions i of (i + 1) is the same on
// every rank. Every position is held by exactly one rank.
// A UserError names T and ranks when they do not divide.
torch::Tensor held_positions(int64_t T, int rank, int ranks, Split split);

// ex12.2. `gathered`: every rank's block in rank order along `dim`, each of
// T/ranks entries held as held_positions(T, r, ranks, split) gives them (an
// all-gather's output, flattened over ranks). Returns the same entries in
// sequence order: position p at index p along `dim`. Differentiable: the
// gradient of the result flows back to the right rank's entries.
torch::Tensor to_sequence_order(const torch::Tensor& gathered, int64_t dim, int ranks, Split split);

// The (query, key) pairs the causal mask lets rank `rank` compute, over the
// whole sequence's keys: Σ over its positions i of (i + 1).
int64_t causal_pairs(int64_t T, int rank, int ranks, Split split);

}  // namespace ch12
