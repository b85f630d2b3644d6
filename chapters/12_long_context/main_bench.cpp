// main_bench.cpp — ch12_bench: what splitting a sequence over a context group
// keeps, balances and hides, measured in one run.
//
//   mpirun -n 4 ch12_bench --measure memory|split|overlap [--context 1024] [--batch 1]
//                          [--steps 2] [--rounds 3] [--threads N] [--json FILE]
//   workbook bench ch12 [--ranks N] [--nodes 2]
//
// Chapter 11's GPT (4 blocks of 256, 4 heads), Adam, windows of the Jargon File.
//   memory   the world cut into context groups of 1, 2, 4, ... ranks (each
//            group's ranks split one sequence): kept_mib, the bytes one
//            forward pass left for backward on the rank that kept most
//            (counted from the tensors, tensor_bytes.hpp)
//   split    the contiguous split, then the balanced one (ex12.2), over the
//            whole world: step_ms, and work_imbalance, the most (query, key)
//            pairs a rank computes over the fewest
//   overlap  each block's exchange overlapped with the attention of the one
//            before (ex12.3's RingOptions), then waited for first
// The variants take turns within each round, so a busy spell of the machine
// falls on all alike; step_ms is the median over rounds of the mean step.
#include <fmt/format.h>

#include <ATen/CPUGeneratorImpl.h>

#include "context_gpt.hpp"
#include "workbook/errors.hpp"
#include "workbook/program.hpp"
#include "workbook/results.hpp"
#include "workbook/statistics.hpp"
#include "workbook/tensor_bytes.hpp"
#include "workbook/text_corpus.hpp"
#include "workbook/timing.hpp"

namespace {

struct Variant {
  std::string name;
  workbook::Communicator* group = nullptr;  // the context group this rank is in
  ch12::ContextLayout layout;
  ch12::RingOptions ring;
  workbook::Gpt gpt{nullptr};
  std::unique_ptr<torch::optim::Adam> optimizer;
  std::vector<double> step_ms;
  int64_t kept_bytes = 0;  // the most any rank kept (after the run: every rank's, reduced)
  double imbalance = 1.0;
};

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

int bench(workbook::Program& program) {
  std::string measure = "split";
  int64_t steps = 2;
  int rounds = 3;
  workbook::GptOptions model;
  model.context = 1024;
  program.flags().batch = 1;
  CLI::App& cli = program.cli();
  cli.add_option("--measure", measure, "memory, split or overlap")
      ->check(CLI::IsMember({"memory", "split", "overlap"}));
  cli.add_option("--context", model.context, "bytes a window holds")->check(CLI::PositiveNumber);
  cli.add_option("--steps", steps, "steps per variant per round")->check(CLI::PositiveNumber);
  cli.add_option("--rounds", rounds, "rounds: the variants take turns within each")->check(CLI::PositiveNumber);
  const workbook::TrainFlags& flags = program.parse();
  model.check();
  const int ranks = program.ranks();
  std::vector<int> group_sizes;
  if (measure == "memory") {
    for (int size = 1; size <= ranks; size *= 2)
      if (ranks % size == 0) group_sizes.push_back(size);
  } else {
    group_sizes = {ranks, ranks};
  }
  for (const int size : group_sizes) ch12::make_layout(model.context, size, ch12::Split::Balanced);  // says when T does not split
  const workbook::TextCorpus corpus = workbook::load_text_corpus(workbook::find_text_corpus(flags.data));

  workbook::Communicator& world = program.connect();
  const torch::Device device = world.device();
  std::vector<std::unique_ptr<workbook::Communicator>> groups;
  std::vector<Variant> variants;
  for (size_t i = 0; i < group_sizes.size(); ++i) {
    const int size = group_sizes[i];
    Variant v;
    if (measure == "memory") {
      groups.push_back(world.split(world.rank() / size, world.rank(), fmt::format("context group of {}", size)));
      v.group = groups.back().get();
      v.name = fmt::format("cp={}", size);
      v.layout = ch12::make_layout(model.context, size, ch12::Split::Balanced);
    } else {
      v.group = &world;
      const bool first = i == 0;
      v.name = measure == "split" ? (first ? "contiguous" : "balanced") : (first ? "overlap" : "no overlap");
      v.layout = ch12::make_layout(model.context, ranks,
                                   measure == "split" && first ? ch12::Split::Contiguous : ch12::Split::Balanced);
      v.ring.overlap = measure != "overlap" || first;
    }
    std::vector<int64_t> pairs;
    for (int r = 0; r < v.group->size(); ++r)
      pairs.push_back(ch12::causal_pairs(model.context, r, v.group->size(), v.layout.split));
    v.imbalance = static_cast<double>(*std::max_element(pairs.begin(), pairs.end())) /
                  static_cast<double>(*std::min_element(pairs.begin(), pairs.end()));
    torch::manual_seed(flags.seed);
    v.gpt = workbook::Gpt(model);
    v.gpt->to(device);
    v.optimizer = std::make_unique<torch::optim::Adam>(v.gpt->parameters(), torch::optim::AdamOptions(3e-4));
    variants.push_back(std::move(v));
  }

  torch::Generator windows = at::make_generator<at::CPUGeneratorImpl>(flags.seed + 1);
  const workbook::TextBatch batch = workbook::sample_windows(corpus.train, flags.batch, model.context, windows);
  auto step = [&](Variant& v) {
    workbook::Communicator& group = *v.group;
    const torch::Tensor inputs = ch12::my_columns(batch.inputs, v.layout, group.rank()).to(device);
    const torch::Tensor targets = ch12::my_columns(batch.targets, v.layout, group.rank()).to(device);
    v.optimizer->zero_grad();
    const int64_t before = workbook::tensor_bytes(device).current;
    const torch::Tensor loss = torch::nn::functional::cross_entropy(
        ch12::context_parallel_logits(*v.gpt, inputs, v.layout, group, v.ring).reshape({-1, model.vocabulary}),
        targets.reshape({-1}));
    v.kept_bytes = workbook::tensor_bytes(device).current - before;
    loss.backward();
    ch12::average_gradients(*v.gpt, group);
    v.optimizer->step();
  };
  for (Variant& v : variants) step(v);  // warm-up: Adam's state exists from here
  for (int round = 0; round < rounds; ++round) {
    for (Variant& v : variants) {
      world.barrier();
      workbook::Stopwatch clock(device);
      clock.start();
      for (int64_t i = 0; i < steps; ++i) step(v);
      world.barrier();
      v.step_ms.push_back(1000.0 * clock.stop() / static_cast<double>(steps));
    }
  }
  for (Variant& v : variants) {
    torch::Tensor kept = torch::tensor({v.kept_bytes}, torch::kInt64);
    world.all_reduce(kept, workbook::ReduceOp::Max);
    v.kept_bytes = kept.item<int64_t>();
  }

  workbook::JsonLines& json = program.json();
  program.say("ch12_bench --measure {}: GPT ({} blocks of {}, {} heads), {} rank(s), {} sequence(s) of {} bytes, "
              "{} thread(s) per rank, device {}; {} rounds of {} steps per variant, medians",
              measure, model.layers, model.width, model.heads, ranks, flags.batch, model.context, flags.threads,
              device.str(), rounds, steps);
  workbook::Table table({{"variant", 12}, {"step_ms", 8}, {"vs first", 8}, {"kept_MiB", 8}, {"imbalance", 9}});
  program.say("{}", table.header());
  const double first_ms = workbook::median(variants.front().step_ms);
  nlohmann::json headline = {{"measure", measure}};
  for (Variant& v : variants) {
    const double ms = workbook::median(v.step_ms);
    program.say("{}", table.row({v.name, fmt::format("{:.1f}", ms), fmt::format("{:.2f}x", ms / first_ms),
                                 fmt::format("{:.2f}", mib(v.kept_bytes)), fmt::format("{:.2f}", v.imbalance)}));
    json.write({{"type", "row"}, {"measure", measure}, {"variant", v.name}, {"ranks", ranks}, {"step_ms", ms},
                {"vs_first", ms / first_ms}, {"kept_mib", mib(v.kept_bytes)}, {"work_imbalance", v.imbalance}});
    headline[v.name + " step_ms"] = ms;
  }
  program.say("kept: the bytes one forward pass left for backward on the rank that kept most (counted from the "
              "tensors); imbalance: the most (query, key) pairs a rank of the group computes over the fewest");
  workbook::BenchResult result;
  result.headline = headline;
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(
      argc, argv, {"ch12_bench", "Chapter 12: memory, balance and overlap of a sequence split over a context group"},
      bench);
}
