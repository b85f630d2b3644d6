// run_sweep.cpp — ch06_train --sweep: steps to a target per batch (run_config.hpp).
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

namespace ch06 {

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

}  // namespace ch06
