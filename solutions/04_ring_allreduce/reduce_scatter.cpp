// reduce_scatter.cpp — ex4.1: the first half of the ring all-reduce.
#include "ring.hpp"

#include <array>

#include "workbook/add_into.hpp"
#include "workbook/errors.hpp"

namespace ch04 {

// Note: [chunks]
// A step could exchange its whole segment, then add it: while the bytes
// travel, the adder idles; while it adds, the link idles. Cut into chunks,
// the two can overlap: a chunk's exchange is under way while the chunk
// before it is being added. Exchanges pair up only if every rank makes the
// same number of them in every step, whatever the sizes of the segments it
// sends and receives (segments differ by one element, some may be empty).
void ring_reduce_scatter(torch::Tensor& buffer, workbook::Communicator& comm, const RingOptions& requested) {
  WB_ASSERT(buffer.dim() == 1 && buffer.is_contiguous() && buffer.is_floating_point(),
            "ring_reduce_scatter needs a flat, contiguous floating-point buffer");
  WB_ASSERT(requested.chunk_elements >= 0, "chunk_elements must be positive (or 0: the Communicator's size), is {}",
            requested.chunk_elements);
  // Use options.chunk_elements (> 0), never requested's (0 asks for the Communicator's size).
  [[maybe_unused]] const RingOptions options = requested.for_buffer(comm, buffer);
  // BEGIN SOLUTION ex4.1
  // The schedule. At step s (0 .. n-2) rank r sends segment (r - s) mod n to
  // its right and adds what arrives from its left into segment
  // (r - s - 1) mod n. Segment j leaves rank j at step 0 and moves right one
  // rank per step, each adding its share; after n-1 hops it rests, complete,
  // on rank (j + n - 1) mod n: rank r completes segment (r + 1) mod n.
  //   step 0: rank 0 sends a, rank 1 b, rank 2 c, rank 3 d; rank 1 adds a0 into a, ...
  //   step 1: rank 0 sends d (d3 + d0), rank 1 a, ...; each adds a third contribution
  //   step 2: rank 0 sends c, ...; rank 0 ends with b, rank 1 c, rank 2 d, rank 3 a.
  // C++'s % keeps the sign of a negative left side: add n (or 2n) first.
  // Chunks (Note: [chunks]): as many per step as the largest segment needs,
  // on every rank; two scratch halves, and chunk k+1's exchange started
  // before chunk k is waited for and added.
  const int n = comm.size(), rank = comm.rank();
  const int64_t count = buffer.numel();
  if (n == 1 || count == 0) return;
  const int right = (rank + 1) % n, left = (rank + n - 1) % n;
  const int64_t chunk = options.chunk_elements;
  const int64_t largest_segment = ring_segment(count, n, 0).size();
  const int64_t chunks = (largest_segment + chunk - 1) / chunk;
  // Kept between calls (one per thread): a fresh buffer each call costs page faults, not just a malloc.
  thread_local torch::Tensor scratch;
  if (!scratch.defined() || scratch.numel() < 2 * chunk || scratch.options().dtype() != buffer.options().dtype() ||
      scratch.device() != buffer.device())
    scratch = torch::empty({2 * chunk}, buffer.options());

  // Chunk k of a segment: at most `chunk` elements, possibly none.
  auto chunk_of = [&](Span segment, int64_t k) {
    const int64_t begin = std::min(segment.end, segment.begin + k * chunk);
    return Span{begin, std::min(segment.end, begin + chunk)};
  };
  for (int step = 0; step < n - 1; ++step) {
    const Span sending = ring_segment(count, n, ((rank - step) % n + n) % n);
    const Span receiving = ring_segment(count, n, ((rank - step - 1) % n + 2 * n) % n);
    std::array<workbook::PendingExchange, 2> in_flight;
    std::array<torch::Tensor, 2> landing;
    auto start = [&](int64_t k) {
      const Span out = chunk_of(sending, k), in = chunk_of(receiving, k);
      landing[k % 2] = scratch.narrow(0, (k % 2) * chunk, in.size());
      in_flight[k % 2] = comm.start_exchange(buffer.narrow(0, out.begin, out.size()), right, landing[k % 2], left);
    };
    start(0);
    for (int64_t k = 0; k < chunks; ++k) {
      if (k + 1 < chunks) start(k + 1);  // on its way while chunk k is added
      in_flight[k % 2].wait();
      const Span in = chunk_of(receiving, k);
      torch::Tensor accumulator = buffer.narrow(0, in.begin, in.size());
      workbook::add_into(accumulator, landing[k % 2]);
    }
  }
  // END SOLUTION
}

}  // namespace ch04
