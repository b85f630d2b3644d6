// Tests for ex6.2: LARS updates worked out by hand, the exclusions, and its
// state in a checkpoint.
#include "catch2_compat.hpp"

#include <cmath>

#include "optimizer_checks.hpp"
#include "optimizers.hpp"
#include "schedule.hpp"

using optimizer_checks::ToyLayer;

namespace {

ch06::LarsOptions toy_lars_options() {
  return ch06::LarsOptions(0.5).momentum(0.9).weight_decay(0.1).trust_coefficient(0.01);
}

}  // namespace

TEST_CASE("ex6.2 one LARS step of an adapted weight equals the hand-computed one", "[ex6.2]") {
  ToyLayer layer;
  ch06::Lars lars({layer.w}, toy_lars_options());
  optimizer_checks::set_grads(layer, torch::tensor({{0.6, 0.8}}, torch::kFloat64), torch::zeros({2}, torch::kFloat64));
  lars.step();
  // ‖w‖ = 5, ‖g‖ = 1: local_lr = 0.01 · 5 / (1 + 0.1 · 5) = 1/30;
  // g + βw = [0.9, 1.2]; v = 0.5 · (1/30) · [0.9, 1.2] = [0.015, 0.02]; w − v.
  INFO("w after one step: " << layer.w);
  CHECK(layer.w[0][0].item<double>() == Approx(2.985).epsilon(1e-12));
  CHECK(layer.w[0][1].item<double>() == Approx(3.98).epsilon(1e-12));
  INFO("the bias was not given to this optimizer: untouched");
  CHECK(layer.b[0].item<double>() == 1.0);

  // Second step, same gradient: the momentum buffer carries 0.9 of the first.
  optimizer_checks::set_grads(layer, torch::tensor({{0.6, 0.8}}, torch::kFloat64), torch::zeros({2}, torch::kFloat64));
  lars.step();
  const double norm1 = 0.995 * 5.0;  // w₁ = 0.995 · w₀
  const double local_lr = 0.01 * norm1 / (1.0 + 0.1 * norm1);
  const double v0 = 0.9 * 0.015 + 0.5 * local_lr * (0.6 + 0.1 * 2.985);
  const double v1 = 0.9 * 0.02 + 0.5 * local_lr * (0.8 + 0.1 * 3.98);
  INFO("w after two steps: " << layer.w);
  CHECK(layer.w[0][0].item<double>() == Approx(2.985 - v0).epsilon(1e-12));
  CHECK(layer.w[0][1].item<double>() == Approx(3.98 - v1).epsilon(1e-12));
}

TEST_CASE("ex6.2 excluded tensors: plain momentum SGD, no weight decay, no trust ratio", "[ex6.2]") {
  ToyLayer layer;
  ch06::Lars lars(ch06::layer_adaptation_groups(layer, toy_lars_options()), toy_lars_options());
  REQUIRE(lars.param_groups().size() == 2);
  optimizer_checks::set_grads(layer, torch::tensor({{0.6, 0.8}}, torch::kFloat64),
                              torch::tensor({0.5, -0.25}, torch::kFloat64));
  lars.step();
  INFO("the bias: v = 0.5 · g = [0.25, -0.125], b − v = [0.75, -1.875]");
  CHECK(layer.b[0].item<double>() == Approx(0.75).epsilon(1e-12));
  CHECK(layer.b[1].item<double>() == Approx(-1.875).epsilon(1e-12));
  INFO("the weight, adapted as before");
  CHECK(layer.w[0][0].item<double>() == Approx(2.985).epsilon(1e-12));
}

TEST_CASE("ex6.2 a weight of norm zero still moves (local rate 1: plain momentum SGD); no gradient, no move", "[ex6.2]") {
  torch::Tensor zero = torch::zeros({1, 2}, torch::kFloat64).set_requires_grad(true);
  torch::Tensor idle = torch::ones({1, 2}, torch::kFloat64).set_requires_grad(true);
  ch06::Lars lars({zero, idle}, toy_lars_options());
  zero.mutable_grad() = torch::tensor({{0.6, 0.8}}, torch::kFloat64);
  lars.step();
  INFO("‖w‖ = 0 leaves the local rate undefined: it is 1 (η included), as for an excluded tensor, so "
       "v = 0.5 · 1 · (g + 0.1 · 0) = [0.3, 0.4]; a trust ratio of 1 times η = 0.01 would move it 100 times less: "
       << zero);
  CHECK(zero[0][0].item<double>() == Approx(-0.3).epsilon(1e-12));
  CHECK(zero[0][1].item<double>() == Approx(-0.4).epsilon(1e-12));
  INFO("a parameter without a gradient is skipped (no weight decay either)");
  CHECK(idle.eq(1.0).all().item<bool>());
}

TEST_CASE("ex6.2 the trust ratio is per tensor, and the rate of each step goes into the momentum", "[ex6.2]") {
  // Two adapted tensors in one group, of norms 5 and 1, with gradients of norms 1 and 2.
  torch::Tensor a = torch::tensor({3.0, 4.0}, torch::kFloat64).view({1, 2}).set_requires_grad(true);
  torch::Tensor b = torch::tensor({0.6, 0.8}, torch::kFloat64).view({1, 2}).set_requires_grad(true);
  const auto options = ch06::LarsOptions(0.5).momentum(0.9).weight_decay(0.0).trust_coefficient(0.01);
  ch06::Lars lars({a, b}, options);
  const double ga[2] = {0.6, 0.8}, gb[2] = {0.0, 2.0};
  double wa[2] = {3.0, 4.0}, wb[2] = {0.6, 0.8}, va[2] = {0, 0}, vb[2] = {0, 0};
  // Algorithm 1 puts the rate inside the momentum: when the schedule changes
  // it between steps, v keeps the old rate's share (not w −= lr · v).
  const double rates[2] = {0.5, 0.05};
  for (int step = 0; step < 2; ++step) {
    ch06::set_learning_rate(lars, rates[step]);  // given, in schedule.cpp
    a.mutable_grad() = torch::tensor({ga[0], ga[1]}, torch::kFloat64).view({1, 2});
    b.mutable_grad() = torch::tensor({gb[0], gb[1]}, torch::kFloat64).view({1, 2});
    lars.step();
    const double local_a = 0.01 * std::hypot(wa[0], wa[1]) / std::hypot(ga[0], ga[1]);
    const double local_b = 0.01 * std::hypot(wb[0], wb[1]) / std::hypot(gb[0], gb[1]);
    for (int i = 0; i < 2; ++i) {
      va[i] = 0.9 * va[i] + rates[step] * local_a * ga[i];
      vb[i] = 0.9 * vb[i] + rates[step] * local_b * gb[i];
      wa[i] -= va[i];
      wb[i] -= vb[i];
    }
  }
  INFO("a: " << a << " expected [" << wa[0] << ", " << wa[1] << "]; b: " << b << " expected [" << wb[0] << ", "
             << wb[1] << "]");
  for (int i = 0; i < 2; ++i) {
    CHECK(a[0][i].item<double>() == Approx(wa[i]).epsilon(1e-12));
    CHECK(b[0][i].item<double>() == Approx(wb[i]).epsilon(1e-12));
  }
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
  // The first test's two steps, with the rate halved for the second.
  for (const bool corrected : {false, true}) {
    CAPTURE(corrected);
    ToyLayer layer;
    ch06::Lars lars({layer.w}, toy_lars_options().momentum_correction(corrected));
    optimizer_checks::set_grads(layer, torch::tensor({{0.6, 0.8}}, torch::kFloat64), torch::zeros({2}, torch::kFloat64));
    lars.step();  // v = [0.015, 0.02], w = [2.985, 3.98]
    ch06::set_learning_rate(lars, 0.25);
    optimizer_checks::set_grads(layer, torch::tensor({{0.6, 0.8}}, torch::kFloat64), torch::zeros({2}, torch::kFloat64));
    lars.step();
    const double norm1 = 0.995 * 5.0;
    const double local_lr = 0.01 * norm1 / (1.0 + 0.1 * norm1);
    // Corrected, the remembered velocity is rescaled by 0.25 / 0.5 before the new step adds to it.
    const double kept = corrected ? 0.9 * 0.25 / 0.5 : 0.9;
    const double v0 = kept * 0.015 + 0.25 * local_lr * (0.6 + 0.1 * 2.985);
    const double v1 = kept * 0.02 + 0.25 * local_lr * (0.8 + 0.1 * 3.98);
    INFO("w after a step at 0.5 and one at 0.25: " << layer.w << (corrected ? "; with momentum_correction the "
         "velocity is multiplied by momentum · lr / last_lr, here 0.9 · 0.25 / 0.5" : "; without it, by momentum alone"));
    CHECK(layer.w[0][0].item<double>() == Approx(2.985 - v0).epsilon(1e-12));
    CHECK(layer.w[0][1].item<double>() == Approx(3.98 - v1).epsilon(1e-12));
  }
}
