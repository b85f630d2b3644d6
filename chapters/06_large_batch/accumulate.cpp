// accumulate.cpp — ex6.4: K micro-batches, one all-reduce, one optimizer step.
#include "accumulation.hpp"

#include "workbook/errors.hpp"

namespace ch06 {

std::vector<ch03::Batch> split_batch(const ch03::Batch& batch, int64_t micro_batch) {
  WB_ASSERT(micro_batch > 0, "micro_batch {}", micro_batch);
  std::vector<ch03::Batch> parts;
  const int64_t total = batch.images.size(0);
  for (int64_t first = 0; first < total; first += micro_batch) {
    const int64_t count = std::min(micro_batch, total - first);
    parts.push_back({batch.images.narrow(0, first, count), batch.labels.narrow(0, first, count)});
  }
  return parts;
}

torch::Tensor accumulated_train_step(workbook::Classifier& model, torch::optim::Optimizer& optimizer,
                                     const std::vector<ch03::Batch>& micro_batches, workbook::Communicator& comm) {
  WB_NOT_IMPLEMENTED("ex6.4");  // TODO(ex6.4): your code here
}

}  // namespace ch06
