// main_train.cpp — ch08_train: FashionCNN with its model split between the
// ranks. --layout tensor: fc1 and fc2 split by tensor parallelism (ex8.1 to
// ex8.4), every rank stepping the same global batch.
//
//   mpirun -n 2 ch08_train [--layout tensor] [--epochs 1] [--batch 100] [--lr 1e-3]
//                          [--threads N] [--train-samples N] [--data DIR] [--json FILE] [--trace FILE]
//   workbook run ch08 --ranks 2 [--solution] -- ARGS
//
// Unlike Chapters 3 to 7, the ranks do not take different samples: each holds
// part of the model, and all of them compute every sample of the batch.
// samples_per_s counts each sample once.
#include <fmt/format.h>

#include "ddp.hpp"  // Chapter 3's reference: DistributedSampler, gather_batch
#include "tensor_parallel.hpp"
#include "workbook/epoch_meter.hpp"
#include "workbook/errors.hpp"
#include "workbook/program.hpp"
#include "workbook/seeds.hpp"
#include "workbook/trace.hpp"

namespace {

namespace trace = workbook::trace;  // --trace: the timeline (trace.hpp)

constexpr int64_t kWarmupSteps = 5;  // untimed steps at the start of the run
constexpr int64_t kEvalBatch = 1000;
constexpr int64_t kHiddenFeatures = 600;  // FashionCNN's fc1 outputs: what tensor parallelism splits

struct Evaluation {
  double accuracy = 0.0, mean_loss = 0.0;
  int64_t correct = 0, total = 0;
};

// Every rank evaluates every test sample: the ranks of a tensor-parallel
// model must call forward on the same batches, or f and g would add up parts
// of different samples.
Evaluation evaluate(ch08::TensorParallelFashionCNN& model, const workbook::Dataset& test) {
  torch::NoGradGuard no_grad;
  model.eval();
  Evaluation e;
  double loss_sum = 0.0;
  for (int64_t first = 0; first < test.size(); first += kEvalBatch) {
    const int64_t count = std::min(kEvalBatch, test.size() - first);
    const torch::Tensor logits = model.forward(test.images.narrow(0, first, count));
    const torch::Tensor labels = test.labels.narrow(0, first, count);
    loss_sum += torch::nn::functional::cross_entropy(
                    logits, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .item<double>();
    e.correct += logits.argmax(1).eq(labels).sum().item<int64_t>();
  }
  model.train();
  e.total = test.size();
  e.accuracy = static_cast<double>(e.correct) / static_cast<double>(e.total);
  e.mean_loss = loss_sum / static_cast<double>(e.total);
  return e;
}

int train(workbook::Program& program) {
  std::string layout = "tensor";
  program.cli()
      .add_option("--layout", layout, "how the model is split: tensor (fc1 and fc2 over every rank)")
      ->check(CLI::IsMember({"tensor"}))
      ->capture_default_str();
  const workbook::TrainFlags& flags = program.parse();
  const int ranks = program.ranks();
  WB_CHECK(ranks <= kHiddenFeatures, "--layout tensor splits fc1's {} features over the ranks: {} ranks are too many",
           kHiddenFeatures, ranks);
  WB_CHECK(flags.train_samples < 0 || flags.train_samples >= flags.batch,
           "--train-samples {} is less than one batch (--batch {})", flags.train_samples, flags.batch);

  workbook::Communicator& comm = program.connect();
  const torch::Device device = comm.device();
  const workbook::FashionMnist data = program.load_data();

  // Every rank builds the same whole model from the same seed, then keeps its part.
  torch::manual_seed(workbook::initial_weights_seed(flags.seed, 0));
  workbook::FashionCNN full;
  full.to(device);
  auto model = std::make_shared<ch08::TensorParallelFashionCNN>(full, comm, 0.25, flags.seed);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(flags.lr));
  const int64_t held = workbook::count_parameters(*model);

  // One order of the samples for every rank: a sampler of one replica.
  ch03::DistributedSampler sampler(data.train.size(), 1, 0, /*shuffle=*/true, flags.seed);
  const int64_t steps_per_epoch = (sampler.num_samples() + flags.batch - 1) / flags.batch;
  program.say("ch08_train: FashionCNN, {} rank(s) ({}), layout {}: fc1 and fc2 split, {} of {} parameters on rank 0, "
              "batch {} on every rank, {} train / {} test samples, Adam lr {}, device {}, {} thread(s) per rank",
              ranks, program.env().launcher, layout, held, workbook::count_parameters(full), flags.batch,
              data.train.size(), data.test.size(), flags.lr, device.str(), flags.threads);

  workbook::EpochMeter meter(program, kWarmupSteps, /*data_parallel_ranks=*/1);
  Evaluation eval;
  for (int64_t epoch = 1; epoch <= flags.epochs; ++epoch) {
    sampler.set_epoch(epoch);
    const torch::Tensor indices = sampler.indices();
    meter.begin_epoch(epoch, steps_per_epoch);
    for (int64_t step = 0; step < steps_per_epoch; ++step) {
      meter.before_step(step);
      const int64_t first = step * flags.batch;
      trace::Span loading(trace::Kind::Data, "batch");
      const ch03::Batch batch = ch03::gather_batch(data.train.images, data.train.labels, indices, first,
                                                   std::min(flags.batch, sampler.num_samples() - first));
      loading.end();
      // On the timeline: fc2's all-reduce inside forward, fc1's inside backward.
      trace::Span training(trace::Kind::Compute, "train step: forward, backward, Adam");
      optimizer.zero_grad();
      const torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(batch.images), batch.labels);
      loss.backward();
      optimizer.step();
      training.end();
      meter.after_step(loss, batch.labels.size(0));
    }
    const workbook::EpochTotals totals = meter.end_epoch();
    eval = evaluate(*model, data.test);
    meter.report(totals, eval.mean_loss, eval.accuracy);
  }
  workbook::RunResult result = meter.result(fmt::format("tensor parallel over {} rank(s)", ranks));
  result.train_samples = data.train.size();
  result.evaluated(eval.accuracy, eval.mean_loss, eval.correct, eval.total);
  result.details = {{"layout", layout}, {"parameters_on_rank_0", held},
                    {"parameters_in_model", workbook::count_parameters(full)}};
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(
      argc, argv, {"ch08_train", "Chapter 8: FashionCNN with its model split between the ranks (tensor parallelism)"},
      train);
}
