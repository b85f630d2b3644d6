// models.cpp — FashionCNN and TinyNet.
#include "workbook/models.hpp"

#include "workbook/errors.hpp"

namespace nn = torch::nn;

namespace workbook {

FashionCNN::FashionCNN() {
  conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)));
  register_module("bn1", nn::BatchNorm2d(32));
  conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(32, 64, 3)));
  register_module("bn2", nn::BatchNorm2d(64));
  fc1 = register_module("fc1", nn::Linear(64 * 6 * 6, 600));
  dropout = register_module("dropout", nn::Dropout(0.25));
  fc2 = register_module("fc2", nn::Linear(600, 120));
  fc3 = register_module("fc3", nn::Linear(120, 10));
}

torch::Tensor FashionCNN::forward(torch::Tensor x) {
  x = torch::max_pool2d(torch::relu(normalize("bn1", conv1(x))), 2);  // [N, 32, 14, 14]
  x = torch::max_pool2d(torch::relu(normalize("bn2", conv2(x))), 2);  // [N, 64, 6, 6]
  x = x.flatten(1);                                      // [N, 2304]
  x = dropout(fc1(x));
  return fc3(fc2(x));
}

torch::Tensor FashionCNN::normalize(const std::string& name, torch::Tensor x) {
  const std::shared_ptr<nn::Module> layer = named_children()[name];
  if (auto* batch_norm = layer->as<nn::BatchNorm2d>()) return batch_norm->forward(x);
  if (auto* replacement = layer->as<TensorLayer>()) return replacement->forward(x);
  WB_ASSERT(false, "FashionCNN's {} is a {}: expected BatchNorm2d or a TensorLayer", name, layer->name());
  return x;
}

TinyNet::TinyNet(int64_t hidden, double dropout_p, bool batch_norm)
    : hidden_(hidden), dropout_p_(dropout_p), batch_norm_(batch_norm) {
  fc1 = register_module("fc1", nn::Linear(28 * 28, hidden));
  if (batch_norm) bn = register_module("bn", nn::BatchNorm1d(hidden));
  dropout = register_module("dropout", nn::Dropout(dropout_p));
  fc2 = register_module("fc2", nn::Linear(hidden, 10));
}

torch::Tensor TinyNet::forward(torch::Tensor x) {
  torch::Tensor hidden = fc1(x.flatten(1));
  if (batch_norm_) hidden = bn(hidden);
  return fc2(dropout(torch::relu(hidden)));
}

std::shared_ptr<nn::Module> Classifier::clone(const c10::optional<torch::Device>& device) const {
  std::shared_ptr<Classifier> copy = fresh();
  if (device) copy->to(*device);
  copy_state(*this, *copy);
  copy->train(is_training());
  return copy;
}

int64_t count_parameters(nn::Module& model) {
  int64_t total = 0;
  for (const auto& p : model.parameters()) total += p.numel();
  return total;
}

void copy_state(const nn::Module& source, nn::Module& target) {
  torch::NoGradGuard no_grad;
  auto from_params = source.named_parameters();
  auto to_params = target.named_parameters();
  WB_ASSERT(from_params.size() == to_params.size(), "models differ: {} vs {} parameters", from_params.size(),
            to_params.size());
  for (auto& item : to_params) item.value().copy_(from_params[item.key()]);
  auto from_buffers = source.named_buffers();
  auto to_buffers = target.named_buffers();
  WB_ASSERT(from_buffers.size() == to_buffers.size(), "models differ: {} vs {} buffers", from_buffers.size(),
            to_buffers.size());
  for (auto& item : to_buffers) item.value().copy_(from_buffers[item.key()]);
}

}  // namespace workbook
