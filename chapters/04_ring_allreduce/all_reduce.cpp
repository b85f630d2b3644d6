// all_reduce.cpp — ex4.3: the ring all-reduce, reduce-scatter then all-gather.
#include "ring.hpp"

#include "workbook/errors.hpp"

namespace ch04 {

void ring_all_reduce(torch::Tensor& buffer, workbook::ReduceOp op, workbook::Communicator& comm,
                     const RingOptions& options) {
  WB_ASSERT(buffer.dim() == 1 && buffer.is_contiguous() && buffer.is_floating_point(),
            "ring_all_reduce needs a flat, contiguous floating-point buffer (use .view(-1) on a contiguous tensor)");
  WB_ASSERT(op != workbook::ReduceOp::Max, "ring_all_reduce sums or averages; for the largest, use Communicator::all_reduce");
  WB_NOT_IMPLEMENTED("ex4.3");  // TODO(ex4.3): your code here
}

}  // namespace ch04
