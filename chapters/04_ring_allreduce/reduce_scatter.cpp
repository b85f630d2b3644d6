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
  WB_NOT_IMPLEMENTED("ex4.1");  // TODO(ex4.1): your code here
}

}  // namespace ch04
