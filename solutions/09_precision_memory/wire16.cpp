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
  // BEGIN SOLUTION ex9.4
  torch::NoGradGuard no_grad;
  flat.div_(comm.size());  // Note [divide first]: in float32 (in place: flat is overwritten below), then round
  torch::Tensor on_the_wire = flat.to(wire);
  ch04::ring_all_reduce(on_the_wire, workbook::ReduceOp::Sum, comm, ring);
  flat.copy_(on_the_wire);  // widened back to float32
  // END SOLUTION
}

}  // namespace ch09
