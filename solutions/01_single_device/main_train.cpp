// main_train.cpp — ch01_train: FashionCNN on Fashion-MNIST on one device.
//
//   ch01_train [--epochs 1] [--batch 100] [--lr 1e-3] [--device cpu|cuda]
//              [--threads N] [--train-samples N] [--data DIR] [--json FILE]
//
// Prints a table row per epoch and writes JSON lines (--json); the last line
// is the run's result. This program is the baseline every later chapter's
// speedup is measured against.
#include <fmt/format.h>

#include "single_device.hpp"
#include "workbook/device.hpp"
#include "workbook/fashion_mnist.hpp"
#include "workbook/memory.hpp"
#include "workbook/models.hpp"
#include "workbook/progress.hpp"
#include "workbook/results.hpp"
#include "workbook/timing.hpp"
#include "workbook/train_flags.hpp"

namespace {

constexpr int64_t kWarmupSteps = 5;      // untimed steps at the start of the first epoch
constexpr int64_t kEvalBatch = 1000;

int train(int argc, char** argv) {
  CLI::App app{"Chapter 1: train FashionCNN on a single device (CPU or one GPU)", "ch01_train"};
  workbook::TrainFlags flags;
  workbook::add_train_flags(app, flags);
  workbook::parse_train_flags(app, flags, argc, argv);

  const torch::Device device = workbook::parse_device(flags.device);
  torch::manual_seed(flags.seed);
  const workbook::FashionMnist data = workbook::load_training_data(flags, device);  // all of it on the device

  auto model = std::make_shared<workbook::FashionCNN>();
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(flags.lr));
  workbook::JsonLines json(flags.json);

  fmt::print("ch01_train: FashionCNN ({} parameters), {} train / {} test samples, batch {}, Adam lr {}, "
             "device {}, {} thread(s)\n",
             workbook::count_parameters(*model), data.train.size(), data.test.size(), flags.batch, flags.lr,
             device.str(), flags.threads);
  workbook::Table table({{"epoch", 5}, {"train_loss", 10}, {"test_loss", 9}, {"test_acc", 8},
                         {"epoch_s", 8}, {"samples/s", 10}, {"peak_mem", 10}});
  fmt::print("{}\n", table.header());

  double epoch_seconds_sum = 0.0, timed_seconds = 0.0;
  int64_t timed_samples = 0;
  ch01::EvalResult eval;
  for (int epoch = 1; epoch <= flags.epochs; ++epoch) {
    const torch::Tensor order = ch01::epoch_order(data.train.size(), flags.seed, epoch, /*shuffle=*/true);
    workbook::ProgressBar bar(fmt::format("epoch {}", epoch), ch01::batches_per_epoch(data.train.size(), flags.batch),
                              workbook::stdout_is_terminal());
    const double started = workbook::now_seconds();
    ch01::EpochStats stats =
        ch01::train_epoch(*model, optimizer, data.train.images, data.train.labels, order, flags.batch, device,
                          epoch == 1 ? kWarmupSteps : 0, [&](int64_t done, int64_t total) { bar.update(done); });
    workbook::synchronize(device);
    const double epoch_seconds = workbook::now_seconds() - started;
    bar.finish();
    eval = ch01::evaluate(*model, data.test.images, data.test.labels, kEvalBatch, device);

    epoch_seconds_sum += epoch_seconds;
    timed_seconds += stats.timed_seconds;
    timed_samples += stats.timed_samples;
    const int64_t peak = workbook::peak_memory_bytes(device);
    fmt::print("{}\n", table.row({fmt::format("{}", epoch), fmt::format("{:.4f}", stats.mean_loss),
                                  fmt::format("{:.4f}", eval.mean_loss), fmt::format("{:.4f}", eval.accuracy()),
                                  fmt::format("{:.2f}", epoch_seconds), fmt::format("{:.1f}", stats.samples_per_s()),
                                  workbook::format_bytes(peak)}));
    std::fflush(stdout);  // a row per epoch also when stdout is a file (a cluster job's log)
    json.write({{"type", "epoch"}, {"chapter", "ch01"}, {"epoch", epoch}, {"train_loss", stats.mean_loss},
                {"test_loss", eval.mean_loss}, {"test_accuracy", eval.accuracy()}, {"epoch_s", epoch_seconds},
                {"samples_per_s", stats.samples_per_s()}, {"peak_mem_bytes", peak}});
  }

  const double samples_per_s = timed_seconds > 0 ? static_cast<double>(timed_samples) / timed_seconds : 0.0;
  const nlohmann::json result = {{"type", "result"},
                                 {"chapter", "ch01"},
                                 {"config", "single device"},
                                 {"device", device.str()},
                                 {"ranks", 1},
                                 {"threads", flags.threads},
                                 {"epochs", flags.epochs},
                                 {"batch", flags.batch},
                                 {"train_samples", data.train.size()},
                                 {"test_accuracy", eval.accuracy()},
                                 {"test_correct", eval.correct},
                                 {"test_loss", eval.mean_loss},
                                 {"samples_per_s", samples_per_s},
                                 {"epoch_s", epoch_seconds_sum / flags.epochs},
                                 {"peak_mem_bytes", workbook::peak_memory_bytes(device)}};
  json.write(result);
  fmt::print("result: test accuracy {:.4f} ({}/{}), {:.1f} samples/s, {:.2f} s/epoch, peak memory {}\n",
             eval.accuracy(), eval.correct, eval.total, samples_per_s, epoch_seconds_sum / flags.epochs,
             workbook::format_bytes(workbook::peak_memory_bytes(device)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::run_main([&] { return train(argc, argv); });
}
