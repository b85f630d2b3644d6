// all_gather.cpp — ex4.2: the second half of the ring all-reduce.
#include "ring.hpp"

#include "workbook/errors.hpp"

namespace ch04 {

void ring_all_gather(torch::Tensor& buffer, workbook::Communicator& comm) {
  WB_ASSERT(buffer.dim() == 1 && buffer.is_contiguous(), "ring_all_gather needs a flat, contiguous buffer");
  WB_NOT_IMPLEMENTED("ex4.2");  // TODO(ex4.2): your code here
}

}  // namespace ch04
