// Tests for ex6.3: LAMB updates worked out by hand, the exclusions, and its
// state in a checkpoint.
#include "catch2_compat.hpp"

#include <cmath>

#include "optimizer_checks.hpp"
#include "optimizers.hpp"

using optimizer_checks::ToyLayer;

namespace {

ch06::LambOptions toy_lamb_options() { return ch06::LambOptions(0.1).beta1(0.9).beta2(0.99).eps(1e-6).weight_decay(0.1); }

}  // namespace

TEST_CASE("ex6.3 one LAMB step equals the hand-computed one", "[ex6.3]") {
  ToyLayer layer;
  ch06::Lamb lamb(ch06::layer_adaptation_groups(layer, toy_lamb_options()), toy_lamb_options());
  optimizer_checks::set_grads(layer, torch::tensor({{0.6, -0.8}}, torch::kFloat64),
                              torch::tensor({0.5, -0.25}, torch::kFloat64));
  lamb.step();
  // Step 1: m̂ = g, v̂ = g² after the bias corrections, so m̂ / (√v̂ + ε) = g / (|g| + ε).
  const double eps = 1e-6;
  const double r0 = 0.6 / (0.6 + eps), r1 = -0.8 / (0.8 + eps);
  const double u0 = r0 + 0.1 * 3.0, u1 = r1 + 0.1 * 4.0;  // + λw
  const double trust = 5.0 / std::sqrt(u0 * u0 + u1 * u1);  // ‖w‖ / ‖u‖
  INFO("w after one step: " << layer.w << "; trust ratio " << trust);
  CHECK(layer.w[0][0].item<double>() == Approx(3.0 - 0.1 * trust * u0).epsilon(1e-12));
  CHECK(layer.w[0][1].item<double>() == Approx(4.0 - 0.1 * trust * u1).epsilon(1e-12));
  INFO("the bias is excluded: no decay, no trust ratio: b − 0.1 · g / (|g| + ε)");
  CHECK(layer.b[0].item<double>() == Approx(1.0 - 0.1 * 0.5 / (0.5 + eps)).epsilon(1e-12));
  CHECK(layer.b[1].item<double>() == Approx(-2.0 + 0.1 * 0.25 / (0.25 + eps)).epsilon(1e-12));
}

TEST_CASE("ex6.3 the second step uses both moments and their bias corrections", "[ex6.3]") {
  // A large ε and a weight decay make the step depend on each bias
  // correction (with a tiny ε and no decay they would nearly cancel in the
  // trust ratio).
  ToyLayer layer;
  const double eps = 0.1, decay = 0.1;
  ch06::Lamb lamb(std::vector<torch::Tensor>{layer.w}, toy_lamb_options().eps(eps).weight_decay(decay));
  const double g1[2] = {0.6, -0.8}, g2[2] = {0.2, 0.4};
  double w[2] = {3.0, 4.0}, m[2] = {0, 0}, v[2] = {0, 0};
  for (int t = 1; t <= 2; ++t) {
    const double* g = t == 1 ? g1 : g2;
    optimizer_checks::set_grads(layer, torch::tensor({{g[0], g[1]}}, torch::kFloat64), torch::zeros({2}, torch::kFloat64));
    lamb.step();
    // The same algorithm, written out per element in double precision.
    double u[2];
    for (int i = 0; i < 2; ++i) {
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      v[i] = 0.99 * v[i] + 0.01 * g[i] * g[i];
      const double m_hat = m[i] / (1 - std::pow(0.9, t)), v_hat = v[i] / (1 - std::pow(0.99, t));
      u[i] = m_hat / (std::sqrt(v_hat) + eps) + decay * w[i];
    }
    const double trust = std::hypot(w[0], w[1]) / std::hypot(u[0], u[1]);
    for (int i = 0; i < 2; ++i) w[i] -= 0.1 * trust * u[i];
  }
  INFO("w after two steps: " << layer.w << ", expected [" << w[0] << ", " << w[1] << "]");
  CHECK(layer.w[0][0].item<double>() == Approx(w[0]).epsilon(1e-12));
  CHECK(layer.w[0][1].item<double>() == Approx(w[1]).epsilon(1e-12));
}

TEST_CASE("ex6.3 the trust ratio is per tensor", "[ex6.3]") {
  // Two adapted tensors of norms 5 and 1 in one group: each moves by lr
  // times its own norm (the first step's u = g / (|g| + ε) has the same
  // norm for both).
  torch::Tensor a = torch::tensor({3.0, 4.0}, torch::kFloat64).view({1, 2}).set_requires_grad(true);
  torch::Tensor b = torch::tensor({0.6, 0.8}, torch::kFloat64).view({1, 2}).set_requires_grad(true);
  ch06::Lamb lamb({a, b}, toy_lamb_options().weight_decay(0.0));
  a.mutable_grad() = torch::tensor({{0.6, 0.8}}, torch::kFloat64);
  b.mutable_grad() = torch::tensor({{-0.3, 0.4}}, torch::kFloat64);
  lamb.step();
  const torch::Tensor moved_a = (a - torch::tensor({{3.0, 4.0}}, torch::kFloat64)).norm();
  const torch::Tensor moved_b = (b - torch::tensor({{0.6, 0.8}}, torch::kFloat64)).norm();
  INFO("each tensor moves by lr (0.1) times its own norm: " << moved_a.item<double>() << " (expected 0.5), "
                                                            << moved_b.item<double>() << " (expected 0.1)");
  CHECK(moved_a.item<double>() == Approx(0.5).epsilon(1e-9));
  CHECK(moved_b.item<double>() == Approx(0.1).epsilon(1e-9));
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
