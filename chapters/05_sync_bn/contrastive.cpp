// contrastive.cpp — ex5.6: NT-Xent over the global batch, and the given views and encoder.
#include <ATen/CPUGeneratorImpl.h>

#include "gather.hpp"
#include "workbook/errors.hpp"

namespace ch05 {

torch::Tensor nt_xent_loss(const torch::Tensor& z1, const torch::Tensor& z2, double temperature,
                           workbook::Communicator& comm) {
  WB_ASSERT(z1.dim() == 2 && z1.sizes() == z2.sizes(), "nt_xent_loss needs two [B, D] views, got {} and {}",
            c10::str(z1.sizes()), c10::str(z2.sizes()));
  WB_NOT_IMPLEMENTED("ex5.6");  // TODO(ex5.6): your code here
}

std::pair<torch::Tensor, torch::Tensor> two_views(const torch::Tensor& images, uint64_t seed) {
  torch::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto view = [&] {
    const int64_t count = images.size(0);
    torch::Tensor out = torch::empty_like(images);
    const torch::Tensor flips = torch::rand({count}, generator) < 0.5;
    const torch::Tensor shifts = torch::randint(-2, 3, {count, 2}, generator);
    for (int64_t i = 0; i < count; ++i) {
      torch::Tensor image = images[i];
      if (flips[i].item<bool>()) image = image.flip({-1});
      out[i] = image.roll({shifts[i][0].item<int64_t>(), shifts[i][1].item<int64_t>()}, {-2, -1});
    }
    return out + 0.05 * torch::randn(images.sizes(), generator);
  };
  torch::Tensor first = view();
  return {first, view()};
}

EncoderImpl::EncoderImpl() {
  fc1 = register_module("fc1", torch::nn::Linear(28 * 28, 64));
  fc2 = register_module("fc2", torch::nn::Linear(64, 16));
}

torch::Tensor EncoderImpl::forward(const torch::Tensor& images) {
  return fc2(torch::relu(fc1(images.flatten(1))));
}

}  // namespace ch05
