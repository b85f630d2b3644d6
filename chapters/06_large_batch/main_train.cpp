// main_train.cpp — ch06_train: FashionCNN trained with a large global batch:
// one configuration, a comparison of several at the same epochs, or the
// steps each batch needs to reach a target accuracy.
//
//   mpirun -n 2 ch06_train [--batch 2048] [--method sgd|warmup|lars|lamb] [--epochs 3]
//                          [--micro-batch 256] [--warmup-epochs E] [--lr BASE] ...
//   mpirun -n 2 ch06_train --compare [--full] [--batches 128,512] [--methods lars,lamb]
//   mpirun -n 2 ch06_train --sweep [--quick] [--batches 64,...,4096] [--methods warmup] [--target 0.85]
//   workbook run ch06 --ranks 2 [--solution] --sweep
//
// Methods (every one decays the rate linearly to 0 at the run's last step, or
// with --decay step ×0.1 at 1/2 and 3/4 of the epochs):
//   sgd     momentum SGD, the linear scaling rule, no warm-up
//   warmup  momentum SGD, the linear scaling rule, gradual warm-up
//   lars    LARS, the linear scaling rule, gradual warm-up
//   lamb    LAMB, the square-root scaling rule, gradual warm-up
// Each rank trains on its share of the global batch, in micro-batches of at
// most --micro-batch samples accumulated into one step (ex6.4): one all-reduce
// per step whatever the batch. Every configuration starts from the same
// weights and sees the same samples in the same order; only the batch size
// and the method differ. After each epoch: the whole test set.
//
// --compare sets configurations side by side at the same number of epochs:
// final test accuracy, the training time to reach --target test accuracy
// (evaluations not counted), and samples/s. --sweep measures steps to a
// target per batch, the rate tuned (steps_to_target.hpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <numeric>
#include <optional>

#include "accumulation.hpp"
#include "ddp.hpp"  // Chapter 3's reference: broadcast_model, DistributedSampler, gather_batch, evaluate_distributed
#include "methods.hpp"
#include "optimizers.hpp"
#include "run_config.hpp"
#include "schedule.hpp"
#include "steps_to_target.hpp"
#include "workbook/errors.hpp"
#include "workbook/memory.hpp"
#include "noise_scale.hpp"
#include "workbook/program.hpp"
#include "workbook/seeds.hpp"
#include "workbook/timing.hpp"

namespace {

using ch06::check_batch_splits;
using ch06::Config;
using ch06::find_method;
using ch06::kBaseBatch;
using ch06::kEvalBatch;
using ch06::kMethods;
using ch06::make_optimizer;
using ch06::Method;
using ch06::Outcome;
using ch06::run_sweep;
using ch06::schedule_for;
using ch06::Setup;
using ch06::train_config;

int train(workbook::Program& program) {
  Setup setup;
  workbook::TrainFlags& flags = program.flags();
  flags.batch = 2048;
  flags.epochs = 3;
  CLI::App& app = program.cli();
  std::string method_name = "lars";
  app.add_option("--method", method_name, "sgd (scaled, no warm-up), warmup, lars or lamb")
      ->check(CLI::IsMember({"sgd", "warmup", "lars", "lamb"}))
      ->capture_default_str();
  app.add_option("--micro-batch", setup.micro_batch, "samples per forward pass on a rank; more are accumulated")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup-epochs", setup.warmup_epochs, "warm-up length (default: epochs / 4, at most 5)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--decay", setup.decay, "linear (to 0 at the run's end) or step (x0.1 at 1/2 and 3/4 of the epochs)")
      ->check(CLI::IsMember({"linear", "step"}))
      ->capture_default_str();
  app.add_option("--target", setup.target, "the test accuracy whose time-to-reach is reported")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  std::optional<double> trust_coefficient;
  app.add_option("--trust-coefficient", trust_coefficient, "LARS's η: each layer moves by lr · η of its norm")
      ->check(CLI::PositiveNumber);
  app.add_flag("--momentum-correction", setup.momentum_correction,
               "LARS: scale its velocity by lr_new / lr_old when the rate changes (Goyal et al. 2017, §2.2)");
  app.add_flag("--noise-scale", setup.noise_scale,
               "estimate the gradient noise scale B_simple every epoch (McCandlish et al. 2018); 2 or more ranks");
  bool sweep = false, compare = false, full = false, quick = false;
  std::vector<int64_t> sweep_batches;
  std::vector<std::string> sweep_methods;
  ch06::SweepSetup sweep_setup;
  app.add_flag("--sweep", sweep, "steps to --target test accuracy (default 0.85) at each global batch, its rate tuned (64..4096)");
  app.add_flag("--quick", quick, "with --sweep: the reduced sweep (batches 64..4096 x4, LAMB, 2 rates each)");
  app.add_option("--max-epochs", sweep_setup.max_epochs, "with --sweep: a run's budget in epochs")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--compare", compare, "every global batch x every method at the same epochs (the reduced grid unless --full)");
  app.add_flag("--full", full, "with --compare: batches 128..8192 on all 60,000 samples for 30 epochs (hours on a CPU)");
  app.add_option("--batches", sweep_batches, "with --sweep or --compare: these global batches only, e.g. 128,2048")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app.add_option("--methods", sweep_methods, "with --sweep or --compare: these methods only, e.g. warmup,lars")
      ->delimiter(',')
      ->check(CLI::IsMember({"sgd", "warmup", "lars", "lamb"}));
  program.parse();
  if (app.get_option("--lr")->count() > 0) setup.base_lr = flags.lr;  // else: each method's own
  if (trust_coefficient)
    for (Method& m : kMethods) m.trust_coefficient = *trust_coefficient;
  auto given = [&](const char* flag) { return app.get_option(flag)->count() > 0; };
  WB_CHECK(!(sweep && compare), "--sweep and --compare are two different measurements: choose one");
  WB_CHECK(compare || !full, "--full goes with --compare");
  WB_CHECK(sweep || (!quick && !given("--max-epochs")), "--quick and --max-epochs go with --sweep");
  WB_CHECK(sweep || compare || (!given("--batches") && !given("--methods")),
           "--batches and --methods go with --sweep or --compare");
  WB_CHECK(!(sweep || compare) || (!given("--batch") && !given("--method")),
           "--sweep and --compare set the batch and the method of each run: use --batches and --methods to choose them");
  if (sweep) {
    WB_CHECK(!given("--epochs") && !given("--lr") && !given("--decay") && !given("--warmup-epochs"),
             "--sweep trains each run at a constant rate it tunes, until --target or --max-epochs: --epochs, --lr, "
             "--decay and --warmup-epochs do not apply");
    sweep_setup.batches = quick ? std::vector<int64_t>{64, 256, 1024, 4096}
                                : std::vector<int64_t>{64, 128, 256, 512, 1024, 2048, 4096};
    if (!sweep_batches.empty()) sweep_setup.batches = sweep_batches;
    // Without warm-up (Note [steps to target]), "warmup" trains as "sgd".
    const std::vector<std::string> methods = sweep_methods.empty()
                                                 ? (quick ? std::vector<std::string>{"lamb"} : std::vector<std::string>{"sgd", "lamb"})
                                                 : sweep_methods;
    for (const std::string& name : methods) sweep_setup.methods.push_back(find_method(name));
    sweep_setup.target = setup.target;
    if (quick) sweep_setup.max_trials = 2;
    sweep_setup.micro_batch = setup.micro_batch;
    sweep_setup.seed = flags.seed;
    if (!given("--test-samples")) flags.test_samples = 2000;  // Note [steps to target]: evaluated often
    return run_sweep(program, sweep_setup);
  }

  // The grid. Note: [reduced grid] On a CPU a sample costs the same at every
  // batch, so the full grid (16 runs of 30 epochs over 60,000 samples) takes
  // hours on 2 cores. The reduced grid drops the largest batch and trains on
  // a fifth of the data for 5 epochs: its largest batch, 2048, still gets
  // only 5 steps per epoch (8192 gets 7 in the full grid). Batches below 128
  // are no cheaper: at 16 samples per rank the all-reduce takes most of a step.
  std::vector<Config> configs;
  if (compare) {
    std::vector<int64_t> batches = full ? std::vector<int64_t>{128, 512, 2048, 8192} : std::vector<int64_t>{128, 512, 2048};
    if (app.get_option("--epochs")->count() == 0) flags.epochs = full ? 30 : 5;
    if (app.get_option("--train-samples")->count() == 0) flags.train_samples = full ? -1 : 12000;
    if (!sweep_batches.empty()) batches = sweep_batches;
    std::vector<Method> methods = kMethods;
    if (!sweep_methods.empty()) {
      methods.clear();
      for (const std::string& name : sweep_methods) methods.push_back(find_method(name));
    }
    for (const int64_t b : batches)
      for (const Method& m : methods) configs.push_back({b, m});
  } else {
    configs.push_back({flags.batch, find_method(method_name)});
  }
  const int ranks = program.ranks();
  setup.flags = flags;
  WB_CHECK(!setup.momentum_correction || compare || method_name == "lars",
           "--momentum-correction is for --method lars: SGD applies its rate outside the velocity, where the "
           "correction is built in, and LAMB keeps no velocity");
  WB_CHECK(!setup.noise_scale || ranks >= 2,
           "--noise-scale compares each rank's gradient with the average over ranks: run 2 or more ranks");
  WB_CHECK(!configs.empty(), "nothing to train: --batches and --methods name no configuration");
  for (const Config& c : configs) {
    check_batch_splits(c.global_batch, ranks, setup.micro_batch);
    ch06::peak_learning_rate(schedule_for(c, setup));  // checks the schedule (a warm-up past the decay's end)
  }

  workbook::Communicator& comm = program.connect();
  const torch::Device device = comm.device();
  const workbook::FashionMnist data = program.load_data();
  for (const Config& c : configs)
    WB_CHECK(c.global_batch <= data.train.size(), "global batch {} is more than the {} training samples",
             c.global_batch, data.train.size());

  workbook::JsonLines& json = program.json();
  const bool leader = program.leader();
  program.say("ch06_train: FashionCNN, {} rank(s) ({}), {} configuration(s), {} epoch(s), {} train / {} test "
              "samples, micro-batches of at most {} per rank, device {}, {} thread(s) per rank",
              ranks, program.env().launcher, configs.size(), flags.epochs, data.train.size(), data.test.size(),
              setup.micro_batch, device.str(), flags.threads);
  workbook::Table table({{"batch", 6}, {"method", 7}, {"epoch", 5}, {"lr", 9}, {"train_loss", 10},
                         {"test_acc", 8}, {"train_s", 8}});
  if (leader) fmt::print("{}\n", table.header());

  std::vector<Outcome> outcomes;
  for (const Config& c : configs) {
    outcomes.push_back(train_config(c, setup, data, comm, table, json));
    const Outcome& o = outcomes.back();
    nlohmann::json row = {{"type", "row"}, {"global_batch", c.global_batch}, {"method", c.method.name},
                          {"ranks", ranks}, {"epochs", flags.epochs}, {"steps", o.steps},
                          {"test_acc", o.test_accuracy}, {"train_s", o.train_seconds},
                          {"samples_per_s", static_cast<double>(o.samples) / o.train_seconds},
                          {"peak_lr", ch06::peak_learning_rate(schedule_for(c, setup))},
                          {"diverged", o.diverged}};
    row["time_to_target_s"] = o.seconds_to_target ? nlohmann::json(*o.seconds_to_target) : nlohmann::json(nullptr);
    row["epochs_to_target"] = o.epochs_to_target ? nlohmann::json(*o.epochs_to_target) : nlohmann::json(nullptr);
    json.write(row);
  }

  // The summary: one line per configuration, against the smallest batch's best.
  const int64_t smallest = std::min_element(configs.begin(), configs.end(), [](const Config& a, const Config& b) {
                             return a.global_batch < b.global_batch;
                           })->global_batch;
  double reference = 0.0;
  for (size_t i = 0; i < configs.size(); ++i)
    if (configs[i].global_batch == smallest) reference = std::max(reference, outcomes[i].test_accuracy);
  if (leader) {
    fmt::print("\nsummary: {} epoch(s) each; Δ: test accuracy against the best at global batch {} ({:.4f}); "
               "to {:.2f}: training time (and epoch) at the first evaluation reaching it\n",
               flags.epochs, smallest, reference, setup.target);
    workbook::Table summary({{"batch", 6}, {"method", 7}, {"steps", 6}, {"peak_lr", 9}, {"test_acc", 8},
                             {"Δ", 7}, {"to_target", 14}, {"samples/s", 9}});
    fmt::print("{}\n", summary.header());
    for (size_t i = 0; i < configs.size(); ++i) {
      const Config& c = configs[i];
      const Outcome& o = outcomes[i];
      const double peak = ch06::peak_learning_rate(schedule_for(c, setup));
      const std::string to_target = o.seconds_to_target
                                        ? fmt::format("{:.1f} s (ep {})", *o.seconds_to_target, *o.epochs_to_target)
                                        : (o.diverged ? "diverged" : "not reached");
      fmt::print("{}\n", summary.row({fmt::format("{}", c.global_batch), c.method.name, fmt::format("{}", o.steps),
                                      fmt::format("{:.4g}", peak), fmt::format("{:.4f}", o.test_accuracy),
                                      fmt::format("{:+.4f}", o.test_accuracy - reference), to_target,
                                      fmt::format("{:.0f}", static_cast<double>(o.samples) / o.train_seconds)}));
    }
  }

  // The result line: the last configuration (the only one without --compare).
  const Config& last = configs.back();
  const Outcome& o = outcomes.back();
  double samples = 0.0, seconds = 0.0;
  for (const Outcome& each : outcomes) {
    samples += static_cast<double>(each.samples);
    seconds += each.train_seconds;
  }
  workbook::RunResult result;
  result.config = compare ? fmt::format("comparison of {} configurations", configs.size())
                        : fmt::format("{}, global batch {}", last.method.name, last.global_batch);
  result.epochs = flags.epochs;
  result.epochs_trained = o.epochs_done;  // fewer than epochs when it diverged
  result.batch = last.global_batch;
  result.train_samples = data.train.size();
  result.test_accuracy = o.test_accuracy;
  result.test_loss = o.test_loss;
  result.samples_per_s = samples / seconds;  // over every configuration
  result.epoch_s = o.train_seconds / static_cast<double>(std::max<int64_t>(o.epochs_done, 1));
  result.peak_mem_bytes = workbook::largest_peak_memory_bytes(comm);
  result.details = {{"method", last.method.name}, {"diverged", o.diverged}};
  result.summary = fmt::format("result: {} at global batch {}: test accuracy {:.4f} after {} epoch(s), {:.1f} "
                               "samples/s over {} rank(s)",
                               last.method.name, last.global_batch, o.test_accuracy, o.epochs_done, samples / seconds,
                               ranks);
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(
      argc, argv, {"ch06_train", "Chapter 6: FashionCNN with a large global batch: scaling, warm-up, LARS, LAMB"},
      train);
}
