// buckets.cpp — ex4.4: parameters into buckets, as PyTorch's DDP does.
#include "reducer.hpp"

#include "workbook/errors.hpp"

namespace ch04 {

std::vector<Bucket> assign_buckets(const std::vector<torch::Tensor>& parameters, int64_t first_bucket_bytes,
                                   int64_t bucket_cap_bytes) {
  WB_ASSERT(first_bucket_bytes > 0 && bucket_cap_bytes > 0, "bucket limits must be positive: {} and {}",
            first_bucket_bytes, bucket_cap_bytes);
  for (const torch::Tensor& p : parameters)
    WB_ASSERT(p.scalar_type() == parameters[0].scalar_type() && p.device() == parameters[0].device(),
              "every parameter must share one dtype and device");
  WB_NOT_IMPLEMENTED("ex4.4");  // TODO(ex4.4): your code here
}

}  // namespace ch04
