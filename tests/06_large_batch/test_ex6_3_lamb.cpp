// Tests for ex6.3: LAMB's steps, against values recorded from the reference
// solution and against properties every correct LAMB has (an adapted
// tensor's step size, excluded tensors stepping as torch::optim::AdamW
// does); its state in a checkpoint.
#include "catch2_compat.hpp"

#include <cmath>

#include "optimizer_checks.hpp"
#include "optimizers.hpp"

using optimizer_checks::check_row;
using optimizer_checks::row;
using optimizer_checks::ToyLayer;

namespace {

ch06::LambOptions toy_lamb_options() { return ch06::LambOptions(0.1).beta1(0.9).beta2(0.99).eps(1e-6).weight_decay(0.1); }

torch::optim::AdamWOptions toy_adamw_options(double weight_decay) {
  return torch::optim::AdamWOptions(0.1).betas({0.9, 0.99}).eps(1e-6).weight_decay(weight_decay);
}

}  // namespace

// The expected weights in this file are recorded from the reference
// solution; any implementation of optimizers.hpp's contract gives them to
// within 1e-12 (relative), in float64.

TEST_CASE("ex6.3 one LAMB step (values recorded from the reference)", "[ex6.3]") {
  ToyLayer layer;
  ch06::Lamb lamb(ch06::layer_adaptation_groups(layer, toy_lamb_options()), toy_lamb_options());
  optimizer_checks::set_grads(layer, row(0.6, -0.8), torch::tensor({0.5, -0.25}, torch::kFloat64));
  lamb.step();
  INFO("w = [[3, 4]], gradient [[0.6, -0.8]], lr 0.1, betas (0.9, 0.99), eps 1e-6, weight_decay 0.1; w after one "
       "step: " << layer.w);
  check_row(layer.w, 2.546020243868922, 4.209528950322305);
}

TEST_CASE("ex6.3 two steps with a large eps depend on both bias corrections (values recorded from the reference)",
          "[ex6.3]") {
  // A large eps and a weight decay make the step's direction depend on each
  // bias correction (with a tiny eps and no decay it would hardly show).
  ToyLayer layer;
  ch06::Lamb lamb(std::vector<torch::Tensor>{layer.w}, toy_lamb_options().eps(0.1).weight_decay(0.1));
  optimizer_checks::set_grads(layer, row(0.6, -0.8), torch::zeros({2}, torch::kFloat64));
  lamb.step();
  INFO("w after one step: " << layer.w);
  check_row(layer.w, 2.5394205113941757, 4.194593254445259);
  optimizer_checks::set_grads(layer, row(0.2, 0.4), torch::zeros({2}, torch::kFloat64));
  lamb.step();
  INFO("w after two steps: " << layer.w);
  check_row(layer.w, 2.0582099366375797, 4.100417494391529);
}

TEST_CASE("ex6.3 excluded tensors, and a tensor of norm zero, step as torch::optim::AdamW does", "[ex6.3]") {
  SECTION("an excluded group (adapt(false)), with and without weight decay, over three steps") {
    for (const double decay : {0.0, 0.1}) {
      CAPTURE(decay);
      torch::Tensor w = row(1.0, -2.0).set_requires_grad(true);
      torch::Tensor twin = row(1.0, -2.0).set_requires_grad(true);
      ch06::Lamb lamb({w}, toy_lamb_options().weight_decay(decay).adapt(false));
      torch::optim::AdamW adamw({twin}, toy_adamw_options(decay));
      const torch::Tensor grads[3] = {row(0.6, -0.8), row(0.2, 0.4), row(-1.0, 0.05)};
      for (int step = 0; step < 3; ++step) {
        CAPTURE(step);
        w.mutable_grad() = grads[step].clone();
        twin.mutable_grad() = grads[step].clone();
        lamb.step();
        adamw.step();
        INFO("LAMB, not adapted: " << w << ", torch::optim::AdamW from the same start: " << twin);
        CHECK(torch::allclose(w, twin, 1e-12, 0.0));
      }
    }
  }
  SECTION("the ToyLayer's bias, excluded by layer_adaptation_groups") {
    ToyLayer layer;
    ch06::Lamb lamb(ch06::layer_adaptation_groups(layer, toy_lamb_options()), toy_lamb_options());
    torch::Tensor twin = layer.b.detach().clone().set_requires_grad(true);
    torch::optim::AdamW adamw({twin}, toy_adamw_options(0.0));
    optimizer_checks::set_grads(layer, row(0.6, -0.8), torch::tensor({0.5, -0.25}, torch::kFloat64));
    twin.mutable_grad() = torch::tensor({0.5, -0.25}, torch::kFloat64);
    lamb.step();
    adamw.step();
    INFO("the bias (no weight decay, no trust ratio): " << layer.b << ", torch::optim::AdamW: " << twin);
    CHECK(torch::allclose(layer.b, twin, 1e-12, 0.0));
  }
  SECTION("a tensor of norm zero in an adapted group: the trust ratio is undefined, the step AdamW's") {
    torch::Tensor zero = torch::zeros({1, 2}, torch::kFloat64).set_requires_grad(true);
    torch::Tensor idle = torch::ones({1, 2}, torch::kFloat64).set_requires_grad(true);
    torch::Tensor twin = torch::zeros({1, 2}, torch::kFloat64).set_requires_grad(true);
    ch06::Lamb lamb({zero, idle}, toy_lamb_options());
    torch::optim::AdamW adamw({twin}, toy_adamw_options(0.1));
    zero.mutable_grad() = row(0.6, -0.8);
    twin.mutable_grad() = row(0.6, -0.8);
    lamb.step();
    adamw.step();
    INFO("the zero tensor moved to " << zero << ", torch::optim::AdamW to " << twin
         << ": a tensor that starts at zero must be able to move");
    CHECK(torch::allclose(zero, twin, 1e-12, 0.0));
    INFO("a parameter without a gradient is skipped (no weight decay either)");
    CHECK(idle.eq(1.0).all().item<bool>());
  }
}

TEST_CASE("ex6.3 every step moves an adapted tensor by lr times its own norm", "[ex6.3]") {
  // Two adapted tensors of norms 5 and 1 in one group, with weight decay,
  // over three steps whose gradients differ.
  torch::Tensor a = row(3.0, 4.0).set_requires_grad(true);
  torch::Tensor b = row(0.6, 0.8).set_requires_grad(true);
  ch06::Lamb lamb({a, b}, toy_lamb_options().eps(0.01));
  const torch::Tensor grads[3] = {row(0.6, 0.8), row(-2.0, 0.1), row(0.01, 0.03)};
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    const torch::Tensor a_before = a.detach().clone(), b_before = b.detach().clone();
    a.mutable_grad() = grads[step].clone();
    b.mutable_grad() = (grads[step] * -3.0).clone();
    lamb.step();
    const double moved_a = (a.detach() - a_before).norm().item<double>();
    const double moved_b = (b.detach() - b_before).norm().item<double>();
    const double norm_a = a_before.norm().item<double>(), norm_b = b_before.norm().item<double>();
    INFO("a (norm " << norm_a << ") moved " << moved_a << ", b (norm " << norm_b << ") moved " << moved_b
         << ": each must move by lr (0.1) times its norm before the step");
    CHECK(moved_a == Approx(0.1 * norm_a).epsilon(1e-12));
    CHECK(moved_b == Approx(0.1 * norm_b).epsilon(1e-12));
  }
}

TEST_CASE("ex6.3 LAMB's moments and step counts survive a checkpoint", "[ex6.3]") {
  auto comm = mpi_test::communicator();
  const double difference = optimizer_checks::resume_difference(
      [](torch::nn::Module& model) {
        const auto options = ch06::LambOptions(0.01);
        return std::make_unique<ch06::Lamb>(ch06::layer_adaptation_groups(model, options), options);
      },
      *comm);
  INFO("largest parameter difference between training on and resuming from the checkpoint: " << difference);
  REQUIRE(mpi_test::all_ranks(difference == 0.0));
}

TEST_CASE("ex6.3 Lamb::step keeps the trust ratio on the device: no host read per tensor", "[ex6.3]") {
  optimizer_checks::require_no_host_read_per_tensor([](torch::nn::Module& m) {
    return std::make_unique<ch06::Lamb>(m.parameters(), toy_lamb_options());
  });
}
