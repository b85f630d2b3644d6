// wire16.cpp — ex9.4: the average, 16 bits on the wire.
#include "wire16.hpp"

#include "workbook/errors.hpp"

namespace ch09 {

void average_in_16_bits(torch::Tensor& flat, torch::ScalarType wire, workbook::Communicator& comm,
                        const ch04::RingOptions& ring) {
  WB_ASSERT(flat.dim() == 1 && flat.is_contiguous() && flat.scalar_type() == torch::kFloat32,
            "average_in_16_bits: a flat, contiguous float32 buffer");
  WB_ASSERT(wire == torch::kFloat16 || wire == torch::kBFloat16, "average_in_16_bits: the wire is float16 or bfloat16, not {}",
            c10::toString(wire));
  WB_NOT_IMPLEMENTED("ex9.4");  // TODO(ex9.4): your code here
}

}  // namespace ch09
