// train_step.cpp — ex3.4: one data-parallel training step.
#include "ddp.hpp"

#include "workbook/errors.hpp"

namespace ch03 {

Batch gather_batch(const torch::Tensor& images, const torch::Tensor& labels, const torch::Tensor& indices,
                   int64_t first, int64_t count) {
  WB_ASSERT(first >= 0 && count >= 0 && first + count <= indices.size(0), "samples {}..{} of {}", first,
            first + count, indices.size(0));
  torch::Tensor chosen = indices.narrow(0, first, count).to(images.device());
  return {images.index_select(0, chosen), labels.index_select(0, chosen)};
}

torch::Tensor ddp_train_step(workbook::Classifier& model, torch::optim::Optimizer& optimizer,
                             const Batch& local_batch, workbook::Communicator& comm) {
  WB_NOT_IMPLEMENTED("ex3.4");  // TODO(ex3.4): your code here
}

}  // namespace ch03
