// tp_classifier.cpp — ex8.4: FashionCNN split over the ranks, its dropout the single process's.
#include <ATen/CPUGeneratorImpl.h>

#include "tensor_parallel.hpp"
#include "workbook/errors.hpp"

namespace ch08 {


TensorParallelFashionCNN::TensorParallelFashionCNN(const workbook::FashionCNN& full, workbook::Communicator& comm,
                                                   double dropout_p, uint64_t dropout_seed)
    : comm_(&comm),
      dropout_p_(dropout_p),
      hidden_(full.fc1->options.out_features()),
      dropout_seed_(dropout_seed),
      dropout_generator_(at::make_generator<at::CPUGeneratorImpl>(dropout_seed)) {
  WB_CHECK(dropout_p >= 0.0 && dropout_p < 1.0, "dropout probability {} is not in [0, 1)", dropout_p);
  auto children = full.named_children();
  conv1 = register_module("conv1", copy_layer<torch::nn::Conv2d>(*full.conv1));
  bn1 = register_module("bn1", copy_layer<torch::nn::BatchNorm2d>(*children["bn1"]));
  conv2 = register_module("conv2", copy_layer<torch::nn::Conv2d>(*full.conv2));
  bn2 = register_module("bn2", copy_layer<torch::nn::BatchNorm2d>(*children["bn2"]));
  WB_NOT_IMPLEMENTED("ex8.4");  // TODO(ex8.4): your code here
}

torch::Tensor TensorParallelFashionCNN::features(const torch::Tensor& images) {
  torch::Tensor x = torch::max_pool2d(torch::relu(bn1(conv1(images))), 2);  // [N, 32, 14, 14]
  x = torch::max_pool2d(torch::relu(bn2(conv2(x))), 2);                    // [N, 64, 6, 6]
  return x.flatten(1);                                                       // [N, 2304]
}

torch::Tensor TensorParallelFashionCNN::forward(const torch::Tensor& images) {
  WB_NOT_IMPLEMENTED("ex8.4");  // TODO(ex8.4): your code here
}

torch::Tensor TensorParallelFashionCNN::dropout(const torch::Tensor& shard) {
  if (!is_training() || dropout_p_ == 0.0) return shard;
  WB_NOT_IMPLEMENTED("ex8.4");  // TODO(ex8.4): your code here
}

Evaluation evaluate_tensor_parallel(TensorParallelFashionCNN& model, const torch::Tensor& images,
                                    const torch::Tensor& labels, int64_t batch) {
  torch::NoGradGuard no_grad;
  model.eval();
  Evaluation e;
  double loss_sum = 0.0;
  for (int64_t first = 0; first < images.size(0); first += batch) {
    const int64_t count = std::min(batch, images.size(0) - first);
    const torch::Tensor logits = model.forward(images.narrow(0, first, count));
    const torch::Tensor truth = labels.narrow(0, first, count);
    loss_sum += torch::nn::functional::cross_entropy(
                    logits, truth, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .item<double>();
    e.correct += logits.argmax(1).eq(truth).sum().item<int64_t>();
  }
  model.train();
  e.total = images.size(0);
  e.accuracy = static_cast<double>(e.correct) / static_cast<double>(e.total);
  e.mean_loss = loss_sum / static_cast<double>(e.total);
  return e;
}

}  // namespace ch08
