// all_gather.cpp — ex4.2: the second half of the ring all-reduce.
#include "ring.hpp"

#include "workbook/errors.hpp"

namespace ch04 {

void ring_all_gather(torch::Tensor& buffer, workbook::Communicator& comm) {
  WB_ASSERT(buffer.dim() == 1 && buffer.is_contiguous(), "ring_all_gather needs a flat, contiguous buffer");
  // BEGIN SOLUTION ex4.2
  // The schedule. Rank r starts owning (r + 1) mod n; at step s (0 .. n-2)
  // it sends segment (r + 1 - s) mod n (its own, then each one it just
  // received) to the right and stores what arrives from the left as segment
  // (r - s) mod n, which is the one its left neighbour sent.
  const int n = comm.size(), rank = comm.rank();
  const int64_t count = buffer.numel();
  if (n == 1 || count == 0) return;
  const int right = (rank + 1) % n, left = (rank + n - 1) % n;
  for (int step = 0; step < n - 1; ++step) {
    // Forward what was completed (step 0) or just received (later steps);
    // what arrives goes straight to its place: nothing to add, nothing to overlap.
    const Span sending = ring_segment(count, n, ((rank + 1 - step) % n + n) % n);
    const Span receiving = ring_segment(count, n, ((rank - step) % n + n) % n);
    torch::Tensor landing = buffer.narrow(0, receiving.begin, receiving.size());
    comm.exchange(buffer.narrow(0, sending.begin, sending.size()), right, landing, left);
  }
  // END SOLUTION
}

}  // namespace ch04
