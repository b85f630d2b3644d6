// Tests for ex1.4: train_epoch against the same steps done by hand, and its clock.
#include "catch2_compat.hpp"

#include <chrono>
#include <thread>

#include "host_reads.hpp"
#include "oracles.hpp"
#include "single_device.hpp"
#include "workbook/timing.hpp"

namespace {

// Wraps a model so that its first `slow_calls` forward passes sleep: a stand-in
// for the slow first steps (allocations, kernel selection) that warm-up skips.
class SlowStart : public workbook::Classifier {
 public:
  SlowStart(std::shared_ptr<workbook::Classifier> inner, int slow_calls, double sleep_s)
      : inner_(register_module("inner", std::move(inner))), slow_calls_(slow_calls), sleep_s_(sleep_s) {}
  torch::Tensor forward(torch::Tensor images) override {
    if (calls_++ < slow_calls_) std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s_));
    return inner_->forward(images);
  }
  std::shared_ptr<workbook::Classifier> fresh() const override {
    return std::make_shared<SlowStart>(inner_->fresh(), slow_calls_, sleep_s_);
  }

 private:
  std::shared_ptr<workbook::Classifier> inner_;
  int slow_calls_, calls_ = 0;
  double sleep_s_;
};

}  // namespace

TEST_CASE("ex1.4 train_epoch equals the same SGD steps done by hand", "[ex1.4]") {
  torch::manual_seed(4);
  const int64_t n = 47, batch_size = 10;  // 5 steps, the last of 7 samples
  torch::Tensor images = torch::rand({n, 1, 28, 28});
  torch::Tensor labels = torch::randint(0, 10, {n}, torch::kInt64);
  torch::Tensor order = torch::randperm(n, torch::kInt64);
  auto model = std::make_shared<workbook::TinyNet>(8, 0.0);
  model->eval();  // train_epoch must switch to train mode itself
  auto reference = oracle::copy_of(*model);
  reference->train();
  const double lr = 0.05;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(lr));

  double loss_sum = 0.0;
  for (int64_t begin = 0; begin < n; begin += batch_size) {
    torch::Tensor rows = order.slice(0, begin, std::min(begin + batch_size, n));
    loss_sum += oracle::sgd_step(*reference, images.index_select(0, rows), labels.index_select(0, rows), lr) *
                static_cast<double>(rows.size(0));
  }

  std::vector<int64_t> progress;
  ch01::EpochStats stats = ch01::train_epoch(*model, optimizer, images, labels, order, batch_size, torch::kCPU,
                                             /*warmup_steps=*/2, [&](int64_t done, int64_t total) {
                                               REQUIRE(total == 5);
                                               progress.push_back(done);
                                             });
  INFO("the epoch visits every sample once, in `order`, in train mode");
  REQUIRE(stats.samples == n);
  REQUIRE(oracle::max_parameter_difference(*model, *reference) < 1e-5);
  REQUIRE(model->is_training());
  INFO("mean_loss must be the mean over the epoch's 47 samples of each sample's loss (the last batch holds 7)");
  REQUIRE(stats.mean_loss == Approx(loss_sum / n).epsilon(1e-6));
  INFO("timed_samples counts the samples of the steps after the 2 warm-up steps");
  REQUIRE(stats.timed_samples == n - 2 * batch_size);
  REQUIRE(stats.timed_seconds > 0.0);
  INFO("on_step(done, total) is called after every step");
  REQUIRE(progress == std::vector<int64_t>{1, 2, 3, 4, 5});
}

TEST_CASE("ex1.4 warm-up steps are run but not timed", "[ex1.4]") {
  torch::manual_seed(5);
  const int64_t n = 60, batch_size = 10;  // 6 steps
  torch::Tensor images = torch::rand({n, 1, 28, 28});
  torch::Tensor labels = torch::randint(0, 10, {n}, torch::kInt64);
  torch::Tensor order = torch::arange(n, torch::kInt64);
  const double sleep_s = 0.25;

  auto slow = std::make_shared<SlowStart>(std::make_shared<workbook::TinyNet>(8, 0.0), 2, sleep_s);
  torch::optim::SGD optimizer(slow->parameters(), torch::optim::SGDOptions(0.01));
  workbook::Stopwatch outer;
  outer.start();
  ch01::EpochStats stats = ch01::train_epoch(*slow, optimizer, images, labels, order, batch_size, torch::kCPU, 2);
  const double total = outer.stop();
  INFO("the two slow first steps are warm-up: the clock starts after them (timed "
       << stats.timed_seconds << " s of " << total << " s in all)");
  REQUIRE(stats.timed_seconds > 0.0);
  REQUIRE(stats.timed_seconds < total - 1.5 * sleep_s);
  REQUIRE(stats.timed_samples == 40);
  REQUIRE(stats.samples_per_s() == Approx(40.0 / stats.timed_seconds));

  auto slow_again = std::make_shared<SlowStart>(std::make_shared<workbook::TinyNet>(8, 0.0), 2, sleep_s);
  torch::optim::SGD optimizer_again(slow_again->parameters(), torch::optim::SGDOptions(0.01));
  ch01::EpochStats untimed_warmup =
      ch01::train_epoch(*slow_again, optimizer_again, images, labels, order, batch_size, torch::kCPU, 0);
  INFO("without warm-up the slow steps are inside the timed interval");
  REQUIRE(untimed_warmup.timed_seconds >= 2 * sleep_s);
  REQUIRE(untimed_warmup.timed_samples == n);
}

TEST_CASE("ex1.4 train_epoch reads no value on the host per step", "[ex1.4]") {
  // Note: [why count host reads] in host_reads.hpp. The same epoch at 3 and at
  // 9 steps: the reads must not grow with the steps (one, for mean_loss, is fine).
  torch::manual_seed(7);
  auto reads_in_epoch_of = [](int64_t steps) {
    const int64_t batch_size = 4, n = steps * batch_size;
    torch::Tensor images = torch::rand({n, 1, 28, 28});
    torch::Tensor labels = torch::randint(0, 10, {n}, torch::kInt64);
    auto model = std::make_shared<workbook::TinyNet>(8, 0.0);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01));
    host_reads::Counter counter;
    ch01::train_epoch(*model, optimizer, images, labels, torch::arange(n, torch::kInt64), batch_size, torch::kCPU, 1);
    return counter.reads();
  };
  const int64_t reads_3 = reads_in_epoch_of(3), reads_9 = reads_in_epoch_of(9);
  INFO("train_epoch read a value on the host " << reads_3 << " times in 3 steps and " << reads_9
       << " times in 9: the reads must not grow with the steps, since on a GPU each one makes the host wait "
          "for the device");
  REQUIRE(reads_9 == reads_3);
}

TEST_CASE("ex1.4 an epoch with no step after the warm-up times nothing", "[ex1.4]") {
  // The header's edge case: warm-up as long as the epoch (or longer) leaves
  // nothing to time, so timed_samples and timed_seconds stay 0, and
  // samples_per_s() is 0 rather than a number from a clock never started.
  torch::manual_seed(8);
  const int64_t n = 20, batch_size = 10;  // 2 steps
  torch::Tensor images = torch::rand({n, 1, 28, 28});
  torch::Tensor labels = torch::randint(0, 10, {n}, torch::kInt64);
  for (int64_t warmup : {int64_t{2}, int64_t{5}}) {
    CAPTURE(warmup);
    auto model = std::make_shared<workbook::TinyNet>(8, 0.0);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01));
    ch01::EpochStats stats =
        ch01::train_epoch(*model, optimizer, images, labels, torch::arange(n, torch::kInt64), batch_size, torch::kCPU,
                          warmup);
    INFO("every step is warm-up: all " << n << " samples are trained, none is timed, and timed_seconds stays 0 (got "
                                        << stats.timed_seconds << ")");
    REQUIRE(stats.samples == n);
    REQUIRE(stats.timed_samples == 0);
    REQUIRE(stats.timed_seconds == 0.0);
  }
}
