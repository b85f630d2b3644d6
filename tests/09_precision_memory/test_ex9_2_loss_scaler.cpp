// Tests for ex9.2: the dynamic loss scaler. The scale trace is written out
// by hand from PyTorch's rule; the agreement on overflow is tested with an
// inf on one rank only; a skipped step is compared bit for bit with the
// state before it.
#include "catch2_compat.hpp"

#include <limits>

#include "mpi_test.hpp"
#include "precision.hpp"
#include "workbook/torch_compat.hpp"

namespace {

struct AdamSnapshot {
  std::vector<torch::Tensor> parameters, exp_avg, exp_avg_sq;
  std::vector<int64_t> steps;
};

AdamSnapshot snapshot_adam(torch::optim::Adam& adam, const std::vector<torch::Tensor>& parameters) {
  AdamSnapshot s;
  for (const torch::Tensor& p : parameters) {
    s.parameters.push_back(p.detach().clone());
    auto& state = static_cast<torch::optim::AdamParamState&>(
        *adam.state().at(workbook::torch_compat::optimizer_state_key(p)));
    s.exp_avg.push_back(state.exp_avg().clone());
    s.exp_avg_sq.push_back(state.exp_avg_sq().clone());
    s.steps.push_back(state.step());
  }
  return s;
}

bool same_adam(const AdamSnapshot& a, const AdamSnapshot& b) {
  for (size_t i = 0; i < a.parameters.size(); ++i)
    if (!torch::equal(a.parameters[i], b.parameters[i]) || !torch::equal(a.exp_avg[i], b.exp_avg[i]) ||
        !torch::equal(a.exp_avg_sq[i], b.exp_avg_sq[i]) || a.steps[i] != b.steps[i])
      return false;
  return true;
}

// Gradients `scale` × (1, 2, 3, ...) on every parameter: exact after unscaling by a power of 2.
void set_scaled_gradients(const std::vector<torch::Tensor>& parameters, double scale) {
  for (const torch::Tensor& p : parameters)
    p.mutable_grad() = torch::arange(1, p.numel() + 1, torch::kFloat32).view(p.sizes()) * scale;
}

}  // namespace

TEST_CASE("ex9.2 the scale follows PyTorch's rule over a scripted run of clean and overflowing steps", "[ex9.2]") {
  ch09::ScalerOptions options;
  options.init_scale = 8.0;
  options.growth_interval = 3;
  ch09::DynamicLossScaler scaler(options);
  //                           C  C  C   C   O  C  C  C   O  O  C  C
  const std::vector<bool> overflow{false, false, false, false, true, false, false, false, true, true, false, false};
  const std::vector<double> scale_after{8, 8, 16, 16, 8, 8, 8, 16, 8, 4, 4, 4};
  const std::vector<int64_t> clean_after{1, 2, 0, 1, 0, 1, 2, 0, 0, 0, 1, 2};
  for (size_t step = 0; step < overflow.size(); ++step) {
    scaler.update(overflow[step]);
    CAPTURE(step, overflow[step]);
    INFO("clean: count + 1, and at growth_interval (3) the scale doubles and the count restarts; "
         "overflow: the scale halves and the count restarts at 0");
    REQUIRE(scaler.scale_value() == scale_after[step]);
    REQUIRE(scaler.clean_steps() == clean_after[step]);
  }
  REQUIRE(scaler.skipped_steps() == 3);
  INFO("PyTorch's defaults: 2^16, x2 every 2000 clean steps, x0.5 on overflow");
  REQUIRE(ch09::DynamicLossScaler().scale_value() == 65536.0);
}

TEST_CASE("ex9.2 the scale follows the options' factors and interval, whatever they are", "[ex9.2]") {
  // Factors other than 2 and 0.5, an interval other than the default: every
  // scale below is exact in double.
  ch09::ScalerOptions options;
  options.init_scale = 24.0;
  options.growth_factor = 3.0;
  options.backoff_factor = 0.125;
  options.growth_interval = 4;
  ch09::DynamicLossScaler scaler(options);
  //                           C      C      C      C     O     C      C      O     C      C      C      C      C
  const std::vector<bool> overflow{false, false, false, false, true, false, false, true, false, false, false, false, false};
  const std::vector<double> scale_after{24, 24, 24, 72, 9, 9, 9, 1.125, 1.125, 1.125, 1.125, 3.375, 3.375};
  const std::vector<int64_t> clean_after{1, 2, 3, 0, 0, 1, 2, 0, 1, 2, 3, 0, 1};
  for (size_t step = 0; step < overflow.size(); ++step) {
    scaler.update(overflow[step]);
    CAPTURE(step, overflow[step], scaler.scale_value(), scaler.clean_steps());
    INFO("growth_factor 3, backoff_factor 0.125, growth_interval 4: expected scale " << scale_after[step]
                                                                                    << " and clean count " << clean_after[step]);
    REQUIRE(scaler.scale_value() == scale_after[step]);
    REQUIRE(scaler.clean_steps() == clean_after[step]);
  }
  REQUIRE(scaler.skipped_steps() == 2);

  // An interval of 1: every clean step grows the scale.
  options.init_scale = 16.0;
  options.growth_factor = 1.5;
  options.backoff_factor = 0.75;
  options.growth_interval = 1;
  ch09::DynamicLossScaler every_step(options);
  const std::vector<bool> overflow_1{false, false, true, false};
  const std::vector<double> scale_after_1{24, 36, 27, 40.5};
  for (size_t step = 0; step < overflow_1.size(); ++step) {
    every_step.update(overflow_1[step]);
    CAPTURE(step, overflow_1[step], every_step.scale_value(), every_step.clean_steps());
    INFO("growth_factor 1.5, backoff_factor 0.75, growth_interval 1: expected scale " << scale_after_1[step]
                                                                                     << " and clean count 0");
    REQUIRE(every_step.scale_value() == scale_after_1[step]);
    REQUIRE(every_step.clean_steps() == 0);
  }
  REQUIRE(every_step.skipped_steps() == 1);
}

TEST_CASE("ex9.2 unscale divides by the scale, and every rank learns of an overflow on any rank", "[ex9.2][np3]") {
  auto comm = mpi_test::communicator();
  const int last = comm->size() - 1;
  ch09::DynamicLossScaler scaler;  // 65536
  std::vector<torch::Tensor> parameters{torch::zeros({3, 2}, torch::requires_grad()), torch::zeros({5}, torch::requires_grad()),
                                        torch::zeros({2}, torch::requires_grad())};
  set_scaled_gradients(parameters, 65536.0);
  parameters[2].mutable_grad() = torch::Tensor();  // a parameter without a gradient is left alone
  const workbook::CommStats before = comm->stats();
  const bool found_inf = scaler.unscale(parameters, *comm);
  INFO("the gradients divided by 65536: 1, 2, 3, ... exactly");
  REQUIRE(mpi_test::all_ranks(torch::equal(parameters[0].grad(), torch::arange(1, 7, torch::kFloat32).view({3, 2}))));
  REQUIRE(mpi_test::all_ranks(torch::equal(parameters[1].grad(), torch::arange(1, 6, torch::kFloat32))));
  REQUIRE(mpi_test::all_ranks(!found_inf));
  const workbook::CommStats after = comm->stats();
  const int64_t calls = after.collectives() - before.collectives() +
                        (after.count(workbook::CommOp::Send) - before.count(workbook::CommOp::Send)) +
                        (after.count(workbook::CommOp::Exchange) - before.count(workbook::CommOp::Exchange));
  INFO("one call per unscale (a collective; sends and exchanges counted too), whatever the number of tensors: "
       << calls << " made");
  REQUIRE(mpi_test::all_ranks(calls <= 1));

  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    CAPTURE(bad);
    set_scaled_gradients(parameters, 65536.0);
    parameters[2].mutable_grad() = torch::Tensor();
    if (comm->rank() == last) parameters[1].mutable_grad()[3] = bad;
    INFO("only rank " << last << " holds an inf or NaN: every rank must say so, or the others step while it skips");
    REQUIRE(mpi_test::all_ranks(scaler.unscale(parameters, *comm)));
  }
}

TEST_CASE("ex9.2 a skipped step leaves parameters, Adam's state and the schedule exactly as they were", "[ex9.2][np3]") {
  auto comm = mpi_test::communicator();
  const int last = comm->size() - 1;
  ch09::ScalerOptions options;
  options.init_scale = 1024.0;
  ch09::DynamicLossScaler scaler(options);
  std::vector<torch::Tensor> parameters{torch::ones({4}, torch::requires_grad()), torch::ones({2, 3}, torch::requires_grad())};
  torch::optim::Adam adam(parameters, torch::optim::AdamOptions(0.1));
  int64_t schedule_steps = 0;
  const auto advance = [&] { ++schedule_steps; };

  set_scaled_gradients(parameters, 1024.0);
  INFO("a clean step is taken: the optimizer steps, the schedule advances");
  REQUIRE(mpi_test::all_ranks(ch09::scaled_step(scaler, adam, parameters, advance, *comm)));
  REQUIRE(mpi_test::all_ranks(schedule_steps == 1));
  const AdamSnapshot before = snapshot_adam(adam, parameters);

  set_scaled_gradients(parameters, 1024.0);
  if (comm->rank() == last) parameters[0].mutable_grad()[0] = std::numeric_limits<float>::infinity();
  INFO("an inf on rank " << last << " only: every rank skips");
  REQUIRE(mpi_test::all_ranks(!ch09::scaled_step(scaler, adam, parameters, advance, *comm)));
  INFO("skipped: the parameters and Adam's moments and step count bit for bit as before");
  REQUIRE(mpi_test::all_ranks(same_adam(before, snapshot_adam(adam, parameters))));
  INFO("skipped: the schedule did not move (it counts steps taken)");
  REQUIRE(mpi_test::all_ranks(schedule_steps == 1));
  REQUIRE(mpi_test::all_ranks(scaler.scale_value() == 512.0 && scaler.skipped_steps() == 1));

  set_scaled_gradients(parameters, 512.0);
  REQUIRE(mpi_test::all_ranks(ch09::scaled_step(scaler, adam, parameters, advance, *comm)));
  REQUIRE(mpi_test::all_ranks(schedule_steps == 2));
  REQUIRE(mpi_test::all_ranks(!same_adam(before, snapshot_adam(adam, parameters))));
}

TEST_CASE("ex9.2 with the optimizer sharded as Chapter 7 shards it, an overflow one shard sees skips every rank's step",
          "[ex9.2][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size(), last = n - 1;
  constexpr int64_t kShard = 4;
  // Every rank's full gradient, scaled by 1024; rank 0's holds an inf in the
  // last rank's shard. After the reduce-scatter (ZeRO's), only that rank's
  // shard of the summed gradient is inf: only it can see the overflow.
  torch::Tensor local = torch::full({n * kShard}, 1024.0f);
  if (comm->rank() == 0) local[last * kShard + 1] = std::numeric_limits<float>::infinity();
  torch::Tensor shard_gradient = torch::empty({kShard});
  comm->reduce_scatter(local, shard_gradient, workbook::ReduceOp::Sum);
  torch::Tensor shard = torch::ones({kShard}, torch::requires_grad());  // this rank's part of the parameters
  shard.mutable_grad() = shard_gradient;
  torch::optim::Adam adam({shard}, torch::optim::AdamOptions(0.1));
  ch09::ScalerOptions options;
  options.init_scale = 1024.0;
  ch09::DynamicLossScaler scaler(options);
  int64_t schedule_steps = 0;
  const bool taken = ch09::scaled_step(scaler, adam, {shard}, [&] { ++schedule_steps; }, *comm);
  INFO("rank " << last << "'s shard overflowed: every rank must skip, or the others' shards move while its does not");
  REQUIRE(mpi_test::all_ranks(!taken));
  REQUIRE(mpi_test::all_ranks(torch::equal(shard.detach(), torch::ones({kShard})) && schedule_steps == 0));
}
