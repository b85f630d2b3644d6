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
#include "workbook/device.hpp"
#include "workbook/errors.hpp"
#include "workbook/fashion_mnist.hpp"
#include "workbook/memory.hpp"
#include "workbook/results.hpp"
#include "workbook/timing.hpp"
#include "workbook/train_flags.hpp"
#include "workbook/weights_hash.hpp"

namespace {

constexpr int64_t kWarmupSteps = 5;  // untimed steps at the start of the run
constexpr int64_t kEvalBatch = 1000;

int train(const workbook::LaunchEnv& env, int argc, char** argv) {
  CLI::App app{"Chapter 4: train FashionCNN by DDP, gradients averaged by the ring in overlapped buckets",
               "ch04_train"};
  workbook::TrainFlags flags;
  workbook::add_train_flags(app, flags);
  workbook::CommunicatorOptions comm_options = workbook::CommunicatorOptions::from_environment();
  workbook::add_distributed_flags(app, comm_options);
  std::string reducer_mode = "overlap";
  app.add_option("--reducer", reducer_mode,
                 "overlap: each bucket reduced as soon as backward fills it; after-backward: every bucket after "
                 "backward")
      ->check(CLI::IsMember({"overlap", "after-backward"}))
      ->capture_default_str();
  flags.threads = workbook::default_threads_per_rank(env);
  workbook::parse_train_flags(app, flags, argc, argv);

  const int ranks = env.world_size;
  WB_CHECK(flags.batch % ranks == 0,
           "--batch {} is the global batch and must divide evenly among the {} ranks: use a multiple of {}",
           flags.batch, ranks, ranks);
  WB_CHECK(flags.train_samples < 0 || flags.train_samples >= ranks,
           "--train-samples {} is fewer than the {} ranks: every rank needs at least one sample",
           flags.train_samples, ranks);
  const int64_t local_batch = flags.batch / ranks;

  std::unique_ptr<workbook::Communicator> comm =
      workbook::make_communicator(workbook::backend_for(workbook::parse_device(flags.device)), env, comm_options);
  const torch::Device device = comm->device();
  const bool leader = comm->rank() == 0;
  const workbook::FashionMnist data = workbook::load_training_data(flags, device);

  torch::manual_seed(flags.seed + static_cast<uint64_t>(comm->rank()));
  auto model = std::make_shared<workbook::FashionCNN>();
  model->to(device);
  ch03::broadcast_model(*model, *comm, 0);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(flags.lr));
  // DDP's bucket sizes (1 MiB first, 25 MiB cap): FashionCNN's 5.6 MiB of
  // gradients make two buckets, the first launched while backward is still
  // in the convolutions.
  ch04::ReducerOptions reducer_options;
  reducer_options.overlap = reducer_mode == "overlap";
  ch04::BucketReducer reducer(model->parameters(), *comm, reducer_options);

  ch03::DistributedSampler sampler(data.train.size(), ranks, comm->rank(), /*shuffle=*/true, flags.seed);
  const int64_t steps_per_epoch = (sampler.num_samples() + local_batch - 1) / local_batch;
  workbook::JsonLines json(leader ? flags.json : std::nullopt);
  if (leader)
    fmt::print("ch04_train: FashionCNN, {} rank(s) ({}), global batch {} = {} x {}, {} train / {} test samples, "
               "Adam lr {}, device {}, {} thread(s) per rank, gradients: ring all-reduce in {} bucket(s), {}\n",
               ranks, env.launcher, flags.batch, ranks, local_batch, data.train.size(), data.test.size(), flags.lr,
               device.str(), flags.threads, reducer.buckets().size(),
               reducer_options.overlap ? "overlapped with backward" : "after backward");
  workbook::Table table({{"epoch", 5}, {"train_loss", 10}, {"test_loss", 9}, {"test_acc", 8}, {"epoch_s", 8},
                         {"samples/s", 10}, {"peak_mem", 10}});
  if (leader) fmt::print("{}\n", table.header());

  double epoch_seconds_sum = 0.0, timed_seconds = 0.0;
  int64_t timed_samples = 0;
  ch03::EvalResult eval;
  for (int64_t epoch = 1; epoch <= flags.epochs; ++epoch) {
    sampler.set_epoch(epoch);
    // Dropout's masks drawn as ch03_train draws them: the two programs then
    // differ only in how the gradients are summed (the ring's order of
    // additions), and their losses agree to rounding.
    torch::manual_seed(flags.seed * 1000003 + static_cast<uint64_t>(epoch) * 1009 + static_cast<uint64_t>(comm->rank()));
    const torch::Tensor indices = sampler.indices();
    const int64_t warmup = epoch == 1 ? std::min(kWarmupSteps, steps_per_epoch - 1) : 0;
    torch::Tensor loss_sum = torch::zeros({2}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
    workbook::Stopwatch clock(device);
    const double started = workbook::now_seconds();
    int64_t epoch_timed_samples = 0;
    for (int64_t step = 0; step < steps_per_epoch; ++step) {
      if (step == warmup) clock.start();
      const int64_t first = step * local_batch;
      const ch03::Batch batch = ch03::gather_batch(data.train.images, data.train.labels, indices, first,
                                                   std::min(local_batch, sampler.num_samples() - first));
      // Note: [one step with a BucketReducer] in reducer.hpp.
      optimizer.zero_grad();
      const torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(batch.images), batch.labels);
      loss.backward();
      reducer.finish();
      optimizer.step();
      const int64_t n = batch.labels.size(0);
      loss_sum[0] += loss.detach().to(torch::kFloat64) * static_cast<double>(n);
      loss_sum[1] += static_cast<double>(n);
      if (step >= warmup) epoch_timed_samples += n * ranks;
    }
    const double epoch_timed = clock.stop();
    const double epoch_seconds = workbook::now_seconds() - started;
    comm->all_reduce(loss_sum, workbook::ReduceOp::Sum);  // the reducer is idle between steps
    ch03::broadcast_model(*model, *comm, 0);              // rank 0's BatchNorm running statistics
    eval = ch03::evaluate_distributed(*model, data.test.images, data.test.labels, kEvalBatch, *comm);

    epoch_seconds_sum += epoch_seconds;
    timed_seconds += epoch_timed;
    timed_samples += epoch_timed_samples;
    const double train_loss = loss_sum[0].item<double>() / loss_sum[1].item<double>();
    const double rate = epoch_timed > 0 ? static_cast<double>(epoch_timed_samples) / epoch_timed : 0.0;
    const int64_t peak = workbook::peak_memory_bytes(device);
    if (leader) {
      fmt::print("{}\n", table.row({fmt::format("{}", epoch), fmt::format("{:.4f}", train_loss),
                                    fmt::format("{:.4f}", eval.mean_loss), fmt::format("{:.4f}", eval.accuracy()),
                                    fmt::format("{:.2f}", epoch_seconds), fmt::format("{:.1f}", rate),
                                    workbook::format_bytes(peak)}));
      std::fflush(stdout);
    }
    json.write({{"type", "epoch"}, {"chapter", "ch04"}, {"epoch", epoch}, {"train_loss", train_loss},
                {"test_loss", eval.mean_loss}, {"test_accuracy", eval.accuracy()}, {"epoch_s", epoch_seconds},
                {"samples_per_s", rate}, {"peak_mem_bytes", peak}});
  }

  const int64_t peak = workbook::largest_peak_memory_bytes(*comm);
  const std::string hash = workbook::weights_sha256(*model);  // equal to ch03_train's at 2 ranks
  const double samples_per_s = timed_seconds > 0 ? static_cast<double>(timed_samples) / timed_seconds : 0.0;
  json.write({{"type", "result"},
              {"chapter", "ch04"},
              {"config", "DDP, ring all-reduce, " + reducer_mode},
              {"device", device.str()},
              {"ranks", ranks},
              {"threads", flags.threads},
              {"epochs", flags.epochs},
              {"batch", flags.batch},
              {"local_batch", local_batch},
              {"reducer", reducer_mode},
              {"buckets", reducer.buckets().size()},
              {"train_samples", data.train.size()},
              {"test_accuracy", eval.accuracy()},
              {"test_correct", eval.correct},
              {"test_loss", eval.mean_loss},
              {"samples_per_s", samples_per_s},
              {"epoch_s", epoch_seconds_sum / static_cast<double>(flags.epochs)},
              {"peak_mem_bytes", peak},
              {"weights_sha256", hash}});
  if (leader)
    fmt::print("result: test accuracy {:.4f} ({}/{}), {:.1f} samples/s over {} rank(s), peak memory per rank {}, "
               "weights {}\n",
               eval.accuracy(), eval.correct, eval.total, samples_per_s, ranks, workbook::format_bytes(peak),
               hash.substr(0, 16));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::run_distributed_main([&](const workbook::LaunchEnv& env) { return train(env, argc, argv); });
}
