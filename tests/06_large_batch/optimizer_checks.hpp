// optimizer_checks.hpp — what the LARS and LAMB tests share: a two-tensor
// "layer" with hand-picked values, small float64 rows, the checkpoint round trip, and the count of
// host reads per step.
#pragma once
#include <functional>
#include <memory>

#include <torch/torch.h>

#include "catch2_compat.hpp"

#include "ddp.hpp"
#include "host_reads.hpp"
#include "mpi_test.hpp"
#include "oracles.hpp"
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

// A 1×2 float64 tensor [[x, y]].
inline torch::Tensor row(double x, double y) { return torch::tensor({{x, y}}, torch::kFloat64); }

// Checks a 1×2 tensor against [[x, y]] to within 1e-12 (relative).
inline void check_row(const torch::Tensor& got, double x, double y) {
  CHECK(got[0][0].item<double>() == Approx(x).epsilon(1e-12));
  CHECK(got[0][1].item<double>() == Approx(y).epsilon(1e-12));
}

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
  const auto batches = oracle::random_batches(5, 16, 61);
  mpi_test::SharedDirectory dir(comm);
  torch::manual_seed(62);
  auto model = std::make_shared<workbook::TinyNet>(8, 0.0, /*batch_norm=*/false);
  auto optimizer = make_optimizer(*model);
  oracle::train_steps(*model, *optimizer, batches, 0, 3);
  ch03::save_checkpoint(dir.path / "ckpt.pt", *model, *optimizer, 3, comm);
  oracle::train_steps(*model, *optimizer, batches, 3, 5);

  torch::manual_seed(63);  // other initial weights: everything must come from the file
  auto resumed = std::make_shared<workbook::TinyNet>(8, 0.0, false);
  auto resumed_optimizer = make_optimizer(*resumed);
  ch03::load_checkpoint(dir.path / "ckpt.pt", *resumed, *resumed_optimizer);
  oracle::train_steps(*resumed, *resumed_optimizer, batches, 3, 5);
  return oracle::max_parameter_difference(*model, *resumed);
}

// How often one step() read a value on the host, for a model of `tensors`
// weight tensors (Note: [why count host reads] in host_reads.hpp).
inline int64_t host_reads_per_step(const OptimizerFactory& make_optimizer, int tensors) {
  torch::nn::Module model;
  for (int i = 0; i < tensors; ++i) {
    torch::Tensor w = model.register_parameter("w" + std::to_string(i), torch::rand({4, 3}) + 0.5);
    w.mutable_grad() = torch::rand({4, 3});
  }
  auto optimizer = make_optimizer(model);
  optimizer->step();  // the first step creates the state
  for (auto& p : model.parameters()) p.mutable_grad() = torch::rand_like(p);
  host_reads::Counter counter;
  optimizer->step();
  return counter.reads();
}

// One step must not read more values on the host for 4 weight tensors than for 1.
inline void require_no_host_read_per_tensor(const OptimizerFactory& make_optimizer) {
  const int64_t reads_1 = host_reads_per_step(make_optimizer, 1);
  const int64_t reads_4 = host_reads_per_step(make_optimizer, 4);
  INFO("one step read a value on the host " << reads_1 << " times for 1 tensor and " << reads_4
       << " times for 4: a value read per tensor makes a GPU wait for every tensor at every step");
  REQUIRE(reads_4 == reads_1);
}

}  // namespace optimizer_checks
