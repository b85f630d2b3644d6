// main_train.cpp — ch07_train: FashionCNN trained by sharded data parallel,
// ZeRO stage 0 (Chapter 3's DDP), 1, 2 or 3, one process per rank.
//
//   mpirun -n 2 ch07_train [--stage 0|1|2|3] [--optimizer adam|lamb] [--clip-grad-norm X] [--epochs 1] [--batch 100]
//                          [--lr 1e-3] [--threads N] [--train-samples N] [--data DIR] [--json FILE]
//                          [--checkpoint FILE [--resume]] [--comm-timeout S] [--check-collectives]
//   workbook run ch07 --ranks 2 [--solution] -- ARGS
//
// --batch is the global batch. The sampler, the batches, the broadcast and
// the evaluation are Chapter 3's reference; only the step differs. Besides
// the standard result, the result line's details say what one rank holds,
// counted from the tensors after the last step: parameter_bytes,
// gradient_bytes, optimizer_state_bytes, and peak_parameter_bytes (stage 3:
// the shards plus the layers gathered at the time); and what each rank sent
// per step, as a ring would (elements_sent_per_step). With --checkpoint,
// the model and the consolidated optimizer state are saved after every epoch
// (Note [a checkpoint of shards is a checkpoint of DDP]): --resume continues
// from it at any stage and any number of ranks.
#include <fmt/format.h>

#include "ddp.hpp"
#include "sharding.hpp"
#include "workbook/epoch_meter.hpp"
#include "workbook/errors.hpp"
#include "workbook/memory.hpp"
#include "workbook/program.hpp"
#include "workbook/trace.hpp"
#include "workbook/seeds.hpp"
#include "workbook/weights_hash.hpp"

namespace {

namespace trace = workbook::trace;  // --trace: the timeline (trace.hpp)

constexpr int64_t kWarmupSteps = 5;
constexpr int64_t kEvalBatch = 1000;

int train(workbook::Program& program) {
  int stage = 1;
  std::string optimizer_name = "adam";
  program.cli().add_option("--stage", stage,
                           "0: DDP (Chapter 3), 1: optimizer state sharded, 2: gradients too, 3: parameters too")
      ->check(CLI::IsMember({0, 1, 2, 3}))
      ->capture_default_str();
  program.cli().add_option("--optimizer", optimizer_name, "adam (LibTorch's) or lamb (Chapter 6's)")
      ->check(CLI::IsMember({"adam", "lamb"}))
      ->capture_default_str();
  ch07::ShardingOptions options;
  program.cli().add_option("--clip-grad-norm", options.max_grad_norm,
                           "clip the averaged gradients to this global norm before every step (0: off)")
      ->check(CLI::NonNegativeNumber);
  std::optional<std::filesystem::path> checkpoint;
  bool resume = false;
  program.cli().add_option("--checkpoint", checkpoint, "save model and optimizer here after every epoch (consolidated)");
  program.cli().add_flag("--resume", resume, "continue from --checkpoint when it exists (any stage, any ranks)");
  const workbook::TrainFlags& flags = program.parse();
  const int64_t local_batch = program.local_batch(flags.batch);
  WB_CHECK(!resume || checkpoint, "--resume needs --checkpoint FILE");

  workbook::Communicator& comm = program.connect();
  const workbook::FashionMnist data = program.load_data();
  torch::manual_seed(workbook::initial_weights_seed(flags.seed, comm.rank()));
  auto model = std::make_shared<workbook::FashionCNN>();
  model->to(comm.device());
  ch03::broadcast_model(*model, comm, 0);
  const ch07::MakeOptimizer make_optimizer =
      optimizer_name == "adam" ? ch07::adam(flags.lr) : ch07::lamb(comm, flags.lr);
  const std::unique_ptr<ch07::Sharding> sharding = ch07::make_sharding(stage, *model, comm, make_optimizer, options);
  int64_t epochs_done = 0;
  // Loading is collective (stage 3 gathers its layers): rank 0 decides for all.
  torch::Tensor resuming = torch::full({1}, resume && std::filesystem::exists(*checkpoint) ? 1 : 0,
                                       torch::TensorOptions().dtype(torch::kInt64).device(comm.device()));
  comm.broadcast(resuming, 0);
  if (resuming.item<int64_t>() == 1) {
    epochs_done = ch07::load_checkpoint(*checkpoint, *model, *sharding, make_optimizer, comm);
    WB_CHECK(epochs_done <= flags.epochs, "{} holds {} epochs, more than --epochs {}", checkpoint->string(),
             epochs_done, flags.epochs);
  }

  ch03::DistributedSampler sampler(data.train.size(), program.ranks(), comm.rank(), /*shuffle=*/true, flags.seed);
  const int64_t steps_per_epoch = (sampler.num_samples() + local_batch - 1) / local_batch;
  program.say("ch07_train: FashionCNN, {} rank(s) ({}), ZeRO stage {}, {} lr {}, global batch {} = {} x {}, "
              "{} train / {} test samples, device {}, {} thread(s) per rank{}{}",
              program.ranks(), program.env().launcher, stage, optimizer_name, flags.lr, flags.batch,
              program.ranks(), local_batch, data.train.size(), data.test.size(), comm.device().str(), flags.threads,
              options.max_grad_norm > 0 ? fmt::format(", gradients clipped to norm {}", options.max_grad_norm) : "",
              epochs_done > 0 ? fmt::format(", resumed after epoch {}", epochs_done) : "");

  workbook::EpochMeter meter(program, kWarmupSteps);
  ch03::EvalResult eval;
  int64_t steps = 0, elements_sent = 0;
  for (int64_t epoch = epochs_done + 1; epoch <= flags.epochs; ++epoch) {
    sampler.set_epoch(epoch);
    torch::manual_seed(workbook::dropout_seed(flags.seed, epoch, comm.rank()));
    const torch::Tensor indices = sampler.indices();
    meter.begin_epoch(epoch, steps_per_epoch);
    for (int64_t step = 0; step < steps_per_epoch; ++step) {
      meter.before_step(step);
      const int64_t first = step * local_batch;
      trace::Span loading(trace::Kind::Data, "batch");
      const ch03::Batch batch = ch03::gather_batch(data.train.images, data.train.labels, indices, first,
                                                   std::min(local_batch, sampler.num_samples() - first));
      loading.end();
      sharding->zero_grad();
      trace::Span forward(trace::Kind::Compute, "forward");  // stage 3: each layer gathered in here
      torch::Tensor loss =
          torch::nn::functional::cross_entropy(sharding->forward(*model, batch.images), batch.labels);
      forward.end();
      const int64_t sent_before = ch07::ring_elements_sent(comm.stats(), comm.size());
      trace::Span backward(trace::Kind::Compute, "backward");
      loss.backward();  // stages 2 and 3: reduce-scatters from the hooks, in here
      backward.end();
      trace::Span stepping(trace::Kind::Optimizer, "sharded optimizer step");
      sharding->step();
      stepping.end();
      elements_sent += ch07::ring_elements_sent(comm.stats(), comm.size()) - sent_before;
      ++steps;
      meter.after_step(loss.detach(), batch.labels.size(0));
    }
    const workbook::EpochTotals totals = meter.end_epoch();
    sharding->gather_full();  // stage 3 keeps shards only: the whole model, to evaluate it
    ch03::broadcast_model(*model, comm, 0);  // BatchNorm's running statistics: rank 0's
    eval = ch03::evaluate_distributed(*model, data.test.images, data.test.labels, kEvalBatch, comm);
    sharding->release_full();
    if (checkpoint) ch07::save_checkpoint(*checkpoint, *model, *sharding, make_optimizer, epoch, comm);
    meter.report(totals, eval.mean_loss, eval.accuracy());
  }
  if (meter.epochs_trained() == 0) {  // resumed from a finished run: report what the checkpoint holds
    sharding->gather_full();
    ch03::broadcast_model(*model, comm, 0);
    eval = ch03::evaluate_distributed(*model, data.test.images, data.test.labels, kEvalBatch, comm);
    sharding->release_full();
  }

  const ch07::HeldBytes held = sharding->held();
  const int64_t peak_parameter_bytes = sharding->peak_parameter_bytes();
  sharding->gather_full();
  workbook::RunResult result = meter.result(fmt::format("ZeRO stage {}, {}", stage, optimizer_name));
  result.train_samples = data.train.size();
  result.evaluated(eval.accuracy(), eval.mean_loss, eval.correct, eval.total);
  result.weights_sha256 = workbook::weights_sha256(*model);
  result.details = {{"stage", stage},
                    {"optimizer", optimizer_name},
                    {"max_grad_norm", options.max_grad_norm},
                    {"parameter_bytes", held.parameters},
                    {"gradient_bytes", held.gradients},
                    {"optimizer_state_bytes", held.optimizer_state},
                    {"peak_parameter_bytes", peak_parameter_bytes},
                    {"elements_sent_per_step", steps > 0 ? elements_sent / steps : 0}};
  program.say("held by rank 0 after the last step: parameters {} (at most {}), gradients {}, optimizer state {}",
              workbook::format_bytes(held.parameters), workbook::format_bytes(peak_parameter_bytes),
              workbook::format_bytes(held.gradients), workbook::format_bytes(held.optimizer_state));
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(
      argc, argv, {"ch07_train", "Chapter 7: train FashionCNN with sharded data parallel (ZeRO stages 0-3)"}, train);
}
