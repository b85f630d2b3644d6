// all_reduce.cpp — ex4.3: the ring all-reduce, reduce-scatter then all-gather.
#include "ring.hpp"

#include "workbook/errors.hpp"

namespace ch04 {

void ring_all_reduce(torch::Tensor& buffer, workbook::ReduceOp op, workbook::Communicator& comm,
                     const RingOptions& options) {
  WB_ASSERT(buffer.dim() == 1 && buffer.is_contiguous() && buffer.is_floating_point(),
            "ring_all_reduce needs a flat, contiguous floating-point buffer (use .view(-1) on a contiguous tensor)");
  WB_ASSERT(op != workbook::ReduceOp::Max, "ring_all_reduce sums or averages; for the largest, use Communicator::all_reduce");
  // BEGIN SOLUTION ex4.3
  ring_reduce_scatter(buffer, comm, options);
  if (op == workbook::ReduceOp::Average && comm.size() > 1) {
    // Only the segment this rank completed: the all-gather spreads the means.
    const Span mine = ring_segment(buffer.numel(), comm.size(), (comm.rank() + 1) % comm.size());
    buffer.narrow(0, mine.begin, mine.size()).div_(comm.size());
  }
  ring_all_gather(buffer, comm);
  // END SOLUTION
}

}  // namespace ch04
