// gather.cpp — ex2.4: the replicas' outputs, back together on one device.
#include "data_parallel.hpp"

#include "workbook/errors.hpp"

namespace ch02 {

torch::Tensor gather(const std::vector<torch::Tensor>& outputs, const torch::Device& destination) {
  // BEGIN SOLUTION ex2.4
  WB_CHECK(!outputs.empty(), "gather: no outputs to gather");
  // to() and cat() are both recorded by autograd: backward splits the
  // gradient of the result into slices and sends each back to its device.
  std::vector<torch::Tensor> on_destination;
  on_destination.reserve(outputs.size());
  for (const torch::Tensor& output : outputs) on_destination.push_back(output.to(destination));
  return torch::cat(on_destination, /*dim=*/0);
  // END SOLUTION
}

}  // namespace ch02
