// optimizer_checks.hpp — what the LARS and LAMB tests share: a two-tensor
// "layer" with hand-picked values, and the checkpoint round trip.
#pragma once
#include <functional>
#include <memory>

#include <torch/torch.h>

#include "ddp.hpp"
#include "mpi_test.hpp"
#include "shared_directory.hpp"

namespace optimizer_checks {

// A weight w = [[3, 4]] (‖w‖ = 5) and a bias b = [1, -2]: the first is
// adapted, the second is excluded by layer_adaptation_groups.
struct ToyLayer : torch::nn::Module {
  torch::Tensor w, b;
  ToyLayer() {
    w = register_parameter("w", torch::tensor({{3.0, 4.0}}, torch::kFloat64));
    b = register_parameter("b", torch::tensor({1.0, -2.0}, torch::kFloat64));
  }
};

// Sets the gradients by hand, as a backward pass would have.
inline void set_grads(ToyLayer& layer, const torch::Tensor& w_grad, const torch::Tensor& b_grad) {
  layer.w.mutable_grad() = w_grad.clone();
  layer.b.mutable_grad() = b_grad.clone();
}

using OptimizerFactory = std::function<std::unique_ptr<torch::optim::Optimizer>(torch::nn::Module&)>;

// Trains a TinyNet 3 steps, saves a checkpoint (ch03's, with the optimizer),
// takes 2 more steps; then a fresh model and optimizer load the checkpoint
// and take the same 2 steps. The largest parameter difference at the end:
// 0 when the optimizer's whole state (momentum, moments, step counts) was
// saved and restored, clearly not when any of it was lost.
inline double resume_difference(const OptimizerFactory& make_optimizer, workbook::Communicator& comm) {
  torch::manual_seed(61);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> batches;
  for (int i = 0; i < 5; ++i) batches.emplace_back(torch::rand({16, 1, 28, 28}), torch::randint(0, 10, {16}, torch::kInt64));
  auto run = [&](workbook::Classifier& model, torch::optim::Optimizer& optimizer, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      optimizer.zero_grad();
      torch::nn::functional::cross_entropy(model.forward(batches[i].first), batches[i].second).backward();
      optimizer.step();
    }
  };
  mpi_test::SharedDirectory dir(comm);
  torch::manual_seed(62);
  auto model = std::make_shared<workbook::TinyNet>(8, 0.0, /*batch_norm=*/false);
  auto optimizer = make_optimizer(*model);
  run(*model, *optimizer, 0, 3);
  ch03::save_checkpoint(dir.path / "ckpt.pt", *model, *optimizer, 3, comm);
  run(*model, *optimizer, 3, 5);

  torch::manual_seed(63);  // other initial weights: everything must come from the file
  auto resumed = std::make_shared<workbook::TinyNet>(8, 0.0, false);
  auto resumed_optimizer = make_optimizer(*resumed);
  ch03::load_checkpoint(dir.path / "ckpt.pt", *resumed, *resumed_optimizer);
  run(*resumed, *resumed_optimizer, 3, 5);
  double worst = 0.0;
  auto a = model->parameters(), b = resumed->parameters();
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

}  // namespace optimizer_checks
