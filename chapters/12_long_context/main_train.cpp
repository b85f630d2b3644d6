// main_train.cpp — ch12_train: Chapter 11's GPT trained with its sequences
// split over a context group (ring attention, ex12.1 to ex12.4): every rank
// holds the whole model and T/cp positions of each sequence.
//
//   mpirun -n 4 ch12_train [--context 1024] [--batch 2] [--steps 20]
//                          [--split balanced|contiguous] [--no-overlap]
//                          [--layers 4] [--width 256] [--heads 4] [--lr 3e-3] [--data DIR] [--seed 0]
//   workbook run ch12 --ranks 4 [--solution] -- ARGS
//
// Every rank draws the same batch of windows and keeps its positions of each.
#include <fmt/format.h>

#include <ATen/CPUGeneratorImpl.h>

#include "context_gpt.hpp"
#include "workbook/errors.hpp"
#include "workbook/models.hpp"  // count_parameters
#include "workbook/program.hpp"
#include "workbook/statistics.hpp"
#include "workbook/tensor_bytes.hpp"
#include "workbook/text_corpus.hpp"
#include "workbook/timing.hpp"

namespace {

constexpr int64_t kWarmupSteps = 2;         // untimed steps at the start
constexpr int64_t kValidationWindows = 4;   // held-out windows the validation loss is the mean over

// The group's mean loss over held-out windows: each rank's positions, averaged.
double validation_loss(workbook::GptImpl& gpt, const workbook::TextBatch& batch, const ch12::ContextLayout& layout,
                       workbook::Communicator& comm) {
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = ch12::context_parallel_logits(gpt, ch12::my_columns(batch.inputs, layout, comm.rank()),
                                                             layout, comm);
  torch::Tensor loss = torch::nn::functional::cross_entropy(
      logits.reshape({-1, gpt.options.vocabulary}), ch12::my_columns(batch.targets, layout, comm.rank()).reshape({-1}))
      .to(torch::kFloat64).reshape({1});
  comm.all_reduce(loss, workbook::ReduceOp::Average);
  return loss.item<double>();
}

int train(workbook::Program& program) {
  workbook::GptOptions model;
  model.context = 1024;
  std::string split_name = "balanced";
  bool no_overlap = false;
  int64_t steps = 20;
  program.flags().batch = 2;
  program.flags().lr = 3e-3;
  CLI::App& cli = program.cli();
  cli.add_option("--context", model.context, "bytes a window holds, split over the ranks")->check(CLI::PositiveNumber);
  cli.add_option("--split", split_name, "which positions each rank holds: balanced (ex12.2) or contiguous");
  cli.add_flag("--no-overlap", no_overlap, "wait for each block of keys and values before computing with it");
  cli.add_option("--layers", model.layers, "transformer blocks")->check(CLI::PositiveNumber);
  cli.add_option("--width", model.width, "the embedding's size")->check(CLI::PositiveNumber);
  cli.add_option("--heads", model.heads, "attention heads (they divide --width)")->check(CLI::PositiveNumber);
  cli.add_option("--steps", steps, "optimizer steps")->check(CLI::PositiveNumber);
  const workbook::TrainFlags& flags = program.parse();

  // Note [checks before communication] (program.hpp).
  model.check();
  const int ranks = program.ranks();
  const ch12::Split split = ch12::parse_split(split_name);
  const ch12::ContextLayout layout = ch12::make_layout(model.context, ranks, split);  // says when T does not split
  const workbook::TextCorpus corpus = workbook::load_text_corpus(workbook::find_text_corpus(flags.data));

  workbook::Communicator& comm = program.connect();
  const torch::Device device = comm.device();
  torch::manual_seed(flags.seed);
  workbook::Gpt gpt(model);
  gpt->to(device);
  const int64_t parameters = workbook::count_parameters(*gpt);
  torch::optim::AdamW optimizer(gpt->parameters(), torch::optim::AdamWOptions(flags.lr).weight_decay(0.0));
  ch12::RingOptions ring;
  ring.overlap = !no_overlap;
  const int64_t held = model.context / ranks;
  const int64_t pairs = ch12::causal_pairs(model.context, comm.rank(), ranks, split);
  program.say("{} ranks: sequences of {} bytes, {} held by each ({} split{}); {} parameters; {} steps of {} "
              "sequences on {}",
              ranks, model.context, held, ch12::split_name(split), no_overlap ? ", no overlap" : "", parameters, steps,
              flags.batch, device.str());

  torch::Generator windows = at::make_generator<at::CPUGeneratorImpl>(flags.seed + 1);
  std::vector<double> step_s;
  int64_t kept_for_backward = 0;
  double loss_value = 0.0;
  const double training_started = workbook::now_seconds();
  for (int64_t step = 1; step <= steps; ++step) {
    const workbook::TextBatch batch = workbook::sample_windows(corpus.train, flags.batch, model.context, windows);
    const torch::Tensor inputs = ch12::my_columns(batch.inputs, layout, comm.rank()).to(device);
    const torch::Tensor targets = ch12::my_columns(batch.targets, layout, comm.rank()).to(device);
    const double started = workbook::now_seconds();
    const int64_t bytes_before = workbook::tensor_bytes(device).current;
    const torch::Tensor loss = torch::nn::functional::cross_entropy(
        ch12::context_parallel_logits(*gpt, inputs, layout, comm, ring).reshape({-1, model.vocabulary}),
        targets.reshape({-1}));
    if (step == 1) kept_for_backward = workbook::tensor_bytes(device).current - bytes_before;
    optimizer.zero_grad();
    loss.backward();
    ch12::average_gradients(*gpt, comm);
    optimizer.step();
    torch::Tensor group_loss = loss.detach().to(torch::kFloat64).reshape({1});
    comm.all_reduce(group_loss, workbook::ReduceOp::Average);
    loss_value = group_loss.item<double>();
    if (step > kWarmupSteps) step_s.push_back(workbook::now_seconds() - started);
    WB_CHECK(std::isfinite(loss_value), "the loss is {} at step {}: the run diverged (a smaller --lr?)", loss_value,
             step);
    if (step % 10 == 0 || step == steps) program.say("step {:>5}  loss {:.4f}", step, loss_value);
  }
  const double training_s = workbook::now_seconds() - training_started;
  program.json().write({{"type", "epoch"}, {"epoch", 1}, {"train_loss", loss_value}, {"epoch_s", training_s}});

  torch::Generator held_out = at::make_generator<at::CPUGeneratorImpl>(flags.seed + 2);
  const double validation =
      validation_loss(*gpt, workbook::sample_windows(corpus.validation, kValidationWindows, model.context, held_out),
                      layout, comm);
  // Each rank's causal work and activations, side by side (rank order).
  const torch::Tensor per_rank =
      comm.all_gather(torch::tensor({pairs, kept_for_backward}, torch::kInt64)).view({ranks, 2});
  const auto column = [&](int64_t c) {
    std::vector<int64_t> values;
    for (int r = 0; r < ranks; ++r) values.push_back(per_rank[r][c].item<int64_t>());
    return values;
  };
  const std::vector<int64_t> rank_pairs = column(0), rank_kept = column(1);
  const double imbalance = static_cast<double>(*std::max_element(rank_pairs.begin(), rank_pairs.end())) /
                           static_cast<double>(*std::min_element(rank_pairs.begin(), rank_pairs.end()));

  const double median_step_s = step_s.empty() ? 0.0 : workbook::median(step_s);
  workbook::RunResult result;
  result.config = fmt::format("GPT, context {} over {} ranks, {} split", model.context, ranks, ch12::split_name(split));
  result.epochs = 1;
  result.epoch_s = training_s;
  result.batch = flags.batch;
  result.local_batch = flags.batch;
  result.train_samples = static_cast<int64_t>(corpus.train.numel());
  result.test_loss = validation;
  result.samples_per_s = median_step_s > 0 ? flags.batch / median_step_s : 0.0;
  result.peak_mem_bytes = program.peak_memory_bytes();
  result.details = {{"context", model.context},
                    {"context_ranks", ranks},
                    {"split", ch12::split_name(split)},
                    {"overlap", !no_overlap},
                    {"steps", steps},
                    {"train_loss", loss_value},
                    {"validation_loss", validation},
                    {"step_s", median_step_s},
                    {"tokens_per_s", median_step_s > 0 ? flags.batch * model.context / median_step_s : 0.0},
                    {"parameters", parameters},
                    {"causal_pairs_per_rank", rank_pairs},
                    {"work_imbalance", imbalance},
                    {"kept_for_backward_bytes_per_rank", rank_kept}};
  result.summary = fmt::format("GPT, context {} over {} ranks ({} split): train loss {:.4f}, validation loss {:.4f}, "
                               "{:.3f} s a step (median); busiest rank's attention work {:.2f}× the idlest's; "
                               "{:.1f} MiB kept for backward on rank 0",
                               model.context, ranks, ch12::split_name(split), loss_value, validation, median_step_s,
                               imbalance, rank_kept[0] / 1048576.0);
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(
      argc, argv, {"ch12_train", "Chapter 12: a GPT whose sequences are split over a context group (ring attention)"},
      train);
}
