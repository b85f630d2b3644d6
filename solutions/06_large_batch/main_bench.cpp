// main_bench.cpp — ch06_bench: what share of a data-parallel step is
// communication, measured by communicating less often (ex6.5).
//
//   mpirun -n 2 ch06_bench [--batch 128] [--frequencies 1,2,4,8,16] [--batches 16] [--rounds 5]
//
// FashionCNN, momentum SGD, random data, batch / ranks samples per rank per
// batch. For each aggregation frequency k, `--batches` batches go through a
// GradientAggregator (one all-reduce and one optimizer step every k); the
// frequencies take turns within each round, and medians are reported.
//
// A batch then costs compute + (comm + opt) / k: aggregating k batches saves
// k − 1 all-reduces and k − 1 optimizer steps. With k = 1 and the largest
// k = K measured side by side, and the optimizer step timed alone (opt):
//   comm       = (t₁ − t_K) · K / (K − 1) − opt    per all-reduce
//   comm_share = comm / t₁                         the share of a step at k = 1
// the method Determined documents for finding out whether a job is
// communication-bound, with no profiler; without subtracting opt it
// overstates the communication by the optimizer's step.
#include <fmt/format.h>

#include <map>

#include "accumulation.hpp"
#include "workbook/errors.hpp"
#include "workbook/program.hpp"
#include "workbook/statistics.hpp"
#include "workbook/timing.hpp"

namespace {

int bench(workbook::Program& program) {
  program.flags().batch = 128;
  program.flags().lr = 0.01;
  CLI::App& app = program.cli();
  std::vector<int64_t> frequencies = {1, 2, 4, 8, 16};
  int64_t batches = 16;
  int rounds = 5;
  app.add_option("--frequencies", frequencies, "aggregation frequencies to measure (1 is needed)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app.add_option("--batches", batches, "batches per measurement (a multiple of every frequency)")
      ->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "rounds; each measures every frequency once")->check(CLI::PositiveNumber);
  const workbook::TrainFlags& flags = program.parse();
  std::sort(frequencies.begin(), frequencies.end());
  frequencies.erase(std::unique(frequencies.begin(), frequencies.end()), frequencies.end());
  WB_CHECK(frequencies.size() >= 2 && frequencies.front() == 1,
           "--frequencies must include 1 and a larger one: the share is their difference");
  for (const int64_t k : frequencies)
    WB_CHECK(batches % k == 0, "--batches {} is not a multiple of frequency {}", batches, k);
  const int64_t local_batch = program.local_batch(flags.batch);

  workbook::Communicator& comm = program.connect();
  const torch::Device device = comm.device();
  const bool leader = program.leader();
  const int ranks = program.ranks();
  torch::manual_seed(flags.seed);
  auto model = std::make_shared<workbook::FashionCNN>();
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(flags.lr).momentum(0.9));
  const auto options = torch::TensorOptions().device(device);
  const ch03::Batch batch{torch::rand({local_batch, 1, 28, 28}, options),
                          torch::randint(0, 10, {local_batch}, options.dtype(torch::kInt64))};

  // Milliseconds per batch at frequency k. The clock is read after a
  // barrier, so every rank times the same interval.
  auto time_batches = [&](int64_t k) {
    ch06::GradientAggregator aggregator(*model, optimizer, comm, k);
    comm.barrier();
    workbook::Stopwatch clock(device);
    clock.start();
    for (int64_t i = 0; i < batches; ++i) aggregator.add(batch);
    comm.barrier();
    return 1000.0 * clock.stop() / static_cast<double>(batches);
  };
  // Milliseconds per optimizer step alone (the gradients of the last batch).
  auto time_optimizer = [&] {
    comm.barrier();
    workbook::Stopwatch clock(device);
    clock.start();
    for (int64_t i = 0; i < batches; ++i) optimizer.step();
    return 1000.0 * clock.stop() / static_cast<double>(batches);
  };
  time_batches(1);  // warm-up: first-call allocations
  std::map<int64_t, std::vector<double>> ms;
  std::vector<double> optimizer_ms;
  for (int round = 0; round < rounds; ++round) {
    for (const int64_t k : frequencies) ms[k].push_back(time_batches(k));
    optimizer_ms.push_back(time_optimizer());
  }

  const int64_t largest = frequencies.back();
  const double t1 = workbook::median(ms[1]), t_largest = workbook::median(ms[largest]);
  const double saved_per_step_ms = (t1 - t_largest) * static_cast<double>(largest) / static_cast<double>(largest - 1);
  const double opt_ms = workbook::median(optimizer_ms);
  const double comm_ms = saved_per_step_ms - opt_ms;
  const double comm_share = comm_ms / t1;

  workbook::JsonLines& json = program.json();
  if (leader) {
    fmt::print("ch06_bench: FashionCNN, {} rank(s), {} samples per rank per batch, {} thread(s) per rank; "
               "{} rounds of {} batches per frequency, medians\n\n",
               ranks, local_batch, flags.threads, rounds, batches);
  }
  workbook::Table table({{"frequency", 9}, {"ms/batch", 9}, {"model", 9}});
  if (leader) fmt::print("{}\n", table.header());
  for (const int64_t k : frequencies) {
    const double measured = workbook::median(ms[k]);
    const double modelled = t1 - saved_per_step_ms * (1.0 - 1.0 / static_cast<double>(k));  // compute + (comm + opt) / k
    if (leader)
      fmt::print("{}\n", table.row({fmt::format("{}", k), fmt::format("{:.2f}", measured),
                                    fmt::format("{:.2f}", modelled)}));
    nlohmann::json row = {{"type", "row"}, {"measure", "batch"}, {"ranks", ranks},
                          {"aggregation_frequency", k}, {"ms", measured}};
    if (k == 1) row["comm_share"] = comm_share;
    json.write(row);
  }
  if (leader)
    fmt::print("\nsaved per step not taken: (t1 - t{0}) x {0}/{1} = {2:.2f} ms = all-reduce + optimizer step\n"
               "optimizer step alone (momentum SGD): {3:.2f} ms\n"
               "all-reduce per step: comm = {2:.2f} - {3:.2f} = {4:.2f} ms; comm_share at frequency 1 = {5:.3f}\n"
               "model: t1 - (comm + opt) x (1 - 1/k), how well compute + (comm + opt) / k describes the measurements\n",
               largest, largest - 1, saved_per_step_ms, opt_ms, comm_ms, comm_share);
  if (leader && comm_ms <= 0)
    fmt::print("note: frequency {} was no faster than 1: the machine's noise is larger than the communication; "
               "more --rounds or --batches\n",
               largest);
  workbook::BenchResult result;
  result.headline = {{"comm_ms", comm_ms}, {"comm_share", comm_share}, {"step_ms", t1}, {"optimizer_ms", opt_ms}};
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(
      argc, argv, {"ch06_bench", "Chapter 6: the communication share of a step, by aggregation frequency"}, bench);
}
