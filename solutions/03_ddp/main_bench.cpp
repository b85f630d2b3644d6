// main_bench.cpp — ch03_bench: what does averaging the gradients cost, and
// does one flat all-reduce beat one per parameter?
//
//   mpirun -n 2 ch03_bench [--batch 100] [--steps 20] [--rounds 5] [--threads N] [--json FILE]
//
// FashionCNN, Adam, random data, batch / ranks samples per rank. Measured in
// rounds, the variants interleaved within each round (medians reported):
//   step, all-reduce every step      this build's ch03::all_reduce_gradients (flat)
//   step, per-parameter every step   the given all_reduce_gradients_per_parameter
//   step, barrier + all-reduce       a barrier before every batch, then the same:
//                                    what the common "keep the ranks in step" costs
//   step, all-reduce every 1000      the same steps, communicating once per 1000
//                                    (never, at this length): the compute alone
// comm_share = 1 - (every 1000) / (every step): the share of a step spent
// communicating, measured as Determined measures it (aggregation frequency).
// Then the parts of a step alone, ms per call: the gradient all-reduce (flat
// and per parameter), forward + backward, and Adam's step.
#include <fmt/format.h>

#include <functional>

#include "ddp.hpp"
#include "workbook/program.hpp"
#include "workbook/statistics.hpp"
#include "workbook/timing.hpp"

namespace {

using workbook::median;

enum class Averaging { Flat, PerParameter, BarrierAndFlat, Every1000 };

int bench(workbook::Program& program) {
  int steps = 20, rounds = 5;
  program.cli().add_option("--steps", steps, "timed steps per variant and round")->check(CLI::PositiveNumber);
  program.cli().add_option("--rounds", rounds, "rounds; each runs every variant once")->check(CLI::PositiveNumber);
  const workbook::TrainFlags& flags = program.parse();
  const int64_t local_batch = program.local_batch(flags.batch);
  workbook::Communicator& comm = program.connect();
  const torch::Device device = comm.device();
  const int ranks = program.ranks();

  torch::manual_seed(flags.seed);
  auto model = std::make_shared<workbook::FashionCNN>();
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(flags.lr));
  const torch::Tensor images = torch::rand({local_batch, 1, 28, 28}, torch::TensorOptions().device(device));
  const torch::Tensor labels = torch::randint(0, 10, {local_batch}, torch::TensorOptions().dtype(torch::kInt64).device(device));

  int64_t global_step = 0;
  auto step = [&](Averaging averaging) {
    if (averaging == Averaging::BarrierAndFlat) comm.barrier();  // not needed: the all-reduce already waits
    optimizer.zero_grad();
    torch::nn::functional::cross_entropy(model->forward(images), labels).backward();
    ++global_step;
    if (averaging == Averaging::Flat || averaging == Averaging::BarrierAndFlat) ch03::all_reduce_gradients(*model, comm);
    if (averaging == Averaging::PerParameter) ch03::all_reduce_gradients_per_parameter(*model, comm);
    if (averaging == Averaging::Every1000 && global_step % 1000 == 0) ch03::all_reduce_gradients(*model, comm);
    optimizer.step();
  };
  // Milliseconds per step over `steps` steps. The clock is read after a
  // barrier, so every rank times the same interval.
  auto time_steps = [&](Averaging averaging) {
    comm.barrier();
    workbook::Stopwatch clock(device);
    clock.start();
    for (int i = 0; i < steps; ++i) step(averaging);
    comm.barrier();
    return 1000.0 * clock.stop() / steps;
  };
  for (int i = 0; i < 5; ++i) step(Averaging::Flat);  // warm-up: first-call allocations

  const Averaging variants[] = {Averaging::Flat, Averaging::PerParameter, Averaging::BarrierAndFlat,
                                Averaging::Every1000};
  std::map<Averaging, std::vector<double>> step_ms;
  std::vector<double> flat_ms, per_parameter_ms, forward_backward_ms, adam_ms;
  // Milliseconds per call of `part`, `steps` calls; every rank at once, as in a step.
  auto time_part = [&](const std::function<void()>& part) {
    comm.barrier();
    workbook::Stopwatch clock(device);
    clock.start();
    for (int i = 0; i < steps; ++i) part();
    return 1000.0 * clock.stop() / steps;
  };
  for (int round = 0; round < rounds; ++round) {
    for (Averaging v : variants) step_ms[v].push_back(time_steps(v));
    // The parts alone (the gradients hold the last step's values).
    flat_ms.push_back(time_part([&] { ch03::all_reduce_gradients(*model, comm); }));
    per_parameter_ms.push_back(time_part([&] { ch03::all_reduce_gradients_per_parameter(*model, comm); }));
    forward_backward_ms.push_back(time_part([&] {
      optimizer.zero_grad();
      torch::nn::functional::cross_entropy(model->forward(images), labels).backward();
    }));
    adam_ms.push_back(time_part([&] { optimizer.step(); }));
  }

  const double every_step = median(step_ms[Averaging::Flat]);
  const double compute_only = median(step_ms[Averaging::Every1000]);
  const double per_parameter_step = median(step_ms[Averaging::PerParameter]);
  const double barrier_step = median(step_ms[Averaging::BarrierAndFlat]);
  const double comm_share = 1.0 - compute_only / every_step;
  const double per_parameter_share = 1.0 - compute_only / per_parameter_step;
  int64_t gradient_elements = 0, gradient_tensors = 0;
  for (const auto& p : model->parameters()) {
    gradient_elements += p.numel();
    ++gradient_tensors;
  }

  workbook::JsonLines& json = program.json();
  auto row = [&](const std::string& measure, const std::string& impl, double ms, std::optional<double> share) {
    nlohmann::json r = {{"type", "row"}, {"measure", measure}, {"ranks", ranks}, {"batch", local_batch},
                        {"impl", impl}, {"ms", ms}};
    if (share) r["comm_share"] = *share;
    json.write(r);
  };
  row("step", "self", every_step, comm_share);
  row("step", "per-parameter", per_parameter_step, per_parameter_share);
  row("step", "barrier+self", barrier_step, 1.0 - compute_only / barrier_step);
  row("step", "every-1000", compute_only, std::nullopt);
  row("allreduce", "self", median(flat_ms), std::nullopt);
  row("allreduce", "per-parameter", median(per_parameter_ms), std::nullopt);
  row("forward-backward", "self", median(forward_backward_ms), std::nullopt);
  row("optimizer", "adam", median(adam_ms), std::nullopt);

  if (program.leader()) {
    fmt::print("ch03_bench: FashionCNN, {} rank(s), {} samples per rank, {} thread(s) per rank; gradients: {} "
               "tensors, {} elements ({:.1f} MiB); {} rounds of {} steps, medians\n\n",
               ranks, local_batch, flags.threads, gradient_tensors, gradient_elements,
               static_cast<double>(gradient_elements) * 4 / (1 << 20), rounds, steps);
    workbook::Table table({{"measure", 34}, {"ms", 9}, {"comm_share", 10}});
    fmt::print("{}\n", table.header());
    fmt::print("{}\n", table.row({"step, all-reduce every step (flat)", fmt::format("{:.2f}", every_step),
                                  fmt::format("{:.3f}", comm_share)}));
    fmt::print("{}\n", table.row({"step, per-parameter every step", fmt::format("{:.2f}", per_parameter_step),
                                  fmt::format("{:.3f}", per_parameter_share)}));
    fmt::print("{}\n", table.row({"step, barrier + all-reduce (flat)", fmt::format("{:.2f}", barrier_step),
                                  fmt::format("{:.3f}", 1.0 - compute_only / barrier_step)}));
    fmt::print("{}\n", table.row({"step, all-reduce every 1000 steps", fmt::format("{:.2f}", compute_only), "-"}));
    fmt::print("{}\n", table.row({"gradient all-reduce, flat", fmt::format("{:.2f}", median(flat_ms)), "-"}));
    fmt::print("{}\n", table.row({"gradient all-reduce, per parameter", fmt::format("{:.2f}", median(per_parameter_ms)), "-"}));
    fmt::print("{}\n", table.row({"forward + backward alone", fmt::format("{:.2f}", median(forward_backward_ms)), "-"}));
    fmt::print("{}\n", table.row({"optimizer step alone (Adam)", fmt::format("{:.2f}", median(adam_ms)), "-"}));
  }
  workbook::BenchResult result;
  result.headline = {{"comm_share", comm_share}, {"step_ms", every_step}, {"adam_ms", median(adam_ms)},
                     {"forward_backward_ms", median(forward_backward_ms)}, {"allreduce_ms", median(flat_ms)}};
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(
      argc, argv,
      {"ch03_bench", "Chapter 3: the cost of averaging gradients (flat vs per parameter, and its share of a step)"},
      bench);
}
