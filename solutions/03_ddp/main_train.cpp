// main_train.cpp — ch03_train: FashionCNN trained by hand-written DDP, one
// process per rank.
//
//   mpirun -n 2 ch03_train [--epochs 1] [--batch 100] [--lr 1e-3] [--device cpu|cuda]
//                          [--threads N] [--train-samples N] [--data DIR] [--json FILE]
//                          [--checkpoint FILE [--resume]] [--allreduce flat|per-parameter]
//                          [--comm-timeout S] [--check-collectives]
//   workbook run ch03 --ranks 2 [--solution] -- ARGS
//
// --batch is the global batch: each rank trains on batch / ranks samples per
// step. Rank 0 prints a row per epoch and writes the JSON lines; the last is
// the run's result. With --checkpoint, rank 0 saves after every epoch;
// --resume continues from it, and the final weights are bit-identical to a
// run that was never interrupted (weights_sha256 in the result says so).
// After every epoch the ranks check that they still hold one model (ex3.3),
// and stop, naming the parameters, when they do not.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "ddp.hpp"
#include "workbook/epoch_meter.hpp"
#include "workbook/errors.hpp"
#include "workbook/program.hpp"
#include "workbook/trace.hpp"
#include "workbook/seeds.hpp"
#include "workbook/weights_hash.hpp"

namespace {

namespace trace = workbook::trace;  // --trace: the timeline (trace.hpp)

constexpr int64_t kWarmupSteps = 5;  // untimed steps at the start of the first epoch trained
constexpr int64_t kEvalBatch = 1000;

// DDP's invariant, checked at the end of an epoch (ex3.3): every parameter
// the same on every rank. BatchNorm's running statistics are not (each rank
// updates them from its own batches), and the broadcast that follows settles
// them.
void check_parameters_agree(torch::nn::Module& model, workbook::Communicator& comm, int64_t epoch) {
  const auto parameters = model.named_parameters();
  std::vector<std::string> diverged;
  for (const std::string& name : ch03::replicas_disagree(model, comm))
    if (parameters.contains(name)) diverged.push_back(name);
  if (!diverged.empty())
    throw std::runtime_error(fmt::format("after epoch {} the ranks' models differ in {}: the ranks no longer train "
                                         "one model", epoch, fmt::join(diverged, ", ")));
}

int train(workbook::Program& program) {
  std::optional<std::filesystem::path> checkpoint;
  bool resume = false;
  std::string allreduce = "flat";
  program.cli().add_option("--checkpoint", checkpoint, "save model and optimizer here after every epoch (rank 0, atomically)");
  program.cli().add_flag("--resume", resume, "continue from --checkpoint when it exists");
  program.cli().add_option("--allreduce", allreduce, "gradient averaging: flat (one all-reduce) or per-parameter")
      ->check(CLI::IsMember({"flat", "per-parameter"}))
      ->capture_default_str();
  const workbook::TrainFlags& flags = program.parse();
  const int64_t local_batch = program.local_batch(flags.batch);  // --batch is the global batch
  WB_CHECK(!resume || checkpoint, "--resume needs --checkpoint FILE");

  workbook::Communicator& comm = program.connect();
  const torch::Device device = comm.device();  // on CUDA: this rank's GPU, chosen by local rank
  const workbook::FashionMnist data = program.load_data();
  torch::manual_seed(workbook::initial_weights_seed(flags.seed, comm.rank()));
  auto model = std::make_shared<workbook::FashionCNN>();
  model->to(device);
  ch03::broadcast_model(*model, comm, 0);  // the ranks' different weights become rank 0's
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(flags.lr));
  const auto average_gradients = allreduce == "flat" ? ch03::all_reduce_gradients
                                                     : ch03::all_reduce_gradients_per_parameter;

  int64_t epochs_done = 0;
  if (resume && std::filesystem::exists(*checkpoint)) {
    epochs_done = ch03::load_checkpoint(*checkpoint, *model, optimizer);
    WB_CHECK(epochs_done <= flags.epochs, "{} holds {} epochs, more than --epochs {}", checkpoint->string(),
             epochs_done, flags.epochs);
  }

  ch03::DistributedSampler sampler(data.train.size(), program.ranks(), comm.rank(), /*shuffle=*/true, flags.seed);
  const int64_t steps_per_epoch = (sampler.num_samples() + local_batch - 1) / local_batch;
  program.say("ch03_train: FashionCNN, {} rank(s) ({}), global batch {} = {} x {}, {} train / {} test samples, "
              "Adam lr {}, device {}, {} thread(s) per rank, gradients: {} all-reduce{}",
              program.ranks(), program.env().launcher, flags.batch, program.ranks(), local_batch, data.train.size(),
              data.test.size(), flags.lr, device.str(), flags.threads, allreduce,
              epochs_done > 0 ? fmt::format(", resumed after epoch {}", epochs_done) : "");
  if (sampler.total_size() > data.train.size())
    program.say("note: {} samples do not divide among {} ranks: {} are repeated each epoch (the sampler pads)",
                data.train.size(), program.ranks(), sampler.total_size() - data.train.size());

  workbook::EpochMeter meter(program, kWarmupSteps);
  ch03::EvalResult eval;
  for (int64_t epoch = epochs_done + 1; epoch <= flags.epochs; ++epoch) {
    sampler.set_epoch(epoch);
    torch::manual_seed(workbook::dropout_seed(flags.seed, epoch, comm.rank()));
    const torch::Tensor indices = sampler.indices();
    meter.begin_epoch(epoch, steps_per_epoch);
    for (int64_t step = 0; step < steps_per_epoch; ++step) {
      meter.before_step(step);
      const int64_t first = step * local_batch;
      trace::Span loading(trace::Kind::Data, "batch");
      const ch03::Batch batch =
          ch03::gather_batch(data.train.images, data.train.labels, indices, first,
                             std::min(local_batch, sampler.num_samples() - first));
      loading.end();
      // On the timeline the all-reduce lies inside: it starts when backward has ended.
      trace::Span training(trace::Kind::Compute, "train step: forward, backward, all-reduce, Adam");
      torch::Tensor loss;
      if (allreduce == "flat") {
        loss = ch03::ddp_train_step(*model, optimizer, batch, comm);
      } else {  // the same step, with the given per-parameter averaging
        optimizer.zero_grad();
        loss = torch::nn::functional::cross_entropy(model->forward(batch.images), batch.labels);
        loss.backward();
        average_gradients(*model, comm);
        optimizer.step();
      }
      training.end();
      meter.after_step(loss, batch.labels.size(0));
    }
    const workbook::EpochTotals totals = meter.end_epoch();
    check_parameters_agree(*model, comm, epoch);
    // BatchNorm's running statistics were updated from each rank's own
    // batches; evaluate (and save) rank 0's. (PyTorch's DDP broadcasts them
    // before every forward pass; once per epoch is enough for evaluation.)
    ch03::broadcast_model(*model, comm, 0);
    eval = ch03::evaluate_distributed(*model, data.test.images, data.test.labels, kEvalBatch, comm);
    if (checkpoint) ch03::save_checkpoint(*checkpoint, *model, optimizer, epoch, comm);
    meter.report(totals, eval.mean_loss, eval.accuracy());
  }
  if (meter.epochs_trained() == 0) {  // resumed from a finished run: report what the checkpoint holds
    ch03::broadcast_model(*model, comm, 0);
    eval = ch03::evaluate_distributed(*model, data.test.images, data.test.labels, kEvalBatch, comm);
  }

  workbook::RunResult result = meter.result("DDP");
  result.train_samples = data.train.size();
  result.evaluated(eval.accuracy(), eval.mean_loss, eval.correct, eval.total);
  result.weights_sha256 = workbook::weights_sha256(*model);
  result.details = {{"allreduce", allreduce}};
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(
      argc, argv, {"ch03_train", "Chapter 3: train FashionCNN with hand-written DDP (one process per rank)"}, train);
}
