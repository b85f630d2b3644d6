// Tests for ex6.2: LARS's steps, against values recorded from the reference
// solution and against properties every correct LARS has (a step's size for
// a given weight norm, scale invariance, excluded tensors stepping as
// torch::optim::SGD with momentum does); its state in a checkpoint.
#include "catch2_compat.hpp"

#include <cmath>

#include "optimizer_checks.hpp"
#include "optimizers.hpp"
#include "schedule.hpp"

using optimizer_checks::check_row;
using optimizer_checks::row;
using optimizer_checks::ToyLayer;

namespace {

ch06::LarsOptions toy_lars_options() {
  return ch06::LarsOptions(0.5).momentum(0.9).weight_decay(0.1).trust_coefficient(0.01);
}

// One step of a fresh LARS (momentum 0, so the step is the first update
// alone) on w = `weight` with gradient `grad`: the distance the weight moved.
double first_step_size(const torch::Tensor& weight, const torch::Tensor& grad, ch06::LarsOptions options) {
  torch::Tensor w = weight.clone().set_requires_grad(true);
  ch06::Lars lars({w}, options.momentum(0.0));
  w.mutable_grad() = grad.clone();
  lars.step();
  return (w.detach() - weight).norm().item<double>();
}

}  // namespace

// The expected weights in this file are recorded from the reference
// solution; any implementation of optimizers.hpp's contract gives them to
// within 1e-12 (relative), in float64.

TEST_CASE("ex6.2 two LARS steps of an adapted weight (values recorded from the reference)", "[ex6.2]") {
  ToyLayer layer;
  ch06::Lars lars({layer.w}, toy_lars_options());
  optimizer_checks::set_grads(layer, row(0.6, 0.8), torch::zeros({2}, torch::kFloat64));
  lars.step();
  INFO("w = [[3, 4]], gradient [[0.6, 0.8]], lr 0.5, momentum 0.9, weight_decay 0.1, η 0.01; w after one step: "
       << layer.w);
  check_row(layer.w, 2.985, 3.98);
  INFO("the bias was not given to this optimizer: untouched");
  CHECK(layer.b[0].item<double>() == 1.0);
  optimizer_checks::set_grads(layer, row(0.6, 0.8), torch::zeros({2}, torch::kFloat64));
  lars.step();
  INFO("w after a second step with the same gradient: " << layer.w);
  check_row(layer.w, 2.956575, 3.9421);
}

TEST_CASE("ex6.2 excluded tensors step as torch::optim::SGD with momentum (no weight decay, no local rate)",
          "[ex6.2]") {
  ToyLayer layer;
  ch06::Lars lars(ch06::layer_adaptation_groups(layer, toy_lars_options()), toy_lars_options());
  REQUIRE(lars.param_groups().size() == 2);
  torch::Tensor b = layer.b.detach().clone().set_requires_grad(true);
  torch::optim::SGD sgd({b}, torch::optim::SGDOptions(0.5).momentum(0.9));
  const torch::Tensor b_grads[3] = {torch::tensor({0.5, -0.25}, torch::kFloat64),
                                    torch::tensor({-0.1, 0.3}, torch::kFloat64),
                                    torch::tensor({0.2, 0.2}, torch::kFloat64)};
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    optimizer_checks::set_grads(layer, row(0.6, 0.8), b_grads[step]);
    b.mutable_grad() = b_grads[step].clone();
    lars.step();
    sgd.step();
    INFO("the bias: " << layer.b << ", torch::optim::SGD (lr 0.5, momentum 0.9) from the same start: " << b);
    CHECK(torch::allclose(layer.b, b, 1e-12, 0.0));
    if (step == 0) {
      INFO("the weight, adapted, as in the test above");
      check_row(layer.w, 2.985, 3.98);
    }
  }
}

TEST_CASE("ex6.2 a weight of norm zero still moves, as an excluded tensor does; no gradient, no move", "[ex6.2]") {
  torch::Tensor zero = torch::zeros({1, 2}, torch::kFloat64).set_requires_grad(true);
  torch::Tensor idle = torch::ones({1, 2}, torch::kFloat64).set_requires_grad(true);
  ch06::Lars lars({zero, idle}, toy_lars_options());
  torch::Tensor twin = torch::zeros({1, 2}, torch::kFloat64).set_requires_grad(true);
  torch::optim::SGD sgd({twin}, torch::optim::SGDOptions(0.5).momentum(0.9));
  zero.mutable_grad() = row(0.6, 0.8);
  twin.mutable_grad() = row(0.6, 0.8);
  lars.step();
  sgd.step();
  INFO("‖w‖ = 0 leaves the local rate undefined: the tensor must take the step an excluded tensor takes, "
       "plain momentum SGD at rate lr (torch::optim::SGD gives " << twin << "); it moved to " << zero);
  CHECK(torch::allclose(zero, twin, 1e-12, 0.0));
  INFO("a parameter without a gradient is skipped (no weight decay either)");
  CHECK(idle.eq(1.0).all().item<bool>());
}

TEST_CASE("ex6.2 a step's size is set by the weight's norm, not by the gradient's scale", "[ex6.2]") {
  const torch::Tensor w = row(3.0, 4.0);  // ‖w‖ = 5
  const double lr = 0.5, eta = 0.01, bound = lr * eta * 5.0;
  SECTION("without weight decay: lr · η · ‖w‖ whatever the gradient") {
    const auto options = toy_lars_options().weight_decay(0.0);
    for (const torch::Tensor& g :
         {row(0.6, 0.8), row(60.0, 80.0), row(-0.008, 0.006), row(1e-3, 0.0), row(2.0, -7.0)}) {
      const double size = first_step_size(w, g, options);
      INFO("gradient " << g << ": the weight moved " << size << ", expected " << bound);
      CHECK(size == Approx(bound).epsilon(1e-12));
    }
  }
  SECTION("with weight decay: lr · η · ‖w‖ when the gradient points along w, less when it does not") {
    const auto options = toy_lars_options();  // weight_decay 0.1
    for (const double scale : {0.2, 1.0, 50.0}) {
      const double size = first_step_size(w, w * scale, options);
      INFO("gradient " << scale << " · w: the weight moved " << size << ", expected " << bound);
      CHECK(size == Approx(bound).epsilon(1e-12));
    }
    {
      const double across = first_step_size(w, row(0.8, -0.6), options);
      INFO("gradient [[0.8, -0.6]], at right angles to w: the weight moved " << across << ", expected (recorded) "
           << 0.01863389981249838 << ", less than " << bound);
      CHECK(across == Approx(0.01863389981249838).epsilon(1e-12));
    }
    {
      const double against = first_step_size(w, row(-0.6, -0.8), options);
      INFO("gradient [[-0.6, -0.8]], against w: the weight moved " << against << ", expected (recorded) "
           << 0.008333333333333392);
      CHECK(against == Approx(0.008333333333333392).epsilon(1e-12));
    }
  }
}

TEST_CASE("ex6.2 scaling a tensor's weights and gradients by c scales its steps by c", "[ex6.2]") {
  // Two tensors in one group, the second c = 40 times the first, with
  // gradients 40 times the first's: each step of the second is 40 times the
  // first's, momentum and weight decay included.
  const double c = 40.0;
  torch::Tensor a = row(0.3, -1.2).set_requires_grad(true);
  torch::Tensor b = (row(0.3, -1.2) * c).set_requires_grad(true);
  ch06::Lars lars({a, b}, toy_lars_options().trust_coefficient(0.05));
  const torch::Tensor grads[3] = {row(0.5, 0.1), row(-0.2, 0.7), row(0.05, 0.05)};
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    a.mutable_grad() = grads[step].clone();
    b.mutable_grad() = grads[step] * c;
    lars.step();
    INFO("a: " << a << ", b: " << b << ", b / " << c << ": " << b / c);
    CHECK(torch::allclose(b / c, a, 1e-12, 0.0));
  }
}

TEST_CASE("ex6.2 the local rate is per tensor, and the rate of each step goes into the momentum", "[ex6.2]") {
  // Two adapted tensors in one group, of norms 5 and 1, with gradients of
  // norms 1 and 2; the schedule changes the rate between the two steps.
  torch::Tensor a = row(3.0, 4.0).set_requires_grad(true);
  torch::Tensor b = row(0.6, 0.8).set_requires_grad(true);
  ch06::Lars lars({a, b}, ch06::LarsOptions(0.5).momentum(0.9).weight_decay(0.0).trust_coefficient(0.01));
  const double rates[2] = {0.5, 0.05};
  for (int step = 0; step < 2; ++step) {
    ch06::set_learning_rate(lars, rates[step]);  // given, in schedule.cpp
    a.mutable_grad() = row(0.6, 0.8);
    b.mutable_grad() = row(0.0, 2.0);
    lars.step();
  }
  INFO("after a step at rate 0.5 and one at 0.05: a " << a << ", b " << b);
  check_row(a, 2.9700075, 3.96001);
  check_row(b, 0.6, 0.790001997740969);
}

TEST_CASE("ex6.2 LARS's momentum survives a checkpoint", "[ex6.2]") {
  auto comm = mpi_test::communicator();
  const double difference = optimizer_checks::resume_difference(
      [](torch::nn::Module& model) {
        const auto options = ch06::LarsOptions(2.0).trust_coefficient(0.01);
        return std::make_unique<ch06::Lars>(ch06::layer_adaptation_groups(model, options), options);
      },
      *comm);
  INFO("largest parameter difference between training on and resuming from the checkpoint: " << difference);
  REQUIRE(mpi_test::all_ranks(difference == 0.0));
}

TEST_CASE("ex6.2 Lars::step keeps the trust ratio on the device: no host read per tensor", "[ex6.2]") {
  optimizer_checks::require_no_host_read_per_tensor([](torch::nn::Module& m) {
    return std::make_unique<ch06::Lars>(m.parameters(), toy_lars_options());
  });
}

TEST_CASE("ex6.2 momentum correction: a change of rate rescales the velocity (Goyal et al. 2.2)", "[ex6.2]") {
  SECTION("an excluded tensor with the correction steps as torch::optim::SGD does through changes of rate") {
    // torch::optim::SGD multiplies the velocity by the rate when it applies
    // it, so a change of rate applies to the remembered steps at once.
    torch::Tensor w = row(1.0, -2.0).set_requires_grad(true);
    torch::Tensor twin = row(1.0, -2.0).set_requires_grad(true);
    ch06::Lars lars({w}, toy_lars_options().adapt(false).weight_decay(0.0).momentum_correction(true));
    torch::optim::SGD sgd({twin}, torch::optim::SGDOptions(0.5).momentum(0.9));
    const double rates[4] = {0.5, 0.25, 0.025, 0.1};
    const torch::Tensor grads[4] = {row(0.6, 0.8), row(-0.3, 0.1), row(0.2, 0.2), row(1.0, -0.5)};
    for (int step = 0; step < 4; ++step) {
      CAPTURE(step, rates[step]);
      ch06::set_learning_rate(lars, rates[step]);
      ch06::set_learning_rate(sgd, rates[step]);
      w.mutable_grad() = grads[step].clone();
      twin.mutable_grad() = grads[step].clone();
      lars.step();
      sgd.step();
      INFO("LARS with momentum_correction: " << w << ", torch::optim::SGD: " << twin);
      CHECK(torch::allclose(w, twin, 1e-12, 0.0));
    }
  }
  SECTION("the first test's two steps, with the rate halved for the second (values recorded from the reference)") {
    for (const bool corrected : {false, true}) {
      CAPTURE(corrected);
      ToyLayer layer;
      ch06::Lars lars({layer.w}, toy_lars_options().momentum_correction(corrected));
      optimizer_checks::set_grads(layer, row(0.6, 0.8), torch::zeros({2}, torch::kFloat64));
      lars.step();
      ch06::set_learning_rate(lars, 0.25);
      optimizer_checks::set_grads(layer, row(0.6, 0.8), torch::zeros({2}, torch::kFloat64));
      lars.step();
      INFO("w after a step at 0.5 and one at 0.25: " << layer.w);
      if (corrected)
        check_row(layer.w, 2.9707874999999997, 3.96105);
      else
        check_row(layer.w, 2.9640375, 3.95205);
    }
  }
}
