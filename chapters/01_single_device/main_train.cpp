// main_train.cpp — ch01_train: FashionCNN on Fashion-MNIST on one device.
//
//   ch01_train [--epochs 1] [--batch 100] [--lr 1e-3] [--device cpu|cuda]
//              [--threads N] [--train-samples N] [--data DIR] [--json FILE]
//              [--device-adam] [--cuda-graph]
//
// Prints a table row per epoch and writes JSON lines (--json); the last line
// is the run's result. This program is the baseline every later chapter's
// speedup is measured against.
#include <fmt/format.h>

#include "cuda_graph.hpp"
#include "single_device.hpp"
#include "workbook/device.hpp"
#include "workbook/errors.hpp"
#include "workbook/epoch_meter.hpp"
#include "workbook/memory.hpp"
#include "workbook/models.hpp"
#include "workbook/program.hpp"

namespace {

constexpr int64_t kWarmupSteps = 5;      // untimed steps at the start of the first epoch
constexpr int64_t kEvalBatch = 1000;

int train(workbook::Program& program) {
  bool device_adam = false, cuda_graph = false;
  program.cli().add_flag("--device-adam", device_adam,
                         "Adam with its state and step count on the device (cuda_graph.hpp), without the graph");
  program.cli().add_flag("--cuda-graph", cuda_graph,
                         "capture the train step once as a CUDA graph and replay it (--device cuda; Adam as "
                         "--device-adam)");
  const workbook::TrainFlags& flags = program.parse();
  const torch::Device device = program.device();
  WB_CHECK(!cuda_graph || device.is_cuda(), "--cuda-graph needs --device cuda (a graph is a GPU's)");
  torch::manual_seed(flags.seed);
  const workbook::FashionMnist data = program.load_data();  // all of it on the device

  auto model = std::make_shared<workbook::FashionCNN>();
  model->to(device);
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (device_adam || cuda_graph) optimizer = std::make_unique<ch01::DeviceAdam>(model->parameters(), flags.lr);
  else optimizer = std::make_unique<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(flags.lr));
  ch01::StepFn step = [&](const ch01::Batch& batch) { return ch01::train_step(*model, *optimizer, batch); };
  if (cuda_graph) step = ch01::captured_step(step, flags.batch);
  const std::string config = cuda_graph ? "single device, CUDA graph" : device_adam ? "single device, device Adam"
                                                                                    : "single device";

  program.say("ch01_train: FashionCNN ({} parameters), {} train / {} test samples, batch {}, {} lr {}, "
              "device {}, {} thread(s), train step {}",
              workbook::count_parameters(*model), data.train.size(), data.test.size(), flags.batch,
              device_adam || cuda_graph ? "device Adam" : "Adam", flags.lr, device.str(), flags.threads,
              cuda_graph ? "captured as a CUDA graph" : "eager");
  workbook::EpochMeter meter(program, kWarmupSteps);  // the rows; ch01::train_epoch times its own steps
  ch01::EvalResult eval;
  for (int epoch = 1; epoch <= flags.epochs; ++epoch) {
    const torch::Tensor order = ch01::epoch_order(data.train.size(), flags.seed, epoch, /*shuffle=*/true);
    workbook::ProgressBar bar(fmt::format("epoch {}", epoch), ch01::batches_per_epoch(data.train.size(), flags.batch),
                              workbook::stdout_is_terminal());
    const double started = workbook::now_seconds();
    ch01::EpochStats stats =
        ch01::train_epoch(*model, step, data.train.images, data.train.labels, order, flags.batch, device,
                          epoch == 1 ? kWarmupSteps : 0, [&](int64_t done, int64_t total) { bar.update(done); });
    workbook::synchronize(device);
    const workbook::EpochTotals totals{epoch, stats.mean_loss, workbook::now_seconds() - started,
                                       stats.samples_per_s()};
    bar.finish();
    eval = ch01::evaluate(*model, data.test.images, data.test.labels, kEvalBatch, device);
    meter.record(totals, stats.timed_seconds, stats.timed_samples);
    meter.report(totals, eval.mean_loss, eval.accuracy());
  }

  workbook::RunResult result = meter.result(config);
  result.train_samples = data.train.size();
  result.evaluated(eval.accuracy(), eval.mean_loss, eval.correct, eval.total);
  result.summary = fmt::format("result: test accuracy {:.4f} ({}/{}), {:.1f} samples/s, {:.2f} s/epoch, peak memory {}",
                               eval.accuracy(), eval.correct, eval.total, result.samples_per_s, result.epoch_s,
                               workbook::format_bytes(result.peak_mem_bytes));
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::single_process_main(
      argc, argv, {"ch01_train", "Chapter 1: train FashionCNN on a single device (CPU or one GPU)"}, train);
}
