// contrastive.cpp — ex5.6: NT-Xent over the global batch, and the given views and encoder.
#include <ATen/CPUGeneratorImpl.h>

#include "gather.hpp"
#include "workbook/errors.hpp"

namespace ch05 {

torch::Tensor nt_xent_loss(const torch::Tensor& z1, const torch::Tensor& z2, double temperature,
                           workbook::Communicator& comm) {
  WB_ASSERT(z1.dim() == 2 && z1.sizes() == z2.sizes(), "nt_xent_loss needs two [B, D] views, got {} and {}",
            c10::str(z1.sizes()), c10::str(z2.sizes()));
  // BEGIN SOLUTION ex5.6
  const int64_t local = z1.size(0), global = local * comm.size(), offset = local * comm.rank();
  const torch::Tensor a1 = torch::nn::functional::normalize(z1, torch::nn::functional::NormalizeFuncOptions().dim(1));
  const torch::Tensor a2 = torch::nn::functional::normalize(z2, torch::nn::functional::NormalizeFuncOptions().dim(1));
  // Every rank's embeddings, in the global order: [all of view 1; all of view 2], [2N, D].
  const torch::Tensor everyone = torch::cat({all_gather_with_grad(a1, comm), all_gather_with_grad(a2, comm)});
  const torch::Tensor anchors = torch::cat({a1, a2});                       // [2B, D]
  torch::Tensor logits = anchors.matmul(everyone.t()) / temperature;        // [2B, 2N]
  // Anchor i (view 1) sits at global column offset + i, its other view at
  // N + offset + i; anchor B + i (view 2) the other way round.
  const torch::Tensor rows = torch::arange(local, z1.options().dtype(torch::kLong)) + offset;
  const torch::Tensor self_columns = torch::cat({rows, rows + global});
  const torch::Tensor positive_columns = torch::cat({rows + global, rows});
  const torch::Tensor anchor_rows = torch::arange(2 * local, self_columns.options());
  torch::Tensor is_self = torch::zeros(logits.sizes(), logits.options().dtype(torch::kBool));
  is_self.index_put_({anchor_rows, self_columns}, true);
  logits = logits.masked_fill(is_self, -std::numeric_limits<double>::infinity());  // exp(−∞) = 0: not a candidate
  return torch::nn::functional::cross_entropy(logits, positive_columns);
  // END SOLUTION
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
