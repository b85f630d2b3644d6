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
#include <fmt/format.h>

#include "ddp.hpp"
#include "workbook/device.hpp"
#include "workbook/errors.hpp"
#include "workbook/fashion_mnist.hpp"
#include "workbook/memory.hpp"
#include "workbook/progress.hpp"
#include "workbook/results.hpp"
#include "workbook/timing.hpp"
#include "workbook/train_flags.hpp"
#include "workbook/weights_hash.hpp"

namespace {

constexpr int64_t kWarmupSteps = 5;  // untimed steps at the start of the first epoch trained
constexpr int64_t kEvalBatch = 1000;

int train(const workbook::LaunchEnv& env, int argc, char** argv) {
  CLI::App app{"Chapter 3: train FashionCNN with hand-written DDP (one process per rank)", "ch03_train"};
  workbook::TrainFlags flags;
  workbook::add_train_flags(app, flags);
  workbook::CommunicatorOptions comm_options = workbook::CommunicatorOptions::from_environment();
  workbook::add_distributed_flags(app, comm_options);
  std::optional<std::filesystem::path> checkpoint;
  bool resume = false;
  std::string allreduce = "flat";
  app.add_option("--checkpoint", checkpoint, "save model and optimizer here after every epoch (rank 0, atomically)");
  app.add_flag("--resume", resume, "continue from --checkpoint when it exists");
  app.add_option("--allreduce", allreduce, "gradient averaging: flat (one all-reduce) or per-parameter")
      ->check(CLI::IsMember({"flat", "per-parameter"}))
      ->capture_default_str();
  flags.threads = workbook::default_threads_per_rank(env);
  workbook::parse_train_flags(app, flags, argc, argv);

  // What can be checked before any communication is checked first, the same
  // way on every rank: each says it and exits, and no rank waits for another.
  const int ranks = env.world_size;
  WB_CHECK(flags.batch % ranks == 0,
           "--batch {} is the global batch and must divide evenly among the {} ranks (each trains on batch / "
           "ranks samples per step): use a multiple of {}",
           flags.batch, ranks, ranks);
  WB_CHECK(!resume || checkpoint, "--resume needs --checkpoint FILE");
  WB_CHECK(flags.train_samples < 0 || flags.train_samples >= ranks,
           "--train-samples {} is fewer than the {} ranks: every rank needs at least one sample",
           flags.train_samples, ranks);
  const torch::Device requested = workbook::parse_device(flags.device);
  const int64_t local_batch = flags.batch / ranks;

  std::unique_ptr<workbook::Communicator> comm =
      workbook::make_communicator(workbook::backend_for(requested), env, comm_options);
  const torch::Device device = comm->device();  // on CUDA: this rank's GPU, chosen by local rank
  const bool leader = comm->rank() == 0;

  const workbook::FashionMnist data = workbook::load_training_data(flags, device);
  // Ranks start from different weights on purpose: broadcast_model must make them one model.
  torch::manual_seed(flags.seed + static_cast<uint64_t>(comm->rank()));
  auto model = std::make_shared<workbook::FashionCNN>();
  model->to(device);
  ch03::broadcast_model(*model, *comm, 0);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(flags.lr));
  const auto average_gradients = allreduce == "flat" ? ch03::all_reduce_gradients
                                                     : ch03::all_reduce_gradients_per_parameter;

  int64_t epochs_done = 0;
  if (resume && std::filesystem::exists(*checkpoint)) {
    epochs_done = ch03::load_checkpoint(*checkpoint, *model, optimizer);
    WB_CHECK(epochs_done <= flags.epochs, "{} holds {} epochs, more than --epochs {}", checkpoint->string(),
             epochs_done, flags.epochs);
  }

  ch03::DistributedSampler sampler(data.train.size(), ranks, comm->rank(), /*shuffle=*/true, flags.seed);
  const int64_t steps_per_epoch = (sampler.num_samples() + local_batch - 1) / local_batch;
  workbook::JsonLines json(leader ? flags.json : std::nullopt);
  if (leader) {
    fmt::print("ch03_train: FashionCNN, {} rank(s) ({}), global batch {} = {} x {}, {} train / {} test samples, "
               "Adam lr {}, device {}, {} thread(s) per rank, gradients: {} all-reduce{}\n",
               ranks, env.launcher, flags.batch, ranks, local_batch, data.train.size(), data.test.size(), flags.lr,
               device.str(), flags.threads, allreduce, epochs_done > 0 ? fmt::format(", resumed after epoch {}", epochs_done) : "");
    if (sampler.total_size() > data.train.size())
      fmt::print("note: {} samples do not divide among {} ranks: {} are repeated each epoch (the sampler pads)\n",
                 data.train.size(), ranks, sampler.total_size() - data.train.size());
  }
  workbook::Table table({{"epoch", 5}, {"train_loss", 10}, {"test_loss", 9}, {"test_acc", 8}, {"epoch_s", 8},
                         {"samples/s", 10}, {"peak_mem", 10}});
  if (leader) fmt::print("{}\n", table.header());

  double epoch_seconds_sum = 0.0, timed_seconds = 0.0;
  int64_t timed_samples = 0, epochs_trained = 0;
  ch03::EvalResult eval;
  for (int64_t epoch = epochs_done + 1; epoch <= flags.epochs; ++epoch) {
    sampler.set_epoch(epoch);
    // Dropout's masks: a stream per rank and epoch, so a resumed run draws
    // exactly what an uninterrupted one would have.
    torch::manual_seed(flags.seed * 1000003 + static_cast<uint64_t>(epoch) * 1009 + static_cast<uint64_t>(comm->rank()));
    const torch::Tensor indices = sampler.indices();
    const int64_t warmup = epochs_trained == 0 ? std::min(kWarmupSteps, steps_per_epoch - 1) : 0;
    // Note: mpirun gives its ranks a pseudo-terminal for stdout, so rank 0 sees
    // a terminal even when the job's output goes to a file: a multi-rank run
    // draws no bar (its per-epoch rows are the progress).
    workbook::ProgressBar bar(fmt::format("epoch {}", epoch), steps_per_epoch,
                              leader && !env.distributed() && workbook::stdout_is_terminal());
    torch::Tensor loss_sum = torch::zeros({2}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
    workbook::Stopwatch clock(device);
    const double started = workbook::now_seconds();
    int64_t epoch_timed_samples = 0;
    for (int64_t step = 0; step < steps_per_epoch; ++step) {
      if (step == warmup) clock.start();
      const int64_t first = step * local_batch;
      const ch03::Batch batch =
          ch03::gather_batch(data.train.images, data.train.labels, indices, first,
                             std::min(local_batch, sampler.num_samples() - first));
      torch::Tensor loss;
      if (allreduce == "flat") {
        loss = ch03::ddp_train_step(*model, optimizer, batch, *comm);
      } else {  // the same step, with the given per-parameter averaging
        optimizer.zero_grad();
        loss = torch::nn::functional::cross_entropy(model->forward(batch.images), batch.labels);
        loss.backward();
        average_gradients(*model, *comm);
        optimizer.step();
        loss = loss.detach();
      }
      const int64_t n = batch.labels.size(0);
      loss_sum[0] += loss.to(torch::kFloat64) * static_cast<double>(n);
      loss_sum[1] += static_cast<double>(n);
      if (step >= warmup) epoch_timed_samples += n * ranks;
      bar.update(step + 1);
    }
    const double epoch_timed = clock.stop();
    const double epoch_seconds = workbook::now_seconds() - started;
    bar.finish();
    comm->all_reduce(loss_sum, workbook::ReduceOp::Sum);  // the training loss over every rank's samples
    // BatchNorm's running statistics were updated from each rank's own
    // batches; evaluate (and save) rank 0's. (PyTorch's DDP broadcasts them
    // before every forward pass; once per epoch is enough for evaluation.)
    ch03::broadcast_model(*model, *comm, 0);
    eval = ch03::evaluate_distributed(*model, data.test.images, data.test.labels, kEvalBatch, *comm);
    if (checkpoint) ch03::save_checkpoint(*checkpoint, *model, optimizer, epoch, *comm);

    ++epochs_trained;
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
    json.write({{"type", "epoch"}, {"chapter", "ch03"}, {"epoch", epoch}, {"train_loss", train_loss},
                {"test_loss", eval.mean_loss}, {"test_accuracy", eval.accuracy()}, {"epoch_s", epoch_seconds},
                {"samples_per_s", rate}, {"peak_mem_bytes", peak}});
  }
  if (epochs_trained == 0) {  // resumed from a finished run: report what the checkpoint holds
    ch03::broadcast_model(*model, *comm, 0);
    eval = ch03::evaluate_distributed(*model, data.test.images, data.test.labels, kEvalBatch, *comm);
  }

  const int64_t peak = workbook::largest_peak_memory_bytes(*comm);  // what one rank needs
  const double samples_per_s = timed_seconds > 0 ? static_cast<double>(timed_samples) / timed_seconds : 0.0;
  const std::string hash = workbook::weights_sha256(*model);
  json.write({{"type", "result"},
              {"chapter", "ch03"},
              {"config", "DDP"},
              {"device", device.str()},
              {"ranks", ranks},
              {"threads", flags.threads},
              {"epochs", flags.epochs},
              {"epochs_trained", epochs_trained},
              {"batch", flags.batch},
              {"local_batch", local_batch},
              {"allreduce", allreduce},
              {"train_samples", data.train.size()},
              {"test_accuracy", eval.accuracy()},
              {"test_correct", eval.correct},
              {"test_loss", eval.mean_loss},
              {"samples_per_s", samples_per_s},
              {"epoch_s", epochs_trained > 0 ? epoch_seconds_sum / static_cast<double>(epochs_trained) : 0.0},
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
