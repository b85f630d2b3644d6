// main_bench.cpp — ch13_bench: what experts cost and buy, and what their
// exchange costs against the α–β model, measured in one run.
//
//   mpirun -n 2 ch13_bench --measure models|all_to_all|kept [--steps 60] [--rounds 5] [--threads N] [--json FILE]
//   workbook bench ch13 [--ranks N] [--nodes 2]
//
//   models      Chapter 11's GPT (4 blocks of 256, 4 heads) with 8 experts
//               of 512, top-2, in every block, at capacity factors 1.25
//               ("experts") and 2 ("experts2"), against the dense model of the
//               same active parameters (one MLP of 1024): the same windows,
//               the same steps, the three taking turns step by step; step_ms
//               (median), tokens_per_s, validation_loss (held-out windows),
//               dropped_share
//   all_to_all  n bytes from every rank, n/p to each, by the library's
//               all-to-all and by ex13.1's; ms (median of --rounds), and
//               ex13.1's all_to_all_cost on the link Chapter 10's
//               fit_shaped_link fits in the same run to exchanges between
//               ring neighbours
//   kept        the bytes one forward pass of Chapter 11's GPT (4 blocks of
//               256) and its loss keep over T/cp = 1024/cp positions,
//               counted from the tensors (tensor_bytes.hpp), against
//               ex13.4's plan_axes, at cp = 1, 2, 4 (rank 0 alone)
#include <fmt/format.h>

#include <ATen/CPUGeneratorImpl.h>

#include "all_to_all.hpp"
#include "moe_gpt.hpp"
#include "plan_axes.hpp"
#include "workbook/tensor_bytes.hpp"
#include "workbook/program.hpp"
#include "workbook/results.hpp"
#include "workbook/statistics.hpp"
#include "workbook/text_corpus.hpp"
#include "workbook/timing.hpp"

namespace {

constexpr int64_t kValidationWindows = 8;

struct Model {
  std::string name;
  ch13::MoeGpt gpt{nullptr};
  std::unique_ptr<torch::optim::AdamW> optimizer;
  std::vector<double> step_ms;
  int64_t dropped = 0, assigned = 0;
  double validation = 0.0;
};

void compare_models(workbook::Program& program, workbook::Communicator& comm, int64_t steps, double balance) {
  const workbook::TrainFlags& flags = program.flags();
  const workbook::TextCorpus corpus = workbook::load_text_corpus(workbook::find_text_corpus(flags.data));
  // dense; experts at the default capacity factor (1.25); experts with room for twice their even share.
  std::vector<Model> models(3);
  for (int i = 0; i < 3; ++i) {
    ch13::MoeGptOptions options;
    options.gpt.context = 128;
    options.dense = i == 0;
    if (i == 2) options.moe.capacity_factor = 2.0;
    models[i].name = options.dense ? "dense" : i == 1 ? "experts" : "experts2";
    torch::manual_seed(flags.seed);
    models[i].gpt = ch13::MoeGpt(options, comm);
    models[i].optimizer = std::make_unique<torch::optim::AdamW>(
        models[i].gpt->parameters(), torch::optim::AdamWOptions(3e-3).weight_decay(0.0));
  }
  const int64_t context = models[0].gpt->options.gpt.context;
  torch::Generator windows = at::make_generator<at::CPUGeneratorImpl>(flags.seed + 1 + 1000 * comm.rank());
  for (int64_t step = 0; step < steps; ++step) {
    const workbook::TextBatch batch = workbook::sample_windows(corpus.train, flags.batch, context, windows);
    for (Model& m : models) {  // the same windows, the three taking turns
      comm.barrier();
      const double started = workbook::now_seconds();
      const torch::Tensor loss = torch::nn::functional::cross_entropy(m.gpt->forward(batch.inputs).flatten(0, 1),
                                                                      batch.targets.flatten()) +
                                 balance * m.gpt->balancing_loss();
      m.optimizer->zero_grad();
      loss.backward();
      ch13::average_gradients(*m.gpt, comm);
      m.optimizer->step();
      comm.barrier();
      if (step >= 2) m.step_ms.push_back(1000.0 * (workbook::now_seconds() - started));
      const auto [dropped, assigned] = m.gpt->dropped_of_assigned();
      m.dropped += dropped;
      m.assigned += assigned;
    }
  }
  torch::Generator held_out = at::make_generator<at::CPUGeneratorImpl>(flags.seed + 2 + 1000 * comm.rank());
  const workbook::TextBatch validation = workbook::sample_windows(corpus.validation, kValidationWindows, context, held_out);
  workbook::JsonLines& json = program.json();
  program.say("ch13_bench --measure models: GPT (4 blocks of 256, 4 heads), {} rank(s), {} windows of {} bytes per "
              "rank, {} steps, balancing loss weight {}, {} thread(s) per rank",
              comm.size(), flags.batch, context, steps, balance, flags.threads);
  workbook::Table table({{"variant", 9}, {"step_ms", 8}, {"tokens/s", 9}, {"vs dense", 8}, {"val_loss", 8},
                         {"dropped", 8}});
  program.say("{}", table.header());
  nlohmann::json headline = {{"measure", "models"}};
  double dense_ms = 0.0;
  for (Model& m : models) {
    torch::NoGradGuard no_grad;
    torch::Tensor loss = torch::nn::functional::cross_entropy(m.gpt->forward(validation.inputs).flatten(0, 1),
                                                              validation.targets.flatten())
                             .to(torch::kFloat64).reshape({1});
    comm.all_reduce(loss, workbook::ReduceOp::Average);
    torch::Tensor drops = torch::tensor({m.dropped, m.assigned}, torch::kInt64);
    comm.all_reduce(drops, workbook::ReduceOp::Sum);
    const double dropped = drops[1].item<int64_t>() ? drops[0].item<double>() / drops[1].item<double>() : 0.0;
    const double ms = workbook::median(m.step_ms);
    if (m.name == "dense") dense_ms = ms;
    const double tokens_per_s = 1000.0 * comm.size() * flags.batch * context / ms;
    program.say("{}", table.row({m.name, fmt::format("{:.1f}", ms), fmt::format("{:.0f}", tokens_per_s),
                                 fmt::format("{:.2f}x", ms / dense_ms), fmt::format("{:.4f}", loss.item<double>()),
                                 fmt::format("{:.1f}%", 100.0 * dropped)}));
    json.write({{"type", "row"}, {"measure", "models"}, {"variant", m.name}, {"ranks", comm.size()}, {"step_ms", ms},
                {"tokens_per_s", tokens_per_s}, {"vs_dense", ms / dense_ms}, {"validation_loss", loss.item<double>()},
                {"dropped_share", dropped}, {"steps", steps}});
    headline[m.name + " step_ms"] = ms;
  }
  program.say("tokens/s: every rank's tokens per second; val_loss: over {} held-out windows per rank, nats a byte; "
              "dropped: the assignments over capacity, over all blocks and steps",
              kValidationWindows);
  workbook::BenchResult result;
  result.headline = headline;
  program.finish(result);
}

// The median seconds of `rounds` calls of `call`, each between barriers.
double median_seconds(workbook::Communicator& comm, int rounds, const std::function<void()>& call) {
  std::vector<double> seconds;
  call();  // warm-up
  for (int i = 0; i < rounds; ++i) {
    comm.barrier();
    const double started = workbook::now_seconds();
    call();
    seconds.push_back(workbook::now_seconds() - started);
  }
  torch::Tensor slowest = torch::tensor({workbook::median(seconds)}, torch::kFloat64);
  comm.all_reduce(slowest, workbook::ReduceOp::Max);  // the call ends for the group when its last rank is done
  return slowest.item<double>();
}

void measure_all_to_all(workbook::Program& program, workbook::Communicator& comm, int rounds) {
  const int p = comm.size();
  const int next = (comm.rank() + 1) % p, previous = (comm.rank() + p - 1) % p;
  // The link: exchanges between ring neighbours, both directions at once,
  // fitted as Chapter 10 fits a shaped link (fit_shaped_link: α from the
  // smallest message, β from 256 KiB up). One line through every size
  // (fit_link) found a negative α on the emulated link, whose shaper lets a
  // burst through, and an α ten times the smallest message's on one machine.
  std::vector<ch10::Timing> timings;
  for (const int64_t bytes : {int64_t{8}, int64_t{256} << 10, int64_t{1} << 20, int64_t{4} << 20}) {
    const torch::Tensor out = torch::zeros({bytes / 4}, torch::kFloat32);
    torch::Tensor in = torch::empty_like(out);
    timings.push_back({bytes, median_seconds(comm, rounds, [&] { comm.exchange(out, next, in, previous); })});
  }
  const ch10::Link link = ch10::fit_shaped_link(timings);
  const double alpha = link.alpha_s, beta = link.beta_s_per_byte;
  workbook::JsonLines& json = program.json();
  program.say("ch13_bench --measure all_to_all: {} rank(s); α = {:.1f} µs, β = {:.3f} ns a byte ({:.2f} Gbit/s), "
              "fitted from exchanges between neighbours; medians of {} rounds",
              p, 1e6 * alpha, 1e9 * beta, beta > 0 ? 8e-9 / beta : 0.0, rounds);
  workbook::Table table({{"variant", 9}, {"bytes", 9}, {"ms", 8}, {"predicted", 9}, {"measured/pred", 13}});
  program.say("{}", table.header());
  nlohmann::json headline = {{"measure", "all_to_all"}};
  for (const int64_t bytes : {int64_t{4} << 10, int64_t{64} << 10, int64_t{1} << 20, int64_t{8} << 20}) {
    const int64_t per_peer = bytes / 4 / p;  // float32 elements for each rank
    const torch::Tensor send = torch::randn({per_peer * p});
    const std::vector<int64_t> counts(p, per_peer);
    torch::Tensor recv = torch::empty_like(send);
    const ch10::Cost cost = ch13::all_to_all_cost(per_peer * 4 * p, p);  // ex13.1's
    const double predicted = cost.seconds(link);
    for (const std::string variant : {"library", "pairs"}) {
      const double seconds = median_seconds(comm, rounds, [&] {
        if (variant == "library") comm.all_to_all(send, counts, recv, counts);
        else ch13::all_to_all_from_pairs(send, counts, comm);
      });
      program.say("{}", table.row({variant, fmt::format("{}", bytes), fmt::format("{:.3f}", 1e3 * seconds),
                                   fmt::format("{:.3f}", 1e3 * predicted),
                                   fmt::format("{:.2f}x", seconds / predicted)}));
      json.write({{"type", "row"}, {"measure", "all_to_all"}, {"variant", variant}, {"bytes", bytes}, {"ranks", p},
                  {"ms", 1e3 * seconds}, {"predicted_ms", 1e3 * predicted}, {"vs_predicted", seconds / predicted},
                  {"alpha_us", 1e6 * alpha}, {"beta_ns_per_byte", 1e9 * beta}});
      headline[fmt::format("{} {} ms", variant, bytes)] = 1e3 * seconds;
    }
  }
  program.say("bytes: what each rank sends in all, bytes/p to each rank (itself included); predicted: "
              "all_to_all_cost (ex13.1) on the fitted link");
  workbook::BenchResult result;
  result.headline = headline;
  program.finish(result);
}

void measure_kept(workbook::Program& program, workbook::Communicator& comm) {
  ch13::AxesWorkload workload;
  workload.gpt.context = 1024;
  workbook::JsonLines& json = program.json();
  program.say("ch13_bench --measure kept: GPT ({} blocks of {}, {} heads), one sequence of {} positions split over cp "
              "ranks; each rank's T/cp positions through workbook::Gpt and its loss, counted from the tensors",
              workload.gpt.layers, workload.gpt.width, workload.gpt.heads, workload.gpt.context);
  workbook::Table table({{"cp", 4}, {"positions", 9}, {"counted MiB", 11}, {"planned MiB", 11}, {"planned/counted", 15}});
  program.say("{}", table.header());
  nlohmann::json headline = {{"measure", "kept"}};
  for (const int cp : {1, 2, 4}) {
    workbook::GptOptions options = workload.gpt;
    options.context = workload.gpt.context / cp;
    torch::manual_seed(program.flags().seed);
    workbook::Gpt gpt(options);
    const torch::Tensor bytes = torch::randint(0, options.vocabulary, {1, options.context});
    const int64_t before = workbook::tensor_bytes(torch::kCPU).current;
    torch::Tensor loss = torch::nn::functional::cross_entropy(gpt->forward(bytes).flatten(0, 1), bytes.flatten());
    const double counted = static_cast<double>(workbook::tensor_bytes(torch::kCPU).current - before) / (1 << 20);
    loss.backward();
    const double planned = static_cast<double>(ch13::plan_axes(workload, {cp, 1}).kept_bytes) / (1 << 20);
    program.say("{}", table.row({fmt::format("{}", cp), fmt::format("{}", options.context),
                                 fmt::format("{:.2f}", counted), fmt::format("{:.2f}", planned),
                                 fmt::format("{:.3f}x", planned / counted)}));
    json.write({{"type", "row"}, {"measure", "kept"}, {"variant", fmt::format("cp={}", cp)}, {"cp", cp},
                {"ranks", comm.size()}, {"counted_mib", counted}, {"planned_mib", planned},
                {"vs_counted", planned / counted}});
    headline[fmt::format("cp={} counted_mib", cp)] = counted;
  }
  workbook::BenchResult result;
  result.headline = headline;
  program.finish(result);
}

int bench(workbook::Program& program) {
  std::string measure = "models";
  int64_t steps = 60;
  int rounds = 5;
  double balance = 0.01;
  program.flags().batch = 4;
  CLI::App& cli = program.cli();
  cli.add_option("--measure", measure, "models, all_to_all or kept")
      ->check(CLI::IsMember({"models", "all_to_all", "kept"}));
  cli.add_option("--steps", steps, "training steps per model (models)")->check(CLI::Range(int64_t{3}, int64_t{100000}));
  cli.add_option("--rounds", rounds, "timed calls per size (all_to_all)")->check(CLI::PositiveNumber);
  cli.add_option("--balance", balance, "the balancing loss's weight (models)")->check(CLI::NonNegativeNumber);
  program.parse();
  if (measure == "models") ch13::MoeOptions{}.check(program.ranks());  // says when 8 experts do not split
  workbook::Communicator& comm = program.connect();
  if (measure == "models") compare_models(program, comm, steps, balance);
  else if (measure == "all_to_all") measure_all_to_all(program, comm, rounds);
  else measure_kept(program, comm);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(
      argc, argv, {"ch13_bench", "Chapter 13: experts against a dense model, and the all-to-all against α–β"}, bench);
}
