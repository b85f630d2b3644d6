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
  // BEGIN SOLUTION ex3.4
  const int64_t mine = local_batch.images.size(0);
  const int64_t global = local_batch.global_size > 0 ? local_batch.global_size : mine * comm.size();
  WB_CHECK(mine <= global, "ddp_train_step: this rank's batch of {} is larger than the global batch of {}", mine,
           global);
  optimizer.zero_grad();
  // Note: [weights for unequal parts] The global batch's loss is the sum of
  // every sample's loss over `global`. Averaging the ranks' mean losses gives
  // that only when every rank holds global / ranks samples; otherwise each
  // rank's share must weigh by its size. So each rank back-propagates its
  // summed loss times ranks / global: the all-reduce's average then divides
  // by ranks, leaving the sum over every sample divided by `global`. An
  // empty batch runs no forward (a mean over nothing is NaN) and hands the
  // average zeros (all_reduce_gradients: a missing gradient counts as zeros).
  torch::Tensor loss = torch::zeros({}, local_batch.images.options().dtype(torch::kFloat32));
  if (mine > 0) {
    const torch::Tensor summed = torch::nn::functional::cross_entropy(
        model.forward(local_batch.images), local_batch.labels,
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    (summed * (static_cast<double>(comm.size()) / static_cast<double>(global))).backward();
    loss = summed.detach() / static_cast<double>(mine);
  }
  // The only communication of the step. No barrier before it, or before the
  // next batch: the all-reduce itself waits for every rank's gradients.
  all_reduce_gradients(model, comm);
  optimizer.step();
  return loss;
  // END SOLUTION
}

}  // namespace ch03
