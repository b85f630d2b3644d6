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
  // BEGIN SOLUTION ex4.4
  std::vector<Bucket> buckets;
  Bucket current;
  int64_t limit = first_bucket_bytes;
  for (size_t i = parameters.size(); i-- > 0;) {
    current.parameters.push_back(i);
    current.offsets.push_back(current.elements);
    current.elements += parameters[i].numel();
    if (current.elements * parameters[i].element_size() >= limit) {
      buckets.push_back(std::move(current));
      current = Bucket{};
      limit = bucket_cap_bytes;
    }
  }
  if (!current.parameters.empty()) buckets.push_back(std::move(current));
  return buckets;
  // END SOLUTION
}

}  // namespace ch04
