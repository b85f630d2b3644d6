// Tests for schedule.hpp's learning_rate_at (given code, ex6.1 until
// 2026-11-30): the rate at chosen points of a schedule, recorded from it, and
// the shape checks (start, continuity, steady growth, 0 at the end).
#include "catch2_compat.hpp"

#include <utility>
#include <vector>

#include "schedule.hpp"

namespace {

ch06::LrSchedule goyal_resnet50() {
  // Goyal et al.'s ImageNet setting: 0.1 per 256, global batch 8192 (k = 32),
  // 5 epochs of warm-up, ×0.1 at epochs 30, 60 and 80.
  ch06::LrSchedule s;
  s.base_lr = 0.1;
  s.base_batch = 256;
  s.global_batch = 8192;
  s.warmup_epochs = 5;
  s.decay_epochs = {30, 60, 80};
  return s;
}

// (epoch, rate) pairs recorded from the reference solution.
using Points = std::vector<std::pair<double, double>>;

void check_points(const ch06::LrSchedule& s, const Points& points) {
  for (const auto& [epoch, rate] : points) {
    const double got = ch06::learning_rate_at(s, epoch);
    INFO("the rate at epoch " << epoch << ": " << got << ", expected " << rate);
    if (rate == 0.0)
      CHECK(got == Approx(0.0).margin(1e-15));
    else
      CHECK(got == Approx(rate).epsilon(1e-12));
  }
}

}  // namespace

TEST_CASE("schedule: the linear scaling rule with gradual warm-up and step decay", "[schedule][given]") {
  const ch06::LrSchedule s = goyal_resnet50();
  INFO("peak 3.2, base_lr 0.1, warm-up 5 epochs, milestones 30, 60, 80; within the warm-up the rate changes at "
       "every step, not once per epoch (epoch 0.25 is a quarter into the first epoch)");
  check_points(s, {{0.0, 0.1},
                   {0.25, 0.255},
                   {1.0, 0.72},
                   {2.5, 1.65},
                   {4.99, 3.1938},
                   {5.0, 3.2},
                   {29.99, 3.2},
                   {30.0, 0.32},
                   {60.5, 0.032},
                   {89.9, 0.0032}});
}

TEST_CASE("schedule: the warm-up rises steadily and meets the peak without a jump", "[schedule][given]") {
  const ch06::LrSchedule s = goyal_resnet50();
  const double peak = ch06::peak_learning_rate(s);
  double previous = ch06::learning_rate_at(s, 0.0);
  double previous_rise = -1.0;
  for (int step = 1; step <= 500; ++step) {  // 100 steps an epoch
    const double lr = ch06::learning_rate_at(s, step / 100.0);
    const double rise = lr - previous;
    INFO("step " << step << " (epoch " << step / 100.0 << "): rate " << lr << " after " << previous
                 << ": during the warm-up the rate must grow by the same amount at every step");
    REQUIRE(rise > 0.0);
    if (previous_rise >= 0.0) REQUIRE(rise == Approx(previous_rise).epsilon(1e-9));
    previous = lr;
    previous_rise = rise;
  }
  INFO("at the warm-up's end the rate must be the peak, " << peak << ", with no jump there: at epoch 5 it is "
       << ch06::learning_rate_at(s, 5.0) << ", just before " << ch06::learning_rate_at(s, 5.0 - 1e-9));
  CHECK(ch06::learning_rate_at(s, 5.0) == Approx(peak).epsilon(1e-12));
  CHECK(ch06::learning_rate_at(s, 5.0 - 1e-9) == Approx(peak).epsilon(1e-8));
}

TEST_CASE("schedule: without warm-up the schedule starts at the peak", "[schedule][given]") {
  ch06::LrSchedule s = goyal_resnet50();
  s.warmup_epochs = 0;
  check_points(s, {{0.0, 3.2}, {0.5, 3.2}, {29.0, 3.2}, {31.0, 0.32}, {81.0, 0.0032}});
}

TEST_CASE("schedule: a batch at or below the reference batch has nothing to warm up to", "[schedule][given]") {
  ch06::LrSchedule s = goyal_resnet50();
  s.global_batch = 128;  // a peak below the single-device rate
  check_points(s, {{0.0, 0.05}, {2.0, 0.05}, {5.0, 0.05}, {45.0, 0.005}});
}

TEST_CASE("schedule: the square-root rule and a different decay factor", "[schedule][given]") {
  ch06::LrSchedule s;
  s.base_lr = 0.002;
  s.base_batch = 256;
  s.global_batch = 4096;
  s.scaling_power = 0.5;
  s.warmup_epochs = 2;
  s.decay_epochs = {6};
  s.decay_factor = 0.5;
  CHECK(ch06::peak_learning_rate(s) == Approx(0.008).epsilon(1e-12));
  check_points(s, {{0.0, 0.002}, {0.5, 0.0035}, {1.5, 0.0065}, {3.0, 0.008}, {6.0, 0.004}, {7.0, 0.004}});
}

TEST_CASE("schedule: a milestone inside the warm-up applies to the warm-up line too", "[schedule][given]") {
  ch06::LrSchedule s = goyal_resnet50();
  s.decay_epochs = {2};
  check_points(s, {{1.0, 0.72}, {1.99, 1.3338}, {2.0, 0.134}, {3.0, 0.196}, {6.0, 0.32}});
}

TEST_CASE("schedule: a linear decay from the end of the warm-up to zero at the run's end", "[schedule][given]") {
  ch06::LrSchedule s;
  s.base_lr = 0.1;
  s.base_batch = 256;
  s.global_batch = 1024;  // peak 0.4
  s.warmup_epochs = 1;
  s.end_epoch = 5;
  INFO("warm-up 1 epoch, the decay ends at epoch 5; the rate is never below 0");
  check_points(s, {{0.0, 0.1}, {0.5, 0.25}, {1.0, 0.4}, {2.0, 0.3}, {3.0, 0.2}, {4.5, 0.05}, {5.0, 0.0}, {6.0, 0.0}});
  INFO("the decay falls by the same amount every step, from the peak at the warm-up's end");
  double previous = ch06::learning_rate_at(s, 1.0);
  for (int step = 101; step <= 500; ++step) {
    const double lr = ch06::learning_rate_at(s, step / 100.0);
    CAPTURE(step, lr, previous);
    REQUIRE(previous - lr == Approx(0.001).epsilon(1e-9));
    previous = lr;
  }
  s.warmup_epochs = 0;
  INFO("without warm-up, from the peak at epoch 0");
  check_points(s, {{0.0, 0.4}, {1.0, 0.32}, {2.5, 0.2}, {5.0, 0.0}});
}
