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
  // BEGIN SOLUTION ex6.4
  WB_CHECK(!micro_batches.empty(), "accumulated_train_step: no micro-batches");
  const int64_t micro_size = micro_batches.front().images.size(0);
  for (const ch03::Batch& micro : micro_batches)
    WB_CHECK(micro.images.size(0) == micro_size,  // checked before any communication
             "accumulated_train_step: micro-batches of {} and {} samples: the mean of their means is then not the "
             "mean over the batch",
             micro_size, micro.images.size(0));
  const double k = static_cast<double>(micro_batches.size());
  optimizer.zero_grad();
  torch::Tensor loss_sum;  // stays on the device: no synchronization per micro-batch
  for (const ch03::Batch& micro : micro_batches) {
    // Divided by K here, so that the gradients add up to the gradient of the
    // mean over all K·B samples (not K times it).
    torch::Tensor loss = torch::nn::functional::cross_entropy(model.forward(micro.images), micro.labels);
    (loss / k).backward();
    loss_sum = loss_sum.defined() ? loss_sum + loss.detach() : loss.detach();
  }
  // The only communication: once per optimizer step, not once per micro-batch.
  ch03::all_reduce_gradients(model, comm);
  optimizer.step();
  return loss_sum / k;
  // END SOLUTION
}

}  // namespace ch06
