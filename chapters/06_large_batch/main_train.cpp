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
#include "schedule.hpp"
#include "steps_to_target.hpp"
#include "workbook/errors.hpp"
#include "workbook/memory.hpp"
#include "workbook/noise_scale.hpp"
#include "workbook/program.hpp"
#include "workbook/seeds.hpp"
#include "workbook/timing.hpp"

namespace {

using ch06::find_method;
using ch06::kBaseBatch;
using ch06::kMethods;
using ch06::make_optimizer;
using ch06::Method;

constexpr int64_t kEvalBatch = 1000;
// One configuration of --compare (or the single run).
struct Config {
  int64_t global_batch;
  Method method;
};

struct Outcome {
  double test_accuracy = 0.0;
  double test_loss = 0.0;
  double train_seconds = 0.0;                 // training steps only, every rank in step
  std::optional<double> seconds_to_target;    // training time when an evaluation first reached --target
  std::optional<int64_t> epochs_to_target;
  int64_t steps = 0;
  int64_t samples = 0;
  bool diverged = false;
  int64_t epochs_done = 0;
};

struct Setup {
  workbook::TrainFlags flags;
  int64_t micro_batch = 256;
  std::optional<double> warmup_epochs;  // default: a quarter of the epochs, at most 5
  std::optional<double> base_lr;        // default: the method's
  double target = 0.85;
  bool momentum_correction = false;  // LARS only (Note: [momentum correction] in lars.cpp)
  bool noise_scale = false;          // estimate B_simple every epoch (workbook/noise_scale.hpp)
  std::string decay = "linear";      // "linear": to 0 at the run's end; "step": x0.1 at 1/2 and 3/4
};

// The method's schedule at this configuration's batch.
ch06::LrSchedule schedule_for(const Config& config, const Setup& setup) {
  ch06::LrSchedule schedule;
  schedule.base_lr = setup.base_lr.value_or(config.method.base_lr);
  schedule.base_batch = kBaseBatch;
  schedule.global_batch = config.global_batch;
  schedule.scaling_power = config.method.scaling_power;
  const double epochs = setup.flags.epochs;
  schedule.warmup_epochs = config.method.warmup ? setup.warmup_epochs.value_or(std::min(5.0, epochs / 4.0)) : 0.0;
  if (setup.decay == "step")
    schedule.decay_epochs = {epochs * 0.5, epochs * 0.75};
  else
    schedule.end_epoch = epochs;
  return schedule;
}

Outcome train_config(const Config& config, const Setup& setup, const workbook::FashionMnist& data,
                     workbook::Communicator& comm, workbook::Table& table, workbook::JsonLines& json) {
  const workbook::TrainFlags& flags = setup.flags;
  const int ranks = comm.size();
  const torch::Device device = comm.device();
  const bool leader = comm.rank() == 0;
  const int64_t local_batch = config.global_batch / ranks;
  const int64_t micro_batch = std::min(setup.micro_batch, local_batch);  // checked before any training

  // The same initial weights for every configuration: the seed's, on rank 0.
  torch::manual_seed(workbook::initial_weights_seed(flags.seed, comm.rank()));
  auto model = std::make_shared<workbook::FashionCNN>();
  model->to(device);
  ch03::broadcast_model(*model, comm, 0);
  std::unique_ptr<torch::optim::Optimizer> optimizer =
      make_optimizer(config.method, *model, setup.momentum_correction);

  ch03::DistributedSampler sampler(data.train.size(), ranks, comm.rank(), /*shuffle=*/true, flags.seed);
  const int64_t steps_per_epoch = sampler.num_samples() / local_batch;  // whole batches only
  WB_CHECK(steps_per_epoch >= 1, "global batch {} is more than the {} training samples", config.global_batch,
           data.train.size());
  const ch06::LrSchedule schedule = schedule_for(config, setup);
  const std::string variant = fmt::format("{}@{}", config.method.name, config.global_batch);

  // --noise-scale: the same steps, a micro-batch per GradientAggregator::add,
  // whose observer sees each rank's own gradient before the all-reduce.
  std::optional<ch06::GradientAggregator> aggregator;
  std::optional<workbook::NoiseScale> noise;
  torch::Tensor local_squared;  // |this rank's gradient|², the last round's
  if (setup.noise_scale) {
    aggregator.emplace(*model, *optimizer, comm, local_batch / micro_batch);
    aggregator->observe_local_gradients([&](workbook::Classifier& m) { local_squared = workbook::squared_gradient_norm(m); });
    noise.emplace(local_batch, config.global_batch);
  }

  Outcome outcome;
  for (int64_t epoch = 1; epoch <= flags.epochs && !outcome.diverged; ++epoch) {
    sampler.set_epoch(epoch);
    const torch::Tensor indices = sampler.indices();
    double loss_sum = 0.0;
    double lr = 0.0;
    for (int64_t step = 0; step < steps_per_epoch; ++step) {
      lr = ch06::learning_rate_at(schedule, static_cast<double>(epoch - 1) +
                                                static_cast<double>(step) / static_cast<double>(steps_per_epoch));
      ch06::set_learning_rate(*optimizer, lr);
      const ch03::Batch batch =
          ch03::gather_batch(data.train.images, data.train.labels, indices, step * local_batch, local_batch);
      workbook::Stopwatch clock(device);
      clock.start();
      torch::Tensor loss;
      if (aggregator) {
        for (const ch03::Batch& micro : ch06::split_batch(batch, micro_batch)) aggregator->add(micro);
        loss = aggregator->last_loss();
      } else {
        loss = ch06::accumulated_train_step(*model, *optimizer, ch06::split_batch(batch, micro_batch), comm);
      }
      outcome.train_seconds += clock.stop();
      if (noise) noise->add(local_squared, workbook::squared_gradient_norm(*model));  // .grad: the averaged gradient
      loss_sum += loss.item<double>();
      ++outcome.steps;
      outcome.samples += config.global_batch;
    }
    torch::Tensor loss_sums =
        torch::tensor({loss_sum, static_cast<double>(steps_per_epoch)}, torch::kFloat64).to(device);
    comm.all_reduce(loss_sums, workbook::ReduceOp::Sum);  // every rank's batches: the same verdict everywhere
    const double train_loss = loss_sums[0].item<double>() / loss_sums[1].item<double>();
    // A rate too high for the model sends the loss to infinity, after which
    // nothing recovers: the configuration stops there, and says so.
    outcome.diverged = !std::isfinite(train_loss);
    const ch03::EvalResult eval =
        ch03::evaluate_distributed(*model, data.test.images, data.test.labels, kEvalBatch, comm);
    outcome.test_accuracy = eval.accuracy();
    outcome.test_loss = eval.mean_loss;
    outcome.epochs_done = epoch;
    if (!outcome.seconds_to_target && eval.accuracy() >= setup.target) {
      outcome.seconds_to_target = outcome.train_seconds;
      outcome.epochs_to_target = epoch;
    }
    if (leader)
      fmt::print("{}\n", table.row({fmt::format("{}", config.global_batch), config.method.name,
                                    fmt::format("{}", epoch), fmt::format("{:.4g}", lr),
                                    outcome.diverged ? "diverged" : fmt::format("{:.4g}", train_loss),
                                    fmt::format("{:.4f}", eval.accuracy()), fmt::format("{:.1f}", outcome.train_seconds)}));
    nlohmann::json record = {{"type", "epoch"}, {"chapter", "ch06"}, {"variant", variant},
                             {"global_batch", config.global_batch}, {"method", config.method.name}, {"epoch", epoch},
                             {"lr", lr}, {"train_loss", outcome.diverged ? nlohmann::json(nullptr) : nlohmann::json(train_loss)},
                             {"test_accuracy", eval.accuracy()}, {"train_s", outcome.train_seconds}};
    if (noise) {
      const workbook::NoiseScaleEstimate e = noise->estimate(comm);
      const bool resolved = e.resolved();
      if (leader)
        fmt::print("  noise scale over the epoch's {} steps: B_simple = {} (|G|² {:.4g}, tr Σ {:.4g}; {} per rank "
                   "against {} in all)\n",
                   e.steps, resolved ? fmt::format("{:.0f} samples", e.b_simple) : "not resolved",
                   e.gradient_squared, e.trace_sigma, local_batch, config.global_batch);
      record["noise_scale"] = {{"b_simple", resolved ? nlohmann::json(e.b_simple) : nlohmann::json(nullptr)},
                               {"gradient_squared", e.gradient_squared}, {"trace_sigma", e.trace_sigma},
                               {"steps", e.steps}};
    }
    if (leader) std::fflush(stdout);  // a row per epoch also when the log is a file or a pipe
    json.write(record);
  }
  return outcome;
}

// Every global batch is checked before the first run trains: a sweep must
// not fail hours in.
void check_batch_splits(int64_t global_batch, int ranks, int64_t micro_batch) {
  WB_CHECK(global_batch % ranks == 0, "global batch {} must divide evenly among the {} ranks", global_batch, ranks);
  const int64_t local_batch = global_batch / ranks;
  WB_CHECK(local_batch % std::min(micro_batch, local_batch) == 0,
           "global batch {} must split into {} ranks x micro-batches of {} (--micro-batch): use a multiple of {}",
           global_batch, ranks, micro_batch, ranks * micro_batch);
}

// --sweep: steps to the target at every batch, each batch's rate tuned
// (steps_to_target.hpp), then the model S = S_min · (1 + B_crit / B) fitted
// to them beside the noise scale B_simple measured from the gradients.
int run_sweep(workbook::Program& program, const ch06::SweepSetup& sweep) {
  const int ranks = program.ranks();
  for (const int64_t b : sweep.batches) check_batch_splits(b, ranks, sweep.micro_batch);
  workbook::Communicator& comm = program.connect();
  const workbook::FashionMnist data = program.load_data();
  for (const int64_t b : sweep.batches)
    WB_CHECK(b <= data.train.size(), "global batch {} is more than the {} training samples", b, data.train.size());
  workbook::JsonLines& json = program.json();
  const bool leader = program.leader();
  std::vector<std::string> method_names;
  for (const Method& m : sweep.methods) method_names.push_back(m.name);
  program.say("ch06_train --sweep: steps to test accuracy {:.2f} (first {} test samples) at global batches {}, "
              "methods {}; up to {} rates each, at most {} epochs of {} samples per run; {} rank(s), {} thread(s) each",
              sweep.target, data.test.size(), fmt::join(sweep.batches, ", "),
              fmt::join(method_names, ", "), sweep.max_trials,
              sweep.max_epochs, data.train.size(), ranks, program.flags().threads);
  // steps: to the target when it was reached, else those taken before the run stopped.
  workbook::Table trials({{"batch", 6}, {"method", 7}, {"lr", 9}, {"steps", 6}, {"stopped", 9}, {"test_acc", 8},
                          {"train_s", 8}, {"B_simple", 8}});
  if (leader) fmt::print("{}\n", trials.header());
  auto report = [&](const ch06::RateTrial& t) {
    const std::string b_simple = t.b_simple ? fmt::format("{:.0f}", *t.b_simple) : "-";
    if (leader) {
      fmt::print("{}\n", trials.row({fmt::format("{}", t.global_batch), t.method, fmt::format("{:.4g}", t.lr),
                                     fmt::format("{}", t.steps_to_target.value_or(t.steps)), t.stopped,
                                     fmt::format("{:.4f}", t.accuracy),
                                     fmt::format("{:.1f}", t.train_seconds), b_simple}));
      std::fflush(stdout);
    }
    json.write({{"type", "sweep_trial"}, {"chapter", "ch06"}, {"global_batch", t.global_batch}, {"method", t.method},
                {"lr", t.lr}, {"steps", t.steps}, {"stopped", t.stopped}, {"test_accuracy", t.accuracy},
                {"steps_to_target", t.steps_to_target ? nlohmann::json(*t.steps_to_target) : nlohmann::json(nullptr)},
                {"train_s", t.train_seconds},
                {"b_simple", t.b_simple ? nlohmann::json(*t.b_simple) : nlohmann::json(nullptr)}});
  };

  std::vector<ch06::RateTrial> best;  // per batch and method
  double seconds = 0.0;
  int64_t samples = 0;
  for (const Method& method : sweep.methods) {
    std::optional<ch06::RateTrial> previous;
    for (const int64_t b : sweep.batches) {
      const std::vector<ch06::RateTrial> runs = ch06::tune_rate(b, method, previous, sweep, data, comm, report);
      for (const ch06::RateTrial& t : runs) {
        seconds += t.train_seconds;
        samples += t.steps * b;
      }
      best.push_back(runs.front());
      previous = runs.front();
    }
  }

  // The summary: a row per batch and method, its best rate's run.
  if (leader) {
    fmt::print("\nsteps to test accuracy {:.2f}: each batch's best rate; x: the steps over the previous batch's "
               "(perfect scaling: the previous batch over this one, 0.50 for a doubling); time: training only, {} "
               "rank(s)\n",
               sweep.target, ranks);
    workbook::Table summary({{"batch", 6}, {"method", 7}, {"best_lr", 9}, {"steps", 6}, {"x", 5}, {"samples", 9},
                             {"time_s", 7}, {"B_simple", 8}});
    fmt::print("{}\n", summary.header());
    for (size_t i = 0; i < best.size(); ++i) {
      const ch06::RateTrial& t = best[i];
      const bool reached = t.steps_to_target.has_value();
      const bool previous = i > 0 && best[i - 1].method == t.method && best[i - 1].steps_to_target && reached;
      fmt::print("{}\n", summary.row({fmt::format("{}", t.global_batch), t.method,
                                      reached ? fmt::format("{:.4g}", t.lr) : "-",
                                      reached ? fmt::format("{}", *t.steps_to_target) : "not reached",
                                      previous ? fmt::format("{:.2f}", static_cast<double>(*t.steps_to_target) /
                                                                            static_cast<double>(*best[i - 1].steps_to_target))
                                               : "",
                                      reached ? fmt::format("{}", *t.steps_to_target * t.global_batch) : "-",
                                      reached ? fmt::format("{:.1f}", t.train_seconds) : "-",
                                      t.b_simple ? fmt::format("{:.0f}", *t.b_simple) : "-"}));
    }
  }
  for (const ch06::RateTrial& t : best)
    json.write({{"type", "steps_to_target"}, {"chapter", "ch06"}, {"global_batch", t.global_batch},
                {"method", t.method}, {"target", sweep.target}, {"ranks", ranks},
                {"lr", t.steps_to_target ? nlohmann::json(t.lr) : nlohmann::json(nullptr)},
                {"steps", t.steps_to_target ? nlohmann::json(*t.steps_to_target) : nlohmann::json(nullptr)},
                {"time_to_target_s", t.steps_to_target ? nlohmann::json(t.train_seconds) : nlohmann::json(nullptr)},
                {"b_simple", t.b_simple ? nlohmann::json(*t.b_simple) : nlohmann::json(nullptr)}});

  // The model beside the noise scale, per method.
  for (const Method& method : sweep.methods) {
    std::vector<std::pair<int64_t, int64_t>> points;
    std::vector<double> b_simple;
    for (const ch06::RateTrial& t : best)
      if (t.method == method.name) {
        if (t.steps_to_target) points.emplace_back(t.global_batch, *t.steps_to_target);
        if (t.b_simple) b_simple.push_back(*t.b_simple);
      }
    std::sort(b_simple.begin(), b_simple.end());
    const std::optional<double> median =
        b_simple.empty() ? std::nullopt : std::optional<double>(b_simple[b_simple.size() / 2]);
    const std::optional<ch06::StepsModel> model = ch06::fit_steps_model(points);
    if (leader)
      fmt::print("{}: S = S_min (1 + B_crit / B) fitted to {} batches: {}; the noise scale B_simple (median over "
                 "the batches' best runs): {}\n",
                 method.name, points.size(),
                 model ? fmt::format("S_min = {:.0f} steps, B_crit = {:.0f} samples", model->s_min, model->b_crit)
                       : "no fit (fewer than 2 batches reached the target, or no plateau)",
                 median ? fmt::format("{:.0f} samples", *median) : "not measured (1 rank) or not resolved");
    json.write({{"type", "steps_model"}, {"chapter", "ch06"}, {"method", method.name}, {"target", sweep.target},
                {"s_min", model ? nlohmann::json(model->s_min) : nlohmann::json(nullptr)},
                {"b_crit", model ? nlohmann::json(model->b_crit) : nlohmann::json(nullptr)},
                {"b_simple", median ? nlohmann::json(*median) : nlohmann::json(nullptr)}});
  }

  const ch06::RateTrial& last = best.back();
  workbook::RunResult result;
  result.config = fmt::format("steps to {:.2f} at {} batch(es) x {} method(s)", sweep.target, sweep.batches.size(),
                              sweep.methods.size());
  result.epochs = 0;
  result.batch = last.global_batch;
  result.train_samples = data.train.size();
  result.test_accuracy = last.accuracy;
  result.samples_per_s = static_cast<double>(samples) / seconds;
  result.peak_mem_bytes = workbook::largest_peak_memory_bytes(comm);
  result.details = {{"target", sweep.target}};
  result.summary = fmt::format("result: steps to test accuracy {:.2f}: {}", sweep.target, [&] {
    std::vector<std::string> parts;
    for (const ch06::RateTrial& t : best)
      parts.push_back(fmt::format("{} {} {}", t.method, t.global_batch,
                                  t.steps_to_target ? fmt::format("{}", *t.steps_to_target) : "not reached"));
    return fmt::format("{}", fmt::join(parts, ", "));
  }());
  program.finish(result);
  return 0;
}

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
