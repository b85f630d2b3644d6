// ring.hpp — Chapter 4's collectives: a ring all-reduce built from
// point-to-point exchanges (Communicator::start_exchange).
//
// Four ranks, a buffer cut into four segments a b c d (ring_segment, given).
// Each rank exchanges only with its two neighbours: it sends to its right
// and receives from its left, both at once (start_exchange):
//
//        ┌──────► rank 0 ──────► rank 1 ──────┐
//        │                                    ▼
//        └────── rank 3 ◄────── rank 2 ◄──────┘
//
// Capital letters are full sums over the ranks (B = b0 + b1 + b2 + b3);
// "." is a segment whose value the contract leaves open (a partial sum).
//
//                    rank 0        rank 1        rank 2        rank 3
//   before ex4.1     a0 b0 c0 d0   a1 b1 c1 d1   a2 b2 c2 d2   a3 b3 c3 d3
//   after  ex4.1     .  B  .  .    .  .  C  .    .  .  .  D    A  .  .  .
//   after  ex4.2     A  B  C  D    A  B  C  D    A  B  C  D    A  B  C  D
//
// Each phase takes n-1 steps; in a step every rank sends one segment (or,
// in ex4.1, that segment's chunks) to its right neighbour and receives one
// from its left. Which segment, at which step, is the exercise: work it out
// from the two pictures. A segment's sum can only be complete on a rank
// after it has passed through every other rank.
//
// Traffic (the tests count it): in each phase a rank sends n-1 segments of
// count/n elements, never the one it ends up owning (ex4.1), nor the one its
// right neighbour completed (ex4.2): 2 (n-1)/n x count for the all-reduce,
// however many ranks there are. That is optimal: each rank must receive
// (n-1)/n of the buffer to complete its share, and send as much to spread
// the results. No link idles.
#pragma once
#include <algorithm>
#include <cstdint>

#include <torch/torch.h>

#include "workbook/communicator.hpp"

namespace ch04 {

// The elements [begin, end) of a buffer.
struct Span {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// Segment `index` of a `count`-element buffer cut into `ranks` segments
// (given): the first count % ranks segments get one element more, so sizes
// differ by at most one; with fewer elements than ranks some are empty.
Span ring_segment(int64_t count, int ranks, int index);

struct RingOptions {
  // Each reduce-scatter step is cut into chunks of this many elements: while
  // chunk k is being added, chunk k+1 is already on its way (Note: [chunks]
  // in reduce_scatter.cpp). 0: the Communicator's message_bytes() (over MPI
  // 512 KiB with every rank on one node, 128 KiB between nodes: Note [the
  // message size follows the link] in common/src/communicator_mpi.cpp).
  int64_t chunk_elements = 0;

  // A copy with chunk_elements resolved: 0 becomes comm.message_bytes() over
  // the buffer's element size (at least 1), the same on every rank.
  RingOptions for_buffer(const workbook::Communicator& comm, const torch::Tensor& buffer) const {
    RingOptions resolved = *this;
    if (resolved.chunk_elements == 0)
      resolved.chunk_elements = std::max<int64_t>(1, comm.message_bytes() / buffer.element_size());
    return resolved;
  }
};

// ---- ex4.1 ------------------------------------------------------------------
// Reduce-scatter, in place on the flat, contiguous `buffer` (float32 or
// float64, the same count on every rank): afterwards segment (rank + 1) mod
// n holds the exact sum over ranks of that segment (the picture above); the
// other segments hold whatever partial sums are left. Each step's segment
// goes in chunks of options.chunk_elements (resolved by for_buffer), and
// within a step the next chunk is already on its way while one is added
// (Note: [chunks] in reduce_scatter.cpp; the tests look for it; overlapping
// one step's last add with the next step's first chunk is not asked, though
// it is correct too). Must work for any count (0, fewer elements than
// ranks: empty segments and empty chunks) and any n >= 1 (n = 1: nothing to
// send). Collective: every rank calls it.
void ring_reduce_scatter(torch::Tensor& buffer, workbook::Communicator& comm, const RingOptions& options = {});

// ---- ex4.2 ------------------------------------------------------------------
// All-gather, in place: on entry segment (rank + 1) mod n of `buffer` is
// this rank's (what reduce-scatter left there; the other segments are
// anything); afterwards every segment holds its owner's values on every rank
// (the last row of the picture). Any count, any n >= 1. Collective.
void ring_all_gather(torch::Tensor& buffer, workbook::Communicator& comm);

// ---- ex4.3 ------------------------------------------------------------------
// All-reduce: `buffer` on every rank becomes the element-wise sum (or, with
// ReduceOp::Average, the sum divided by n, to float rounding) over ranks,
// through the ring only: no library collective. Any count (0, fewer than the
// ranks, not divisible by them, millions), any world size >= 1. Dividing the
// whole result works; there is a place where dividing costs n times less.
// (ReduceOp::Max is not the ring's: refused.)
void ring_all_reduce(torch::Tensor& buffer, workbook::ReduceOp op, workbook::Communicator& comm,
                     const RingOptions& options = {});

}  // namespace ch04
