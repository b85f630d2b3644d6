// gather.cpp — ex2.4: the replicas' outputs, back together on one device.
#include "data_parallel.hpp"

#include "workbook/errors.hpp"

namespace ch02 {

torch::Tensor gather(const std::vector<torch::Tensor>& outputs, const torch::Device& destination) {
  WB_NOT_IMPLEMENTED("ex2.4");  // TODO(ex2.4): your code here
}

}  // namespace ch02
