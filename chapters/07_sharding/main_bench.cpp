// main_bench.cpp — ch07_bench: what each ZeRO stage holds, sends and costs
// per step, at the world size it is launched with.
//
//   mpirun -n 2 ch07_bench [--batch 100] [--steps 10] [--rounds 5] [--stages 0,1,2,3] [--threads N]
//
// FashionCNN, Adam, random data, --batch is the global batch (batch / ranks
// per rank). For each stage, `--rounds` rounds of `--steps` steps (the
// stages take turns within each round; medians are reported):
//   ms          a whole step: zero_grad, forward, backward, the stage's step
//   optimizer   the optimizer's step alone, on what this stage gives it
//   efficiency  t1 / (ranks x ms): t1 is one process stepping the whole
//               global batch without communication, timed by every rank at
//               once in this same job (so at 4 ranks on 2 cores it is as
//               crowded as the step it is compared with)
// and, counted from the tensors after a step (the largest over ranks):
// parameter, gradient and optimizer-state bytes, the parameters' peak during
// training, and the elements each rank sends per step as a ring would.
#include <fmt/format.h>

#include "ddp.hpp"
#include "sharding.hpp"
#include "workbook/errors.hpp"
#include "workbook/program.hpp"
#include "workbook/results.hpp"
#include "workbook/statistics.hpp"
#include "workbook/timing.hpp"

namespace {

struct StageFigures {
  std::vector<double> step_ms, optimizer_ms;
  ch07::HeldBytes held;
  int64_t peak_parameter_bytes = 0;
  int64_t elements_sent = 0;
};

// The largest value over ranks (every rank gets it).
int64_t largest(int64_t mine, workbook::Communicator& comm) {
  const torch::Tensor all = comm.all_gather(torch::full({1}, mine, torch::kInt64));
  return all.max().item<int64_t>();
}

std::string mib(int64_t bytes) { return fmt::format("{:.2f}", static_cast<double>(bytes) / (1 << 20)); }

int bench(workbook::Program& program) {
  CLI::App& app = program.cli();
  int64_t steps = 10;
  int rounds = 5;
  std::vector<int> stages = {0, 1, 2, 3};
  app.add_option("--steps", steps, "steps per measurement")->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "rounds; each measures every stage once")->check(CLI::PositiveNumber);
  app.add_option("--stages", stages, "stages to measure")->delimiter(',')->check(CLI::IsMember({0, 1, 2, 3}));
  const workbook::TrainFlags& flags = program.parse();
  const int64_t local_batch = program.local_batch(flags.batch);

  workbook::Communicator& comm = program.connect();
  const torch::Device device = comm.device();
  const int ranks = program.ranks();
  const auto options = torch::TensorOptions().device(device);
  torch::manual_seed(flags.seed);
  const torch::Tensor images = torch::rand({flags.batch, 1, 28, 28}, options);
  const torch::Tensor labels = torch::randint(0, 10, {flags.batch}, options.dtype(torch::kInt64));
  const torch::Tensor my_images = images.narrow(0, comm.rank() * local_batch, local_batch);
  const torch::Tensor my_labels = labels.narrow(0, comm.rank() * local_batch, local_batch);

  // t1: one process, the whole global batch, no communication (every rank at once).
  std::vector<double> single_ms;
  {
    torch::manual_seed(flags.seed);
    workbook::FashionCNN model;
    model.to(device);
    torch::optim::Adam optimizer(model.parameters(), torch::optim::AdamOptions(flags.lr));
    for (int round = 0; round <= rounds; ++round) {  // round 0: warm-up
      workbook::Stopwatch clock(device);
      clock.start();
      for (int64_t i = 0; i < steps; ++i) {
        optimizer.zero_grad();
        torch::nn::functional::cross_entropy(model.forward(images), labels).backward();
        optimizer.step();
      }
      if (round > 0) single_ms.push_back(1000.0 * clock.stop() / static_cast<double>(steps));
    }
  }
  torch::Tensor t1_all = comm.all_gather(torch::full({1}, workbook::median(single_ms), torch::kFloat64));
  const double t1 = workbook::median(std::vector<double>(t1_all.data_ptr<double>(), t1_all.data_ptr<double>() + ranks));

  // One model and Sharding per stage, built once, measured in turns.
  std::vector<std::shared_ptr<workbook::FashionCNN>> models;
  std::vector<std::unique_ptr<ch07::Sharding>> shardings;
  for (int stage : stages) {
    torch::manual_seed(flags.seed);
    models.push_back(std::make_shared<workbook::FashionCNN>());
    models.back()->to(device);
    shardings.push_back(ch07::make_sharding(stage, *models.back(), comm, ch07::adam(flags.lr)));
  }
  std::vector<StageFigures> figures(stages.size());
  auto step = [&](size_t s) {
    shardings[s]->zero_grad();
    torch::nn::functional::cross_entropy(shardings[s]->forward(*models[s], my_images), my_labels).backward();
    shardings[s]->step();
  };
  for (size_t s = 0; s < stages.size(); ++s) step(s);  // warm-up: the optimizers' state exists from here
  for (int round = 0; round < rounds; ++round) {
    for (size_t s = 0; s < stages.size(); ++s) {
      comm.barrier();
      workbook::Stopwatch clock(device);
      clock.start();
      const int64_t sent_before = ch07::ring_elements_sent(comm.stats(), ranks);
      for (int64_t i = 0; i < steps; ++i) step(s);
      comm.barrier();
      figures[s].step_ms.push_back(1000.0 * clock.stop() / static_cast<double>(steps));
      figures[s].elements_sent = (ch07::ring_elements_sent(comm.stats(), ranks) - sent_before) / steps;
      // The optimizer alone, on the gradients it was last given.
      workbook::Stopwatch optimizer_clock(device);
      optimizer_clock.start();
      for (int64_t i = 0; i < steps; ++i) shardings[s]->optimizer().step();
      figures[s].optimizer_ms.push_back(1000.0 * optimizer_clock.stop() / static_cast<double>(steps));
    }
  }

  workbook::JsonLines& json = program.json();
  const bool leader = program.leader();
  if (leader)
    fmt::print("ch07_bench: FashionCNN, Adam, {} rank(s), global batch {} = {} x {}, {} thread(s) per rank; "
               "{} rounds of {} steps per stage, medians; t1 (one process, the global batch) = {:.2f} ms\n\n",
               ranks, flags.batch, ranks, local_batch, flags.threads, rounds, steps, t1);
  workbook::Table table({{"stage", 5}, {"ms/step", 8}, {"efficiency", 10}, {"optimizer ms", 12},
                         {"params MiB", 10}, {"peak params", 11}, {"grads MiB", 9}, {"opt state MiB", 13},
                         {"opt/DDP", 7}, {"sent/step", 10}});
  if (leader) fmt::print("{}\n", table.header());
  const int64_t ddp_optimizer_bytes = 2 * 4 * workbook::count_parameters(*models[0]);  // Adam: exp_avg, exp_avg_sq
  nlohmann::json headline = {{"t1_ms", t1}};
  for (size_t s = 0; s < stages.size(); ++s) {
    const ch07::HeldBytes held = shardings[s]->held();
    const ch07::HeldBytes most{largest(held.parameters, comm), largest(held.gradients, comm),
                               largest(held.optimizer_state, comm)};
    const int64_t peak = largest(shardings[s]->peak_parameter_bytes(), comm);
    const double ms = workbook::median(figures[s].step_ms);
    const double efficiency = t1 / (ranks * ms);
    const double optimizer_share = static_cast<double>(most.optimizer_state) / static_cast<double>(ddp_optimizer_bytes);
    if (leader)
      fmt::print("{}\n", table.row({fmt::format("{}", stages[s]), fmt::format("{:.2f}", ms),
                                    fmt::format("{:.3f}", efficiency),
                                    fmt::format("{:.2f}", workbook::median(figures[s].optimizer_ms)),
                                    mib(most.parameters), mib(peak), mib(most.gradients), mib(most.optimizer_state),
                                    fmt::format("{:.4f}", optimizer_share),
                                    fmt::format("{}", figures[s].elements_sent)}));
    const nlohmann::json row = {{"type", "row"}, {"stage", stages[s]}, {"ranks", ranks}, {"ms", ms},
                {"efficiency", efficiency}, {"optimizer_ms", workbook::median(figures[s].optimizer_ms)},
                {"samples_per_s", 1000.0 * static_cast<double>(flags.batch) / ms},
                {"parameter_bytes", most.parameters}, {"peak_parameter_bytes", peak},
                {"gradient_bytes", most.gradients}, {"optimizer_state_bytes", most.optimizer_state},
                {"optimizer_state_over_ddp", optimizer_share}, {"elements_sent", figures[s].elements_sent},
                {"held_mib", static_cast<double>(most.total()) / (1 << 20)},
                {"peak_parameter_mib", static_cast<double>(peak) / (1 << 20)}};
    json.write(row);
    headline[fmt::format("efficiency_stage{}", stages[s])] = efficiency;
  }
  if (leader)
    fmt::print("\nopt/DDP: the optimizer state of the rank holding the most, over DDP's ({} MiB); sent/step: "
               "elements each rank sends per step, as a ring would (DDP: 2(N-1)/N x {})\n",
               mib(ddp_optimizer_bytes), workbook::count_parameters(*models[0]));
  workbook::BenchResult result;
  result.headline = headline;
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(
      argc, argv, {"ch07_bench", "Chapter 7: bytes, communication and step time of ZeRO stages 0-3"}, bench);
}
