// evaluate.cpp — ex1.3: exact evaluation in eval mode, without gradients.
#include "single_device.hpp"

#include "workbook/errors.hpp"

namespace ch01 {

EvalResult evaluate(workbook::Classifier& model, const torch::Tensor& images, const torch::Tensor& labels,
                    int64_t batch_size, const torch::Device& device) {
  // BEGIN SOLUTION ex1.3
  WB_CHECK(images.size(0) == labels.size(0), "{} images but {} labels", images.size(0), labels.size(0));
  const bool was_training = model.is_training();
  model.eval();                 // BatchNorm: running statistics; dropout: off
  torch::NoGradGuard no_grad;   // no graph: less memory, less time
  // Sums stay on the device until the end: one host synchronization, not one per batch.
  torch::Tensor correct = torch::zeros({}, torch::TensorOptions().dtype(torch::kInt64).device(device));
  torch::Tensor loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
  const torch::Tensor order = torch::arange(images.size(0), torch::TensorOptions(torch::kInt64).device(images.device()));
  const int64_t count = batches_per_epoch(images.size(0), batch_size);
  for (int64_t index = 0; index < count; ++index) {
    Batch batch = make_batch(images, labels, order, index, batch_size, device);
    torch::Tensor logits = model.forward(batch.images);
    loss_sum += torch::nn::functional::cross_entropy(
                    logits, batch.labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .to(torch::kFloat64);
    correct += logits.argmax(1).eq(batch.labels).sum();
  }
  model.train(was_training);
  EvalResult result;
  result.total = images.size(0);
  result.correct = correct.item<int64_t>();
  result.mean_loss = result.total == 0 ? 0.0 : loss_sum.item<double>() / static_cast<double>(result.total);
  return result;
  // END SOLUTION
}

}  // namespace ch01
