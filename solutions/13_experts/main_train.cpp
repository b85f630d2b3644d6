// main_train.cpp — ch13_train: Chapter 11's GPT with a mixture of experts in
// every block, the experts spread over the ranks (expert parallelism), each
// rank training on its own windows; or, with --dense, the model with one
// MLP of the same active parameters, trained the same way.
//
//   mpirun -n 2 ch13_train [--experts 8] [--top-k 2] [--expert-hidden 512] [--capacity-factor 1.25]
//                          [--balance 0.01] [--dense] [--context 128] [--batch 4] [--steps 40]
//                          [--layers 4] [--width 256] [--heads 4] [--lr 3e-3] [--data DIR] [--seed 0]
//   workbook run ch13 --ranks 2 [--solution] -- ARGS
#include <fmt/format.h>

#include <ATen/CPUGeneratorImpl.h>

#include "moe_gpt.hpp"
#include "workbook/errors.hpp"
#include "workbook/models.hpp"  // count_parameters
#include "workbook/program.hpp"
#include "workbook/statistics.hpp"
#include "workbook/text_corpus.hpp"
#include "workbook/timing.hpp"

namespace {

constexpr int64_t kWarmupSteps = 2;        // untimed steps at the start
constexpr int64_t kValidationWindows = 8;  // held-out windows per rank

// The group's mean cross-entropy over held-out windows, each rank its own.
double validation_loss(ch13::MoeGptImpl& model, const workbook::TextBatch& batch, workbook::Communicator& comm) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss = torch::nn::functional::cross_entropy(model.forward(batch.inputs).flatten(0, 1),
                                                            batch.targets.flatten())
                           .to(torch::kFloat64).reshape({1});
  comm.all_reduce(loss, workbook::ReduceOp::Average);
  return loss.item<double>();
}

int train(workbook::Program& program) {
  ch13::MoeGptOptions model;
  model.gpt.context = 128;
  double balance = 0.01;
  int64_t steps = 40;
  program.flags().batch = 4;
  program.flags().lr = 3e-3;
  CLI::App& cli = program.cli();
  cli.add_option("--experts", model.moe.experts, "experts per block, spread evenly over the ranks")
      ->check(CLI::PositiveNumber);
  cli.add_option("--top-k", model.moe.top_k, "experts each token goes to")->check(CLI::PositiveNumber);
  cli.add_option("--expert-hidden", model.moe.hidden, "each expert's hidden units")->check(CLI::PositiveNumber);
  cli.add_option("--capacity-factor", model.moe.capacity_factor, "an expert's room over its even share")
      ->check(CLI::PositiveNumber);
  cli.add_option("--balance", balance, "the balancing loss's weight in the loss")->check(CLI::NonNegativeNumber);
  cli.add_flag("--dense", model.dense, "one MLP of top-k × expert-hidden units in place of the experts");
  cli.add_option("--context", model.gpt.context, "bytes a window holds")->check(CLI::PositiveNumber);
  cli.add_option("--layers", model.gpt.layers, "transformer blocks")->check(CLI::PositiveNumber);
  cli.add_option("--width", model.gpt.width, "the embedding's size")->check(CLI::PositiveNumber);
  cli.add_option("--heads", model.gpt.heads, "attention heads (they divide --width)")->check(CLI::PositiveNumber);
  cli.add_option("--steps", steps, "optimizer steps")->check(CLI::PositiveNumber);
  const workbook::TrainFlags& flags = program.parse();

  // Note [checks before communication] (program.hpp).
  const int ranks = program.ranks();
  model.gpt.check();
  model.moe.width = model.gpt.width;
  if (!model.dense) model.moe.check(ranks);
  const workbook::TextCorpus corpus = workbook::load_text_corpus(workbook::find_text_corpus(flags.data));

  workbook::Communicator& comm = program.connect();
  torch::manual_seed(flags.seed);  // the same replicated weights on every rank
  ch13::MoeGpt gpt(model, comm);
  const int64_t parameters = workbook::count_parameters(*gpt);
  torch::optim::AdamW optimizer(gpt->parameters(), torch::optim::AdamWOptions(flags.lr).weight_decay(0.0));
  const std::string kind = model.dense ? fmt::format("dense, MLP of {}", model.moe.top_k * model.moe.hidden)
                                       : fmt::format("{} experts of {}, top-{}", model.moe.experts,
                                                     model.moe.hidden, model.moe.top_k);
  program.say("{} ranks: {}; {} parameters on this rank; {} steps of {} windows of {} bytes per rank", ranks, kind,
              parameters, steps, flags.batch, model.gpt.context);

  // Every rank its own windows, as in data parallelism.
  torch::Generator windows = at::make_generator<at::CPUGeneratorImpl>(flags.seed + 1 + 1000 * comm.rank());
  std::vector<double> step_s;
  double loss_value = 0.0, balancing = 0.0;
  int64_t dropped = 0, assigned = 0, exchanged_bytes = 0;
  const double training_started = workbook::now_seconds();
  for (int64_t step = 1; step <= steps; ++step) {
    const workbook::TextBatch batch = workbook::sample_windows(corpus.train, flags.batch, model.gpt.context, windows);
    const double started = workbook::now_seconds();
    const int64_t bytes_before = comm.stats().bytes[static_cast<int>(workbook::CommOp::AllToAll)];
    const torch::Tensor task = torch::nn::functional::cross_entropy(gpt->forward(batch.inputs).flatten(0, 1),
                                                                    batch.targets.flatten());
    const torch::Tensor balancing_loss = gpt->balancing_loss();
    optimizer.zero_grad();
    (task + balance * balancing_loss).backward();
    ch13::average_gradients(*gpt, comm);
    optimizer.step();
    torch::Tensor group = torch::stack({task.detach(), balancing_loss.detach()}).to(torch::kFloat64);
    comm.all_reduce(group, workbook::ReduceOp::Average);
    loss_value = group[0].item<double>();
    balancing = group[1].item<double>();
    const auto [step_dropped, step_assigned] = gpt->dropped_of_assigned();
    dropped += step_dropped;
    assigned += step_assigned;
    if (step == 1) exchanged_bytes = comm.stats().bytes[static_cast<int>(workbook::CommOp::AllToAll)] - bytes_before;
    if (step > kWarmupSteps) step_s.push_back(workbook::now_seconds() - started);
    WB_CHECK(std::isfinite(loss_value), "the loss is {} at step {}: the run diverged (a smaller --lr?)", loss_value,
             step);
    if (step % 10 == 0 || step == steps)
      program.say("step {:>5}  loss {:.4f}  balancing {:.3f}  dropped {:.1f}% (rank {})", step, loss_value, balancing,
                  step_assigned ? 100.0 * step_dropped / step_assigned : 0.0, comm.rank());
  }
  const double training_s = workbook::now_seconds() - training_started;
  program.json().write({{"type", "epoch"}, {"epoch", 1}, {"train_loss", loss_value}, {"epoch_s", training_s}});

  torch::Generator held_out = at::make_generator<at::CPUGeneratorImpl>(flags.seed + 2 + 1000 * comm.rank());
  const double validation = validation_loss(
      *gpt, workbook::sample_windows(corpus.validation, kValidationWindows, model.gpt.context, held_out), comm);
  torch::Tensor drops = torch::tensor({dropped, assigned}, torch::kInt64);
  comm.all_reduce(drops, workbook::ReduceOp::Sum);
  const double dropped_share = drops[1].item<int64_t>() > 0
                                   ? static_cast<double>(drops[0].item<int64_t>()) / drops[1].item<double>()
                                   : 0.0;

  const double median_step_s = step_s.empty() ? 0.0 : workbook::median(step_s);
  const double tokens_per_s = median_step_s > 0 ? ranks * flags.batch * model.gpt.context / median_step_s : 0.0;
  workbook::RunResult result;
  result.config = fmt::format("GPT, {}, over {} ranks", kind, ranks);
  result.epochs = 1;
  result.epoch_s = training_s;
  result.batch = flags.batch * ranks;
  result.local_batch = flags.batch;
  result.train_samples = static_cast<int64_t>(corpus.train.numel());
  result.test_loss = validation;
  result.samples_per_s = median_step_s > 0 ? ranks * flags.batch / median_step_s : 0.0;
  result.peak_mem_bytes = program.peak_memory_bytes();
  result.details = {{"dense", model.dense},
                    {"experts", model.dense ? 0 : model.moe.experts},
                    {"top_k", model.moe.top_k},
                    {"expert_hidden", model.moe.hidden},
                    {"capacity_factor", model.moe.capacity_factor},
                    {"context", model.gpt.context},
                    {"steps", steps},
                    {"train_loss", loss_value},
                    {"validation_loss", validation},
                    {"balancing_loss", balancing},
                    {"dropped_share", dropped_share},
                    {"step_s", median_step_s},
                    {"tokens_per_s", tokens_per_s},
                    {"parameters_rank0", parameters},
                    {"all_to_all_bytes_first_step", exchanged_bytes}};
  result.summary = fmt::format("GPT, {} over {} ranks: train loss {:.4f}, validation loss {:.4f}, {:.0f} tokens/s "
                               "({:.3f} s a step, median); {:.1f}% of assignments dropped; balancing loss {:.3f}",
                               kind, ranks, loss_value, validation, tokens_per_s, median_step_s,
                               100.0 * dropped_share, balancing);
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(
      argc, argv, {"ch13_train", "Chapter 13: a GPT whose MLPs are experts spread over the ranks"}, train);
}
