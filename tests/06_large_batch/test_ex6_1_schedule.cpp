// Tests for ex6.1: the learning rate at chosen points of a schedule, worked
// out by hand from the rule (linear scaling, warm-up, step or linear decay).
#include "catch2_compat.hpp"

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

}  // namespace

TEST_CASE("ex6.1 the linear scaling rule with gradual warm-up and step decay", "[ex6.1]") {
  const ch06::LrSchedule s = goyal_resnet50();
  INFO("peak = 0.1 * 8192 / 256 = 3.2; warm-up from 0.1, by (3.2 - 0.1) / 5 per epoch");
  CHECK(ch06::learning_rate_at(s, 0.0) == Approx(0.1).epsilon(1e-12));
  CHECK(ch06::learning_rate_at(s, 1.0) == Approx(0.1 + 3.1 / 5).epsilon(1e-12));
  CHECK(ch06::learning_rate_at(s, 2.5) == Approx(0.1 + 3.1 / 2).epsilon(1e-12));
  INFO("within an epoch the rate grows step by step, not once per epoch: epoch 0.25 is step 25 of 100");
  CHECK(ch06::learning_rate_at(s, 0.25) == Approx(0.1 + 3.1 * 0.05).epsilon(1e-12));
  INFO("after warm-up: the peak, until the first milestone");
  CHECK(ch06::learning_rate_at(s, 5.0) == Approx(3.2).epsilon(1e-12));
  CHECK(ch06::learning_rate_at(s, 29.99) == Approx(3.2).epsilon(1e-12));
  INFO("x0.1 at each milestone reached (the milestone epoch itself included)");
  CHECK(ch06::learning_rate_at(s, 30.0) == Approx(0.32).epsilon(1e-12));
  CHECK(ch06::learning_rate_at(s, 60.5) == Approx(0.032).epsilon(1e-12));
  CHECK(ch06::learning_rate_at(s, 89.9) == Approx(0.0032).epsilon(1e-12));
}

TEST_CASE("ex6.1 without warm-up the schedule starts at the peak", "[ex6.1]") {
  ch06::LrSchedule s = goyal_resnet50();
  s.warmup_epochs = 0;
  CHECK(ch06::learning_rate_at(s, 0.0) == Approx(3.2).epsilon(1e-12));
  CHECK(ch06::learning_rate_at(s, 31.0) == Approx(0.32).epsilon(1e-12));
}

TEST_CASE("ex6.1 a batch at or below the reference batch has nothing to warm up to", "[ex6.1]") {
  ch06::LrSchedule s = goyal_resnet50();
  s.global_batch = 128;  // peak 0.05, below the single-device 0.1: the warm-up starts at the peak
  CHECK(ch06::learning_rate_at(s, 0.0) == Approx(0.05).epsilon(1e-12));
  CHECK(ch06::learning_rate_at(s, 2.0) == Approx(0.05).epsilon(1e-12));
  CHECK(ch06::learning_rate_at(s, 45.0) == Approx(0.005).epsilon(1e-12));
}

TEST_CASE("ex6.1 the square-root rule and a different decay factor", "[ex6.1]") {
  ch06::LrSchedule s;
  s.base_lr = 0.002;
  s.base_batch = 256;
  s.global_batch = 4096;  // k = 16: the square-root rule gives 4x
  s.scaling_power = 0.5;
  s.warmup_epochs = 2;
  s.decay_epochs = {6};
  s.decay_factor = 0.5;
  CHECK(ch06::peak_learning_rate(s) == Approx(0.008).epsilon(1e-12));
  CHECK(ch06::learning_rate_at(s, 0.0) == Approx(0.002).epsilon(1e-12));
  CHECK(ch06::learning_rate_at(s, 1.5) == Approx(0.002 + 0.006 * 0.75).epsilon(1e-12));
  CHECK(ch06::learning_rate_at(s, 3.0) == Approx(0.008).epsilon(1e-12));
  CHECK(ch06::learning_rate_at(s, 7.0) == Approx(0.004).epsilon(1e-12));
}

TEST_CASE("ex6.1 a milestone inside the warm-up applies to the warm-up line too", "[ex6.1]") {
  ch06::LrSchedule s = goyal_resnet50();
  s.decay_epochs = {2};
  CHECK(ch06::learning_rate_at(s, 1.0) == Approx(0.1 + 3.1 / 5).epsilon(1e-12));
  CHECK(ch06::learning_rate_at(s, 3.0) == Approx(0.1 * (0.1 + 3.1 * 3 / 5)).epsilon(1e-12));
  CHECK(ch06::learning_rate_at(s, 6.0) == Approx(0.32).epsilon(1e-12));
}

TEST_CASE("ex6.1 a linear decay from the end of the warm-up to zero at the run's end", "[ex6.1]") {
  ch06::LrSchedule s;
  s.base_lr = 0.1;
  s.base_batch = 256;
  s.global_batch = 1024;  // peak 0.4
  s.warmup_epochs = 1;
  s.end_epoch = 5;
  CHECK(ch06::learning_rate_at(s, 0.0) == Approx(0.1).epsilon(1e-12));
  CHECK(ch06::learning_rate_at(s, 0.5) == Approx(0.25).epsilon(1e-12));
  INFO("the decay starts at the peak where the warm-up ends, and spans the 4 epochs left, not all 5");
  CHECK(ch06::learning_rate_at(s, 1.0) == Approx(0.4).epsilon(1e-12));
  CHECK(ch06::learning_rate_at(s, 2.0) == Approx(0.4 * 3 / 4).epsilon(1e-12));
  CHECK(ch06::learning_rate_at(s, 4.5) == Approx(0.4 * 0.5 / 4).epsilon(1e-12));
  INFO("0 at the end, and never below it");
  CHECK(ch06::learning_rate_at(s, 5.0) == Approx(0.0).margin(1e-15));
  CHECK(ch06::learning_rate_at(s, 6.0) == Approx(0.0).margin(1e-15));
  INFO("without warm-up the line starts at the peak at epoch 0");
  s.warmup_epochs = 0;
  CHECK(ch06::learning_rate_at(s, 0.0) == Approx(0.4).epsilon(1e-12));
  CHECK(ch06::learning_rate_at(s, 1.0) == Approx(0.32).epsilon(1e-12));
}
