// gradients.cpp — the mean gradient over ranks, in one all-reduce (given;
// ex3.3 until 2026-11-30).
#include "ddp.hpp"

#include "workbook/errors.hpp"

namespace ch03 {
namespace {

// The parameters whose gradients are averaged, in the same order on every rank.
std::vector<torch::Tensor> trainable(torch::nn::Module& model) {
  std::vector<torch::Tensor> params;
  for (const torch::Tensor& p : model.parameters())
    if (p.requires_grad()) params.push_back(p);
  return params;
}

}  // namespace

// The simple version, one call per parameter. Each call pays the
// collective's latency (and, in the MPI library, its setup) again: FashionCNN
// has 14 parameter tensors, a ResNet-50 161. The lesson measures the difference.
void all_reduce_gradients_per_parameter(torch::nn::Module& model, workbook::Communicator& comm) {
  for (torch::Tensor& p : trainable(model)) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    comm.all_reduce(p.mutable_grad(), workbook::ReduceOp::Average);
  }
}

void all_reduce_gradients(torch::nn::Module& model, workbook::Communicator& comm) {
  std::vector<torch::Tensor> params = trainable(model);
  if (params.empty()) return;
  std::vector<torch::Tensor> grads;
  grads.reserve(params.size());
  for (torch::Tensor& p : params) {
    // No gradient this step (a branch not taken): zeros, so every rank's
    // buffer has the same layout and the same element count.
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad().reshape({-1}));
  }
  // One contiguous buffer, one collective.
  torch::Tensor flat = torch::cat(grads);
  comm.all_reduce(flat, workbook::ReduceOp::Average);
  // Back into each .grad, in place (the optimizer reads these tensors).
  int64_t offset = 0;
  for (torch::Tensor& p : params) {
    const int64_t n = p.numel();
    p.mutable_grad().copy_(flat.narrow(0, offset, n).view_as(p));
    offset += n;
  }
}

}  // namespace ch03
