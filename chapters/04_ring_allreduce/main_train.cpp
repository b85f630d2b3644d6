// main_train.cpp — ch04_train: FashionCNN trained by Chapter 3's DDP with the
// gradients averaged by this chapter's BucketReducer: buckets filled by
// gradient hooks, each all-reduced by the ring (ex4.3) on a communication
// thread while backward goes on (ex4.5).
//
//   mpirun -n 2 ch04_train [--epochs 1] [--batch 100] [--lr 1e-3] [--device cpu|cuda]
//                          [--threads N] [--train-samples N] [--data DIR] [--json FILE]
//                          [--reducer overlap|after-backward] [--comm-timeout S]
//   workbook run ch04 --ranks 2 [--solution] --program ch04_train -- ARGS
//
// --batch is the global batch (each rank trains on batch / ranks samples per
// step). The sampler, the batches, the broadcast and the evaluation are
// Chapter 3's reference; only the averaging differs from ch03_train. Rank 0
// prints a row per epoch and writes the JSON lines; the last is the result.
#include <fmt/format.h>

#include "ddp.hpp"  // Chapter 3's reference: broadcast_model, DistributedSampler, gather_batch, evaluate_distributed
#include "reducer.hpp"
#include "workbook/epoch_meter.hpp"
#include "workbook/program.hpp"
#include "workbook/seeds.hpp"
#include "workbook/trace.hpp"
#include "workbook/weights_hash.hpp"

namespace {

namespace trace = workbook::trace;  // --trace: the timeline (trace.hpp)

constexpr int64_t kWarmupSteps = 5;  // untimed steps at the start of the run
constexpr int64_t kEvalBatch = 1000;

int train(workbook::Program& program) {
  std::string reducer_mode = "overlap";
  program.cli()
      .add_option("--reducer", reducer_mode,
                  "overlap: each bucket reduced as soon as backward fills it; after-backward: every bucket after "
                  "backward")
      ->check(CLI::IsMember({"overlap", "after-backward"}))
      ->capture_default_str();
  const workbook::TrainFlags& flags = program.parse();
  const int64_t local_batch = program.local_batch(flags.batch);  // --batch is the global batch

  workbook::Communicator& comm = program.connect();
  const torch::Device device = comm.device();
  const workbook::FashionMnist data = program.load_data();
  torch::manual_seed(workbook::initial_weights_seed(flags.seed, comm.rank()));
  auto model = std::make_shared<workbook::FashionCNN>();
  model->to(device);
  ch03::broadcast_model(*model, comm, 0);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(flags.lr));
  // DDP's bucket sizes (1 MiB first, 25 MiB cap): FashionCNN's 5.6 MiB of
  // gradients make two buckets, the first launched while backward is still
  // in the convolutions.
  ch04::ReducerOptions reducer_options;
  reducer_options.overlap = reducer_mode == "overlap";
  ch04::BucketReducer reducer(model->parameters(), comm, reducer_options);

  ch03::DistributedSampler sampler(data.train.size(), program.ranks(), comm.rank(), /*shuffle=*/true, flags.seed);
  const int64_t steps_per_epoch = (sampler.num_samples() + local_batch - 1) / local_batch;
  program.say("ch04_train: FashionCNN, {} rank(s) ({}), global batch {} = {} x {}, {} train / {} test samples, "
              "Adam lr {}, device {}, {} thread(s) per rank, gradients: ring all-reduce in {} bucket(s), {}",
              program.ranks(), program.env().launcher, flags.batch, program.ranks(), local_batch, data.train.size(),
              data.test.size(), flags.lr, device.str(), flags.threads, reducer.buckets().size(),
              reducer_options.overlap ? "overlapped with backward" : "after backward");

  workbook::EpochMeter meter(program, kWarmupSteps);
  ch03::EvalResult eval;
  for (int64_t epoch = 1; epoch <= flags.epochs; ++epoch) {
    sampler.set_epoch(epoch);
    // Dropout's masks drawn as ch03_train draws them: the two programs then
    // differ only in how the gradients are summed (the ring's order of
    // additions), and their losses agree to rounding.
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
      // Note: [one step with a BucketReducer] in reducer.hpp.
      optimizer.zero_grad();
      trace::Span forward(trace::Kind::Compute, "forward");
      const torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(batch.images), batch.labels);
      forward.end();
      trace::Span backward(trace::Kind::Compute, "backward");
      loss.backward();  // the hooks fill the buckets and launch them
      backward.end();
      trace::Span finishing(trace::Kind::Communication, "reducer.finish()");
      reducer.finish();  // waits for the buckets, then writes the averages into .grad
      finishing.end();
      trace::Span stepping(trace::Kind::Optimizer, "optimizer step");
      optimizer.step();
      stepping.end();
      meter.after_step(loss, batch.labels.size(0));
    }
    const workbook::EpochTotals totals = meter.end_epoch();  // the reducer is idle between steps
    ch03::broadcast_model(*model, comm, 0);                   // rank 0's BatchNorm running statistics
    eval = ch03::evaluate_distributed(*model, data.test.images, data.test.labels, kEvalBatch, comm);
    meter.report(totals, eval.mean_loss, eval.accuracy());
  }

  workbook::RunResult result = meter.result("DDP, ring all-reduce, " + reducer_mode);
  result.train_samples = data.train.size();
  result.evaluated(eval.accuracy(), eval.mean_loss, eval.correct, eval.total);
  result.weights_sha256 = workbook::weights_sha256(*model);  // equal to ch03_train's at 2 ranks
  result.details = {{"reducer", reducer_mode}, {"buckets", reducer.buckets().size()}};
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(
      argc, argv,
      {"ch04_train", "Chapter 4: train FashionCNN by DDP, gradients averaged by the ring in overlapped buckets"},
      train);
}
