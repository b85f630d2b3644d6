// main_bench.cpp — ch08_bench: the pipeline's bubble, throughput and what
// each stage holds, by schedule and number of micro-batches.
//
//   mpirun -n 2 ch08_bench [--batch 64] [--micro-batches 1,2,4,8] [--steps 6] [--rounds 3] [--threads 1] [--json FILE]
//   workbook bench ch08
//
// Every configuration is measured in each round, in turn, so that a busy
// spell of the machine falls on all of them alike; the figures are medians.
//
// bubble: the share of a step that the busiest stage (the most compute per
// micro-batch) spends outside forward and backward. With p stages of equal
// cost it would be (p-1)/(m+p-1) ("balanced"). FashionCNN's stages are not
// equal, and the busiest stage waits only while the others fill and drain the
// pipeline: predicted = Σ others' t / (m·t_busiest + Σ others' t), with t a
// stage's measured forward + backward time per micro-batch.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipeline.hpp"
#include "workbook/errors.hpp"
#include "workbook/program.hpp"
#include "workbook/seeds.hpp"
#include "workbook/statistics.hpp"
#include "workbook/timing.hpp"

namespace {

struct Config {
  ch08::Schedule schedule;
  std::string name;
  int64_t micro_batches;
  std::vector<double> step_s, compute_s;  // this stage's timed steps
  int64_t peak_held = 0, peak_held_bytes = 0;
};

// Every stage's value of `mine`, at rank 0 and the others alike.
std::vector<double> from_every_stage(double mine, workbook::Communicator& comm) {
  const torch::Tensor all = comm.all_gather(torch::tensor({mine}, torch::kFloat64).to(comm.device())).cpu();
  return {all.data_ptr<double>(), all.data_ptr<double>() + comm.size()};
}

int bench(workbook::Program& program) {
  program.flags().batch = 64;
  std::vector<int64_t> micro_batch_counts = {1, 2, 4, 8};
  int64_t steps = 6, rounds = 3;
  program.cli().add_option("--micro-batches", micro_batch_counts, "micro-batch counts to measure (each must divide --batch)")
      ->delimiter(',')->check(CLI::PositiveNumber);
  program.cli().add_option("--steps", steps, "timed steps per configuration and round")->check(CLI::PositiveNumber);
  program.cli().add_option("--rounds", rounds, "rounds; each measures every configuration once")->check(CLI::PositiveNumber);
  const workbook::TrainFlags& flags = program.parse();
  const int ranks = program.ranks();
  WB_CHECK(ranks >= 2 && ranks <= ch08::kBlocks, "ch08_bench measures a pipeline of 2 to {} stages, one per rank: "
           "{} rank(s) cannot make one", ch08::kBlocks, ranks);
  for (const int64_t m : micro_batch_counts)
    WB_CHECK(flags.batch % m == 0, "--micro-batches {} does not divide --batch {} into equal micro-batches", m, flags.batch);

  workbook::Communicator& comm = program.connect();
  const torch::Device device = comm.device();
  const workbook::FashionMnist data = program.load_data();
  torch::manual_seed(workbook::initial_weights_seed(flags.seed, 0));
  workbook::FashionCNN full;
  full.to(device);
  ch08::PipelineStage stage(full, comm, flags.seed);
  torch::optim::Adam optimizer(stage.parameters(), torch::optim::AdamOptions(flags.lr));
  WB_CHECK(data.train.size() >= flags.batch, "--train-samples {} is less than one batch (--batch {})",
           data.train.size(), flags.batch);
  const torch::Tensor images = data.train.images.narrow(0, 0, flags.batch);
  const torch::Tensor labels = data.train.labels.narrow(0, 0, flags.batch);

  std::vector<Config> configs;
  for (const auto& [schedule, name] : {std::pair{ch08::Schedule::GPipe, "gpipe"}, std::pair{ch08::Schedule::OneFOneB, "1f1b"}})
    for (const int64_t m : micro_batch_counts) configs.push_back({schedule, name, m, {}, {}});
  auto step = [&](Config& c, bool timed) {
    optimizer.zero_grad();
    const double started = workbook::now_seconds();
    const ch08::StageStepStats stats = ch08::pipeline_step(stage, c.schedule, images, labels, c.micro_batches);
    const double seconds = workbook::now_seconds() - started;
    optimizer.step();
    if (!timed) return;
    c.step_s.push_back(seconds);
    c.compute_s.push_back(stats.compute_s);
    c.peak_held = std::max(c.peak_held, stats.peak_held);
    c.peak_held_bytes = std::max(c.peak_held_bytes, stats.peak_held_bytes);
  };
  for (Config& c : configs) step(c, false);  // warm-up: first-call allocations
  for (int64_t round = 0; round < rounds; ++round)
    for (Config& c : configs)
      for (int64_t s = 0; s < steps; ++s) step(c, true);

  program.say("ch08_bench: FashionCNN in {} stages (blocks {}), batch {}, Adam, {} thread(s) per rank; {} rounds of {} "
              "steps per configuration, medians\n", ranks,
              [&] {
                std::vector<std::string> cuts;
                for (int s = 0; s < ranks; ++s) {
                  const auto [first, end] = ch08::blocks_of_stage(s, ranks);
                  cuts.push_back(fmt::format("{}-{}", first, end - 1));
                }
                return fmt::format("{}", fmt::join(cuts, " | "));
              }(),
              flags.batch, flags.threads, rounds, steps);
  workbook::Table table({{"schedule", 8}, {"m", 3}, {"ms/step", 8}, {"samples/s", 9}, {"bubble", 6},
                         {"predicted", 9}, {"balanced", 8}, {"held first", 10}, {"held last", 9},
                         {"first MiB", 9}});
  program.say("{}", table.header());
  workbook::JsonLines& json = program.json();
  nlohmann::json headline = nlohmann::json::object();
  for (Config& c : configs) {
    const double m = static_cast<double>(c.micro_batches);
    const std::vector<double> step_ms = from_every_stage(1e3 * workbook::median(c.step_s), comm);
    const std::vector<double> compute_ms = from_every_stage(1e3 * workbook::median(c.compute_s), comm);
    const std::vector<double> held = from_every_stage(static_cast<double>(c.peak_held), comm);
    const std::vector<double> held_bytes = from_every_stage(static_cast<double>(c.peak_held_bytes), comm);
    const size_t busiest = static_cast<size_t>(std::max_element(compute_ms.begin(), compute_ms.end()) - compute_ms.begin());
    const double ms = step_ms[busiest];
    const double bubble = 1.0 - compute_ms[busiest] / ms;
    double others = 0.0;  // the other stages' forward + backward per micro-batch
    for (size_t s = 0; s < compute_ms.size(); ++s)
      if (s != busiest) others += compute_ms[s] / m;
    const double predicted = others / (compute_ms[busiest] + others);
    const double balanced = static_cast<double>(ranks - 1) / (m + static_cast<double>(ranks - 1));
    const double samples_per_s = 1e3 * static_cast<double>(flags.batch) / ms;
    const double first_mib = held_bytes.front() / (1 << 20);
    program.say("{}", table.row({c.name, fmt::format("{}", c.micro_batches), fmt::format("{:.2f}", ms),
                                 fmt::format("{:.0f}", samples_per_s), fmt::format("{:.3f}", bubble),
                                 fmt::format("{:.3f}", predicted), fmt::format("{:.3f}", balanced),
                                 fmt::format("{:.0f}", held.front()), fmt::format("{:.0f}", held.back()),
                                 fmt::format("{:.2f}", first_mib)}));
    json.write({{"type", "row"}, {"schedule", c.name}, {"micro_batches", c.micro_batches}, {"ranks", ranks},
                {"ms", ms}, {"samples_per_s", samples_per_s}, {"bubble", bubble}, {"bubble_predicted", predicted},
                {"bubble_balanced", balanced}, {"busiest_stage", busiest}, {"compute_ms_per_stage", compute_ms},
                {"held_per_stage", held}, {"held_first", held.front()}, {"held_last", held.back()},
                {"held_mib_first", first_mib}});
    headline[fmt::format("{}_m{}_ms", c.name, c.micro_batches)] = ms;
  }
  program.say("\nbubble: the busiest stage's share of a step outside forward and backward; predicted: from the stages' "
              "measured times, Σ others / (m·t_busiest + Σ others); balanced: (p-1)/(m+p-1), equal stages. held: "
              "micro-batches a stage holds at its peak (GPipe: m; 1F1B: p - s); first MiB: their bytes at stage 0's "
              "boundaries.");
  workbook::BenchResult result;
  result.headline = headline;
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(
      argc, argv, {"ch08_bench", "Chapter 8: a pipeline's bubble, throughput and held activations by schedule"}, bench);
}
