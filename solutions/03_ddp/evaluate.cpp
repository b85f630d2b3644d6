// evaluate.cpp — ex3.5: every test sample counted exactly once, across ranks.
#include "ddp.hpp"

#include "workbook/errors.hpp"

namespace ch03 {

EvalResult evaluate_distributed(workbook::Classifier& model, const torch::Tensor& images, const torch::Tensor& labels,
                                int64_t batch_size, workbook::Communicator& comm) {
  // BEGIN SOLUTION ex3.5
  WB_CHECK(images.size(0) == labels.size(0), "{} images but {} labels", images.size(0), labels.size(0));
  WB_CHECK(batch_size >= 1, "evaluation batch size {} must be positive", batch_size);
  const bool was_training = model.is_training();
  model.eval();
  torch::NoGradGuard no_grad;
  // This rank's samples: r, r + R, r + 2R, ... No padding (a DistributedSampler
  // would repeat samples to even out the shards, and count them twice).
  const int64_t n = images.size(0);
  const torch::Tensor mine = torch::arange(std::min<int64_t>(comm.rank(), n), n, comm.size(), torch::kInt64);
  // correct, count (int64: exact) and the loss sum (float64), reduced together.
  torch::Tensor counts = torch::zeros({2}, torch::TensorOptions().dtype(torch::kInt64).device(comm.device()));
  torch::Tensor loss_sum = torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat64).device(comm.device()));
  for (int64_t first = 0; first < mine.size(0); first += batch_size) {
    const Batch batch = gather_batch(images, labels, mine, first, std::min(batch_size, mine.size(0) - first));
    torch::Tensor logits = model.forward(batch.images);
    loss_sum += torch::nn::functional::cross_entropy(
                    logits, batch.labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .to(torch::kFloat64);
    counts[0] += logits.argmax(1).eq(batch.labels).sum();
    counts[1] += batch.labels.size(0);
  }
  model.train(was_training);
  // Every rank joins, even one with no samples: the sums need all of them.
  comm.all_reduce(counts, workbook::ReduceOp::Sum);
  comm.all_reduce(loss_sum, workbook::ReduceOp::Sum);
  EvalResult result;
  result.correct = counts[0].item<int64_t>();
  result.total = counts[1].item<int64_t>();
  WB_ASSERT(result.total == n, "evaluated {} samples of {}", result.total, n);
  result.mean_loss = n == 0 ? 0.0 : loss_sum.item<double>() / static_cast<double>(n);
  return result;
  // END SOLUTION
}

}  // namespace ch03
