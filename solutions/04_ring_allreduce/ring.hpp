// ring.hpp — Chapter 4's collectives: a ring all-reduce built from
// point-to-point exchanges (Communicator::start_exchange).
//
// Four ranks, a buffer cut into four segments a b c d. Each rank sends to
// its right neighbour and receives from its left, all at once:
//
//        ┌──────► rank 0 ──────► rank 1 ──────┐
//        │                                    ▼
//        └────── rank 3 ◄────── rank 2 ◄──────┘
//
// reduce-scatter (ex4.1): n-1 steps. At step s, rank r sends segment
// (r - s) mod n and adds what arrives into segment (r - s - 1) mod n.
//
//              rank 0        rank 1        rank 2        rank 3
//   start      a0 b0 c0 d0   a1 b1 c1 d1   a2 b2 c2 d2   a3 b3 c3 d3
//   step 0     sends a0 →    sends b1 →    sends c2 →    sends d3 → (to rank 0)
//              d3+d0         a0+a1         b1+b2         c2+c3
//   step 1     sends d →     sends a →     sends b →     sends c →
//              c:3 ranks     d:3 ranks     a:3 ranks     b:3 ranks
//   step 2     ... after n-1 steps rank r holds segment (r + 1) mod n
//              summed over all n ranks: rank 0 has b, rank 1 c, rank 2 d, rank 3 a.
//
// all-gather (ex4.2): n-1 more steps. At step s, rank r sends segment
// (r + 1 - s) mod n (the one it completed, then the ones it received) and
// stores what arrives as segment (r - s) mod n. Afterwards every rank holds
// every summed segment.
//
// Traffic: each rank sends n-1 segments of count/n elements in each phase,
// 2 (n-1)/n x count in all, however many ranks there are. A ring is
// bandwidth-optimal: no rank sends more than that, and no link idles.
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
// n holds the sum over ranks of that segment; the other segments hold
// partial sums. Chunked so that receiving and adding overlap. n = 1: nothing
// to do. Collective: every rank calls it.
void ring_reduce_scatter(torch::Tensor& buffer, workbook::Communicator& comm, const RingOptions& options = {});

// ---- ex4.2 ------------------------------------------------------------------
// All-gather, in place: segment (rank + 1) mod n of `buffer` is this rank's
// (what reduce-scatter left there); afterwards every segment holds its
// owner's values on every rank. Collective.
void ring_all_gather(torch::Tensor& buffer, workbook::Communicator& comm);

// ---- ex4.3 ------------------------------------------------------------------
// All-reduce: `buffer` on every rank becomes the element-wise sum (or mean)
// over ranks. Any count (0, fewer than the ranks, not divisible by them,
// millions), any world size >= 1. Average divides only the segment this rank
// owns, between the two phases: 1/n of the work of dividing everything.
void ring_all_reduce(torch::Tensor& buffer, workbook::ReduceOp op, workbook::Communicator& comm,
                     const RingOptions& options = {});

}  // namespace ch04
