// schedules.hpp — ex10.3: four collectives written as programs of messages,
// so that simulate() (simulator.hpp) can say what each one costs before
// ex10.4 writes it down as a closed form. They use send, recv and
// start_exchange only, so they run on any Communicator, simulated or real.
//
// Start and end state, four ranks, all-reduce (sum):
//
//                 rank 0        rank 1        rank 2        rank 3
//   before        a0 b0 c0 d0   a1 b1 c1 d1   a2 b2 c2 d2   a3 b3 c3 d3
//   after         A  B  C  D    A  B  C  D    A  B  C  D    A  B  C  D
//                 (A = a0 + a1 + a2 + a3, on every rank)
//
// and broadcast from root 2: before, only rank 2's buffer x matters;
// after, every rank holds x.
//
// What sets the four apart is which messages go where, one round after
// another, and that is the exercise:
//   recursive doubling   every round, each rank swaps its WHOLE buffer with
//                        one partner and adds; the partners of successive
//                        rounds are ever farther apart (1, 2, 4, ... ranks)
//   Rabenseifner         first a reduce-scatter in which each round halves
//                        what a rank still reduces (it keeps one half and
//                        gives its partner the other), then an all-gather
//                        that retraces those rounds
//   binomial tree        every round, each rank that already holds the
//                        buffer sends all of it to one that does not
//   scatter + all-gather each rank first receives only its own piece of the
//                        root's buffer (ch04::ring_segment's pieces), then
//                        Chapter 4's ring all-gather spreads them
#pragma once
#include <torch/torch.h>

#include "cost_model.hpp"
#include "simulator.hpp"
#include "workbook/communicator.hpp"

namespace ch10 {

// Every function: a flat, contiguous float32 or float64 `buffer` of the same
// count on every rank (any count: 0, fewer elements than ranks, not divisible
// by them), any root in [0, p), p >= 1 (one rank: nothing to send).
// Collective: every rank calls it. Point-to-point calls only.

// ---- ex10.3 -------------------------------------------------------------------
// All-reduce (sum) by recursive doubling. p a power of two (a UserError otherwise).
void recursive_doubling_all_reduce(torch::Tensor& buffer, workbook::Communicator& comm);
// All-reduce (sum) by Rabenseifner's algorithm. p a power of two.
void rabenseifner_all_reduce(torch::Tensor& buffer, workbook::Communicator& comm);
// Broadcast of `root`'s buffer by a binomial tree: ⌈log₂p⌉ rounds at most.
void binomial_tree_broadcast(torch::Tensor& buffer, int root, workbook::Communicator& comm);
// Broadcast of `root`'s buffer by a scatter, then ch04::ring_all_gather.
// The point of it is the bytes: on a link with α = 0 it must end within
// 2·n·β for a buffer of n bytes at every p, where the binomial tree takes
// ⌈log₂p⌉·n·β; and it must take no more than 2(p − 1) steps on a link with β = 0.
void scatter_all_gather_broadcast(torch::Tensor& buffer, int root, workbook::Communicator& comm);

// ---- given ----------------------------------------------------------------------
// The program behind `collective` by `algorithm` (Chapter 4's ring, each
// segment one message, or one of the above; a broadcast from rank 0) on
// `ranks` simulated ranks, a buffer of `count` float32 elements, over
// `link`. What ex10.4's closed forms describe: on Link{1, 0} its time counts
// the messages one after another, on Link{0, 1} the bytes. A UserError for a
// pair no program here runs.
SimulatedRun simulate_collective(Collective collective, Algorithm algorithm, int ranks, int64_t count,
                                 const Link& link);

}  // namespace ch10
