// main_train.cpp — ch05_train: FashionCNN trained by Chapter 3's DDP with
// per-rank BatchNorm ("local"), with SyncBatchNorm ("sync"), or both side by
// side on the same batches ("both", what `workbook bench ch05` runs).
//
//   mpirun -n 2 ch05_train [--norm local|sync|both] [--epochs 1] [--batch 64] [--lr 1e-3]
//                          [--threads N] [--train-samples N] [--data DIR] [--json FILE]
//   workbook run ch05 --ranks 2 [--solution] -- ARGS
//
// --batch is the global batch (each rank trains on batch / ranks samples).
// With --norm both, two models start from the same weights and take turns:
// each step of the global batch is taken by the local-BatchNorm model, then by
// the SyncBatchNorm one, each timed on its own. A busy spell of the machine
// hits both alike, and the ratio of their median step times is the cost of
// synchronizing: syncbn_overhead = sync / local − 1.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "ddp.hpp"  // Chapter 3's reference: broadcast_model, DistributedSampler, ddp_train_step, evaluate_distributed
#include "sync_bn.hpp"
#include "workbook/errors.hpp"
#include "workbook/memory.hpp"
#include "workbook/program.hpp"
#include "workbook/seeds.hpp"
#include "workbook/statistics.hpp"
#include "workbook/timing.hpp"

namespace {

constexpr int64_t kWarmupSteps = 5;  // untimed steps at the start of the run
constexpr int64_t kEvalBatch = 1000;

// One model being trained, and what it has measured.
struct Variant {
  std::string name;  // "ddp" or "ddp+syncbn"
  std::shared_ptr<workbook::FashionCNN> model;
  std::unique_ptr<torch::optim::Adam> optimizer;
  std::vector<double> step_seconds;  // timed steps only
  size_t epoch_first_timed = 0;      // where this epoch's steps begin in step_seconds
  double train_seconds = 0.0;        // every step, warm-up included
  double loss_sum = 0.0, loss_count = 0.0;
  ch03::EvalResult eval;
};

int train(workbook::Program& program) {
  program.flags().batch = 64;
  std::string norm = "sync";
  program.cli()
      .add_option("--norm", norm, "BatchNorm statistics: local (per rank), sync (over all ranks), or both side by side")
      ->check(CLI::IsMember({"local", "sync", "both"}))
      ->capture_default_str();
  const workbook::TrainFlags& flags = program.parse();
  const int ranks = program.ranks();
  const int64_t local_batch = program.local_batch(flags.batch);  // --batch is the global batch
  WB_CHECK(flags.train_samples < 0 || flags.train_samples >= flags.batch,
           "--train-samples {} is less than one global batch (--batch {})", flags.train_samples, flags.batch);

  workbook::Communicator& comm = program.connect();
  const torch::Device device = comm.device();
  const workbook::FashionMnist data = program.load_data();

  // Every variant starts from rank 0's weights.
  torch::manual_seed(workbook::initial_weights_seed(flags.seed, comm.rank()));
  auto initial = std::make_shared<workbook::FashionCNN>();
  initial->to(device);
  ch03::broadcast_model(*initial, comm, 0);
  std::vector<Variant> variants;
  for (const std::string& kind : {std::string("local"), std::string("sync")}) {
    if (norm != kind && norm != "both") continue;
    Variant v;
    v.name = kind == "local" ? "ddp" : "ddp+syncbn";
    v.model = std::make_shared<workbook::FashionCNN>();
    v.model->to(device);
    workbook::copy_state(*initial, *v.model);
    if (kind == "sync") ch05::convert_sync_batchnorm(*v.model, comm);
    v.optimizer = std::make_unique<torch::optim::Adam>(v.model->parameters(), torch::optim::AdamOptions(flags.lr));
    variants.push_back(std::move(v));
  }

  ch03::DistributedSampler sampler(data.train.size(), ranks, comm.rank(), /*shuffle=*/true, flags.seed);
  const int64_t steps_per_epoch = sampler.num_samples() / local_batch;  // whole batches only: BatchNorm needs them
  WB_CHECK(steps_per_epoch * flags.epochs > kWarmupSteps,
           "{} step(s) are too few to time ({} are warm-up): raise --train-samples or --epochs",
           steps_per_epoch * flags.epochs, kWarmupSteps);
  workbook::JsonLines& json = program.json();
  program.say("ch05_train: FashionCNN, {} rank(s) ({}), global batch {} = {} x {}, {} train / {} test samples, "
              "Adam lr {}, device {}, {} thread(s) per rank, BatchNorm: {}",
              ranks, program.env().launcher, flags.batch, ranks, local_batch, data.train.size(), data.test.size(),
              flags.lr, device.str(), flags.threads, norm);
  workbook::Table table({{"epoch", 5}, {"variant", 10}, {"train_loss", 10}, {"test_acc", 8}, {"step_ms", 8},
                         {"train_s", 8}, {"peak_mem", 10}});
  program.say("{}", table.header());

  int64_t step_number = 0;
  for (int64_t epoch = 1; epoch <= flags.epochs; ++epoch) {
    sampler.set_epoch(epoch);
    const torch::Tensor indices = sampler.indices();
    for (Variant& v : variants) {
      v.loss_sum = v.loss_count = 0.0;
      v.epoch_first_timed = v.step_seconds.size();
    }
    for (int64_t step = 0; step < steps_per_epoch; ++step, ++step_number) {
      const ch03::Batch batch =
          ch03::gather_batch(data.train.images, data.train.labels, indices, step * local_batch, local_batch);
      // The same batch for each, one after the other, taking turns at going
      // first: whatever running first or second costs falls on both alike.
      for (size_t turn = 0; turn < variants.size(); ++turn) {
        Variant& v = variants[(turn + static_cast<size_t>(step_number)) % variants.size()];
        workbook::Stopwatch clock(device);
        clock.start();
        const torch::Tensor loss = ch03::ddp_train_step(*v.model, *v.optimizer, batch, comm);
        const double seconds = clock.stop();
        v.train_seconds += seconds;
        if (step_number >= kWarmupSteps) v.step_seconds.push_back(seconds);
        v.loss_sum += loss.item<double>();
        v.loss_count += 1.0;
      }
    }
    for (Variant& v : variants) {
      torch::Tensor loss_sums = torch::tensor({v.loss_sum, v.loss_count}, torch::kFloat64).to(device);
      comm.all_reduce(loss_sums, workbook::ReduceOp::Sum);  // the training loss over every rank's batches
      const double train_loss = loss_sums[0].item<double>() / loss_sums[1].item<double>();
      // Per-rank BatchNorm leaves each rank its own running statistics:
      // evaluate rank 0's (SyncBatchNorm's are the same on every rank).
      ch03::broadcast_model(*v.model, comm, 0);
      v.eval = ch03::evaluate_distributed(*v.model, data.test.images, data.test.labels, kEvalBatch, comm);
      const std::vector<double> epoch_steps(v.step_seconds.begin() + static_cast<std::ptrdiff_t>(v.epoch_first_timed),
                                            v.step_seconds.end());
      const double step_ms = epoch_steps.empty() ? 0.0 : 1e3 * workbook::median(epoch_steps);  // this epoch's
      program.say("{}", table.row({fmt::format("{}", epoch), v.name, fmt::format("{:.4f}", train_loss),
                                   fmt::format("{:.4f}", v.eval.accuracy()), fmt::format("{:.2f}", step_ms),
                                   fmt::format("{:.1f}", v.train_seconds),
                                   workbook::format_bytes(workbook::peak_memory_bytes(device))}));
      json.write({{"type", "epoch"}, {"chapter", "ch05"}, {"variant", v.name}, {"epoch", epoch},
                  {"train_loss", train_loss}, {"test_accuracy", v.eval.accuracy()},
                  {"step_ms", step_ms}});
    }
  }
  // Rank 0's medians: the collectives in every step keep the ranks in step.
  const double local_ms = 1e3 * workbook::median(variants.front().step_seconds);
  const double last_ms = 1e3 * workbook::median(variants.back().step_seconds);
  const bool side_by_side = variants.size() == 2;
  const double overhead = side_by_side ? last_ms / local_ms - 1.0 : 0.0;  // SyncBatchNorm's cost
  const int64_t peak = workbook::largest_peak_memory_bytes(comm);  // what one rank needs
  for (const Variant& v : variants) {
    nlohmann::json row = {{"type", "row"}, {"variant", v.name}, {"ranks", ranks}, {"per_rank_batch", local_batch},
                          {"step_ms", 1e3 * workbook::median(v.step_seconds)}, {"test_acc", v.eval.accuracy()},
                          {"train_s", v.train_seconds}};
    if (side_by_side && v.name == "ddp+syncbn") row["syncbn_overhead"] = overhead;
    json.write(row);
  }
  const Variant& last = variants.back();
  // Throughput as the other chapters measure it: every timed step's samples
  // over their total time (the median above is for comparing the variants).
  const double timed_seconds = std::accumulate(last.step_seconds.begin(), last.step_seconds.end(), 0.0);
  const double samples_per_s =
      static_cast<double>(flags.batch) * static_cast<double>(last.step_seconds.size()) / timed_seconds;
  workbook::RunResult result;
  result.config = norm == "both"    ? "DDP and DDP + SyncBatchNorm, side by side"
                  : norm == "local" ? "DDP, per-rank BatchNorm"
                                    : "DDP + SyncBatchNorm";
  result.epochs = flags.epochs;
  result.batch = flags.batch;
  result.local_batch = local_batch;
  result.train_samples = data.train.size();
  result.test_accuracy = last.eval.accuracy();
  result.test_loss = last.eval.mean_loss;
  result.samples_per_s = samples_per_s;
  // this variant's training steps per epoch (evaluation, and the other variant, excluded)
  result.epoch_s = last.train_seconds / static_cast<double>(flags.epochs);
  result.peak_mem_bytes = peak;  // with --norm both: both models and optimizers
  result.details = {{"norm", norm}, {"step_ms", last_ms}};
  if (side_by_side) {
    result.details["local_test_accuracy"] = variants.front().eval.accuracy();
    result.details["syncbn_overhead"] = overhead;
  }
  result.summary = fmt::format("result: {} test accuracy {:.4f}, {:.2f} ms per step (median), {:.1f} samples/s over "
                               "{} rank(s)", last.name, last.eval.accuracy(), last_ms, samples_per_s, ranks);
  program.finish(result);
  if (side_by_side)
    program.say("syncbn_overhead = {:.2f} / {:.2f} - 1 = {:+.3f} (median step times, same run, same batches); "
                "test accuracy {:.4f} with per-rank BatchNorm, {:.4f} with SyncBatchNorm",
                last_ms, local_ms, overhead, variants.front().eval.accuracy(), last.eval.accuracy());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::program_main(
      argc, argv, {"ch05_train", "Chapter 5: FashionCNN by DDP with per-rank BatchNorm or SyncBatchNorm"}, train);
}
