// Tests for noise_scale.hpp (given code, no exercise): the estimator of the
// gradient noise scale, against exact arithmetic and against gradients
// whose noise is known.
#include <catch2/catch.hpp>

#include "mpi_test.hpp"
#include "noise_scale.hpp"

TEST_CASE("noise scale: the two-batch estimator, exactly", "[noise_scale]") {
  auto comm = mpi_test::communicator();
  // |G|² = 1 and tr Σ = 100 give E|G_10|² = 1 + 100/10 = 11 and E|G_40|² = 3.5;
  // two steps on either side of those means average to them.
  ch06::NoiseScale noise(10, 40);
  noise.add(torch::tensor(12.0, torch::kFloat64), torch::tensor(4.0, torch::kFloat64));
  noise.add(torch::tensor(10.0, torch::kFloat64), torch::tensor(3.0, torch::kFloat64));
  const ch06::NoiseScaleEstimate e = noise.estimate(*comm);
  CHECK(e.steps == 2);
  CHECK(e.gradient_squared == Approx(1.0).epsilon(1e-12));
  CHECK(e.trace_sigma == Approx(100.0).epsilon(1e-12));
  CHECK(e.b_simple == Approx(100.0).epsilon(1e-12));
  INFO("estimate() starts the averages again");
  REQUIRE_THROWS_AS(noise.estimate(*comm), workbook::UserError);
}

TEST_CASE("noise scale: recovers B_simple from gradients with known noise", "[noise_scale]") {
  // Per-sample gradients G + noise in 1000 dimensions: |G|² = 10, tr Σ = 1000,
  // so B_simple = 100. Four "ranks" of 32 samples: each rank's mean is the
  // small batch, their mean the big one (the all-reduce, done here by hand).
  auto comm = mpi_test::communicator();
  torch::manual_seed(9);
  const int64_t dims = 1000, ranks = 4, per_rank = 32;
  const torch::Tensor truth = torch::full({dims}, 0.1, torch::kFloat64);
  ch06::NoiseScale noise(per_rank, ranks * per_rank);
  for (int step = 0; step < 400; ++step) {
    const torch::Tensor samples = truth + torch::randn({ranks, per_rank, dims}, torch::kFloat64);
    const torch::Tensor rank_means = samples.mean(1);  // [ranks, dims]
    noise.add(rank_means.square().sum(1).mean(), rank_means.mean(0).square().sum());
  }
  const ch06::NoiseScaleEstimate e = noise.estimate(*comm);
  INFO("|G|² " << e.gradient_squared << " (10), tr Σ " << e.trace_sigma << " (1000), B_simple " << e.b_simple << " (100)");
  CHECK(e.gradient_squared == Approx(10.0).epsilon(0.05));
  CHECK(e.trace_sigma == Approx(1000.0).epsilon(0.05));
  CHECK(e.b_simple == Approx(100.0).epsilon(0.1));
}

TEST_CASE("noise scale: one rank has no second batch size to compare with", "[noise_scale]") {
  REQUIRE_THROWS_AS(ch06::NoiseScale(64, 64), workbook::UserError);
}
