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
  // BEGIN SOLUTION ex8.4
  // The pair is cut so that the 600 hidden features never travel: fc1 makes
  // this rank's columns of them, fc2 consumes exactly those.
  fc1 = register_module("fc1", ColumnParallelLinear(full.fc1, comm));
  fc2 = register_module("fc2", RowParallelLinear(full.fc2, comm));
  fc3 = register_module("fc3", copy_layer<torch::nn::Linear>(*full.fc3));
  // END SOLUTION
}

torch::Tensor TensorParallelFashionCNN::features(const torch::Tensor& images) {
  torch::Tensor x = torch::max_pool2d(torch::relu(bn1(conv1(images))), 2);  // [N, 32, 14, 14]
  x = torch::max_pool2d(torch::relu(bn2(conv2(x))), 2);                    // [N, 64, 6, 6]
  return x.flatten(1);                                                       // [N, 2304]
}

torch::Tensor TensorParallelFashionCNN::forward(const torch::Tensor& images) {
  // BEGIN SOLUTION ex8.4
  // features: the same on every rank; fc1: this rank's hidden columns (f's
  // all-reduce waits in backward); fc2: the whole [N, 120] (g's all-reduce).
  const torch::Tensor hidden = dropout(fc1(features(images)));
  return fc3(fc2(hidden));
  // END SOLUTION
}

torch::Tensor TensorParallelFashionCNN::dropout(const torch::Tensor& shard) {
  if (!is_training() || dropout_p_ == 0.0) return shard;
  // BEGIN SOLUTION ex8.4
  // Note: [one mask for the whole layer] Each rank holds some columns of the
  // hidden activation. If each drew a mask for its own columns alone, the
  // model would still be a dropout network, but a rank's mask would depend
  // on how many ranks there are, and so would the run. So every rank draws
  // the mask for the whole [N, 600] from a generator seeded alike (the ranks
  // call forward equally often, so the generators stay in step) and keeps
  // its columns. Drawing 600 columns to keep 300 costs little next to fc1.
  // Megatron-LM chooses the other way: its model-parallel random state is
  // seeded with the tensor rank (model_parallel_cuda_manual_seed), so its
  // masks change with the tensor-parallel size.
  const Shard columns = fc1->outputs;
  const torch::Tensor kept =
      torch::empty({shard.size(0), hidden_}, torch::kFloat64).bernoulli_(1.0 - dropout_p_, dropout_generator_);
  const torch::Tensor mask = kept.narrow(1, columns.begin, columns.size) / (1.0 - dropout_p_);
  return shard * mask.to(shard.device(), shard.scalar_type());
  // END SOLUTION
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
