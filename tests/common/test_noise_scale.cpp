// Tests for workbook/noise_scale.hpp: the estimator of the gradient noise
// scale, against exact arithmetic and against gradients whose noise is known.
#include "catch2_compat.hpp"

#include "workbook/noise_scale.hpp"

TEST_CASE("noise scale: the two-batch estimator, exactly", "[noise_scale]") {
  // |G|² = 1 and tr Σ = 100 give E|G_10|² = 1 + 100/10 = 11 and E|G_40|² = 3.5.
  const workbook::NoiseScaleEstimate e = workbook::noise_scale_estimate(11.0, 3.5, 10, 40);
  CHECK(e.gradient_squared == Approx(1.0).epsilon(1e-12));
  CHECK(e.trace_sigma == Approx(100.0).epsilon(1e-12));
  CHECK(e.b_simple == Approx(100.0).epsilon(1e-12));
  CHECK(e.resolved());
  INFO("noise larger than the signal's estimate: |G|² comes out negative, and the estimate says so");
  CHECK_FALSE(workbook::noise_scale_estimate(11.0, 2.7, 10, 40).resolved());
}

TEST_CASE("noise scale: recovers B_simple from gradients with known noise", "[noise_scale]") {
  // Per-sample gradients G + noise in 1000 dimensions: |G|² = 10, tr Σ = 1000,
  // so B_simple = 100. Four "ranks" of 32 samples: each rank's mean is the
  // small batch, their mean the big one (the all-reduce, by hand).
  torch::manual_seed(9);
  const int64_t dims = 1000, ranks = 4, per_rank = 32, steps = 400;
  const torch::Tensor truth = torch::full({dims}, 0.1, torch::kFloat64);
  double small = 0.0, big = 0.0;
  for (int64_t step = 0; step < steps; ++step) {
    const torch::Tensor rank_means = (truth + torch::randn({ranks, per_rank, dims}, torch::kFloat64)).mean(1);
    small += rank_means.square().sum(1).mean().item<double>() / steps;
    big += rank_means.mean(0).square().sum().item<double>() / steps;
  }
  const workbook::NoiseScaleEstimate e = workbook::noise_scale_estimate(small, big, per_rank, ranks * per_rank);
  INFO("|G|² " << e.gradient_squared << " (10), tr Σ " << e.trace_sigma << " (1000), B_simple " << e.b_simple
               << " (100)");
  CHECK(e.gradient_squared == Approx(10.0).epsilon(0.05));
  CHECK(e.trace_sigma == Approx(1000.0).epsilon(0.05));
  CHECK(e.b_simple == Approx(100.0).epsilon(0.1));
}

TEST_CASE("noise scale: one rank has no second batch size to compare with", "[noise_scale]") {
  REQUIRE_THROWS_AS(workbook::NoiseScale(64, 64), workbook::UserError);
  REQUIRE_THROWS_AS(workbook::NoiseScale(0, 64), workbook::UserError);
}

TEST_CASE("noise scale: squared_gradient_norm sums every parameter's gradient", "[noise_scale]") {
  workbook::TinyNet model(4, 0.0, /*batch_norm=*/false);
  double expected = 0.0;
  for (auto& p : model.parameters()) {
    p.mutable_grad() = torch::full_like(p, 0.5);
    expected += 0.25 * static_cast<double>(p.numel());
  }
  CHECK(workbook::squared_gradient_norm(model).item<double>() == Approx(expected).epsilon(1e-12));
}
