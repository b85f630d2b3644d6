// train_step.cpp — ex1.2: one optimization step.
#include "single_device.hpp"

#include "workbook/errors.hpp"

namespace ch01 {

torch::Tensor train_step(workbook::Classifier& model, torch::optim::Optimizer& optimizer, const Batch& batch) {
  // BEGIN SOLUTION ex1.2
  // Gradients accumulate in .grad across backward() calls: clear them first.
  optimizer.zero_grad();
  torch::Tensor logits = model.forward(batch.images);
  torch::Tensor loss = torch::nn::functional::cross_entropy(logits, batch.labels);  // mean over the batch
  loss.backward();
  optimizer.step();
  return loss.detach();
  // END SOLUTION
}

}  // namespace ch01
