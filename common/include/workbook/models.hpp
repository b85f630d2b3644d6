// models.hpp — the models every chapter trains: FashionCNN (the course model,
// 1,475,338 parameters) and TinyNet (a few thousand, for fast tests).
#pragma once
#include <memory>

#include <torch/torch.h>

namespace workbook {

// A layer with one tensor in and one out, which a model calls through its
// registry of children (see FashionCNN::normalize) rather than through a typed
// member: Chapter 5's SyncBatchNorm2d is one.
class TensorLayer : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor input) = 0;
};

// An image classifier: [N, 1, 28, 28] images in, [N, 10] logits out.
// Note: one abstract base lets every chapter's code take "a model" without
// templates, and `fresh()` (a new, untrained model of the same architecture)
// is what Chapter 2's replicate builds its copies from.
class Classifier : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor images) = 0;
  virtual std::shared_ptr<Classifier> fresh() const = 0;
  // A deep copy (fresh() and this model's state and mode), on `device` if
  // given: what LibTorch's own torch::nn::parallel::replicate() calls.
  std::shared_ptr<torch::nn::Module> clone(const c10::optional<torch::Device>& device = c10::nullopt) const override;
};
using ClassifierPtr = std::shared_ptr<Classifier>;

// conv(1→32, k3, pad 1) → BN → ReLU → maxpool 2     [N, 32, 14, 14]
// conv(32→64, k3)       → BN → ReLU → maxpool 2     [N, 64, 6, 6]
// flatten → fc(2304→600) → dropout(0.25) → fc(600→120) → fc(120→10)
class FashionCNN : public Classifier {
 public:
  FashionCNN();
  torch::Tensor forward(torch::Tensor images) override;
  std::shared_ptr<Classifier> fresh() const override { return std::make_shared<FashionCNN>(); }

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
  torch::nn::Dropout dropout{nullptr};
  // The BatchNorm2d layers are the children named "bn1" and "bn2", called by name.
  //
  // Note: [replaceable norm layers] LibTorch's Module::replace_module(name, m)
  // swaps the child registered under `name`, but a typed member (a
  // `torch::nn::BatchNorm2d bn1` field) would keep calling the old layer. So
  // forward() looks "bn1" and "bn2" up among the registered children each time
  // (a map of eight entries: microseconds), and Chapter 5's
  // convert_sync_batchnorm can replace them like PyTorch's does in Python.
  torch::Tensor normalize(const std::string& name, torch::Tensor x);
};

// flatten → fc(784→hidden) → BatchNorm1d → ReLU → dropout(p) → fc(hidden→10).
// BatchNorm and dropout are there so that train and eval modes differ.
// Without BatchNorm (batch_norm = false) a sample's output does not depend on
// the rest of its batch, so a batch split across replicas gives exactly the
// whole batch's result: what Chapter 2's equivalence tests need.
class TinyNet : public Classifier {
 public:
  explicit TinyNet(int64_t hidden = 16, double dropout_p = 0.0, bool batch_norm = true);
  torch::Tensor forward(torch::Tensor images) override;
  std::shared_ptr<Classifier> fresh() const override {
    return std::make_shared<TinyNet>(hidden_, dropout_p_, batch_norm_);
  }

  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};  // null without BatchNorm
  torch::nn::Dropout dropout{nullptr};

 private:
  int64_t hidden_;
  double dropout_p_;
  bool batch_norm_;
};

// The number of trainable parameters (elements, not tensors).
int64_t count_parameters(torch::nn::Module& model);

// Copies every parameter and buffer of `source` into `target` (same architecture).
void copy_state(const torch::nn::Module& source, torch::nn::Module& target);

}  // namespace workbook
